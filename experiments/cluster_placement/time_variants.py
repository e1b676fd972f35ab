"""Time variants (variants.py) with cuBLAS, one interleaved run per shape, the grader's timing (CUDA events per
call, L2 flushed, median). Each variant's first output is checked against the fp32 reference; a wrong or failing
variant is reported and left out of the timing. Needs a Hopper GPU.

    python3 experiments/cluster_placement/time_variants.py --out OUT.json --shapes 2048,4096,8k4k1k \\
        step8 step8+in-clusters step9

Ratio = cuBLAS time / variant time.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import variants  # noqa: E402

NAMED_SHAPES = {"2048": (2048, 2048, 2048), "4096": (4096, 4096, 4096), "8192": (8192, 8192, 8192),
                "8k4k1k": (8192, 4096, 1024), "4k4k16k": (4096, 4096, 16384)}


def shape_of(text: str) -> tuple[int, int, int]:
    return NAMED_SHAPES.get(text) or tuple(int(x) for x in text.split("x"))


def build(name: str, folder: Path, shape, sm_count: int):
    """The variant's kernel function at `shape`, compiled (through its CUDA rewrite, if it has one)."""
    from grader.core import build as course_build

    spec, factory, building = variants.load(name, folder)
    with building:
        return course_build.compile_module(course_build.make_prim_func(factory, spec, shape, sm_count), "sm_90a")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--shapes", default="2048,4096,8k4k1k")
    parser.add_argument("names", nargs="+")
    args = parser.parse_args()

    import torch

    from grader.analysis import diagnosis, timing

    sm_count = torch.cuda.get_device_properties(0).multi_processor_count
    shapes = [shape_of(s) for s in args.shapes.split(",")]
    results = []
    folder = Path(tempfile.mkdtemp(prefix="variants-"))
    for shape in shapes:
        a, b = diagnosis.random_inputs(shape, seed=sum(shape))
        reference = diagnosis.reference(a, b)
        calls = {}
        for name in args.names:
            out = torch.full((shape[0], shape[1]), float("nan"), dtype=torch.float16, device="cuda")
            try:
                kernel = build(name, folder, shape, sm_count)
                kernel(a, b, out)
                torch.cuda.synchronize()
                correct = diagnosis.compare(out, reference).passed
            except Exception as err:  # a variant that no longer builds is reported, the others still run
                print(f"{name} at {shape}: failed: {type(err).__name__}: {str(err)[:300]}", flush=True)
                continue
            if not correct:
                print(f"{name} at {shape}: WRONG result, not timed", flush=True)
                continue
            calls[name] = lambda kernel=kernel, out=out: kernel(a, b, out)
        cublas_out = torch.empty((shape[0], shape[1]), dtype=torch.float16, device="cuda")
        calls["cublas"] = lambda: torch.matmul(a, b.T, out=cublas_out)
        ms = timing.median_ms_interleaved(calls)
        results += [{"shape": list(shape), "name": name, "ms": value, "ratio": ms["cublas"] / value}
                    for name, value in ms.items()]
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n")

    print("ratio = cuBLAS time / variant time")
    print("variant".ljust(40) + "".join(f"{'x'.join(map(str, s)):>16s}" for s in shapes))
    for name in dict.fromkeys(r["name"] for r in results):
        cells = {tuple(r["shape"]): r["ratio"] for r in results if r["name"] == name}
        print(name.ljust(40) + "".join(f"{cells[s]:16.3f}" if s in cells else " " * 16 for s in shapes))


if __name__ == "__main__":
    main()
