"""`make bench`: the speed ladder of the reference solutions against cuBLAS, on the GPU here.

For each shape, every step that supports it is built and timed together with cuBLAS in one
interleaved run (the grader's timing: CUDA events per call, L2 flushed, median), so each ratio
comes from one run under one clock and power state. Each timed output is then checked against
the fp32 reference: a fast wrong kernel is reported as wrong, not as fast.
The seed's Triton kernel (grader/commands/triton_seed.py: a persistent TMA GEMM, autotuned per shape before
timing) is timed in the same run, plain and warp-specialized, as rows "triton-seed" and "triton-seed-ws";
where Triton cannot run them the rows are absent and the table says why.
Two tables: the squares (every step), and the linear layers of two public LLM families at 128 to 8192
tokens (steps 8 and 10, the steps after 10, cuBLAS and the Triton seed), `--table` picks one or both,
`--tokens` some token counts of the second (so a long run can be split), and `--merge` writes the tables of
such split runs (their OUT.json, from one GPU) as one report, timing nothing.
Writes OUT.md (tables), OUT.json and OUT.png (TFLOP/s per step on the squares, cuBLAS as a line per
shape; share of cuBLAS per layer).
"""

from __future__ import annotations

import datetime
import json
import math
import shlex
import sys
from pathlib import Path

from grader.core.options import OneLineParser
from grader.core import outputs
from grader.core.build import REPO_ROOT
from grader.core.steps import STEPS, Shape, format_shape

BENCH_SHAPES: tuple[Shape, ...] = (
    (2048, 2048, 2048),
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (8192, 4096, 1024),  # small K: the epilogue and the pipeline's fill weigh more
    (4096, 4096, 16384),  # large K: the main loop is everything
)


# (name, N, K) of D = A @ W^T for each linear layer: W is (out features, in features); q, k and v
# projections fused, gate and up fused, as inference engines run them.
MODEL_LAYERS: tuple[tuple[str, int, int], ...] = (
    ("Llama-3-8B qkv", 6144, 4096),
    ("Llama-3-8B o", 4096, 4096),
    ("Llama-3-8B gate_up", 28672, 4096),
    ("Llama-3-8B down", 4096, 14336),
    ("Qwen2.5-7B qkv", 4608, 3584),
    ("Qwen2.5-7B o", 3584, 3584),
    ("Qwen2.5-7B gate_up", 37888, 3584),
    ("Qwen2.5-7B down", 3584, 18944),
)
MODEL_TOKENS = (128, 256, 1000, 8192)  # M: a decode batch, short and medium prompts, a long prefill
MODEL_STEPS = (8, 10, 11, 12)


def model_shapes(tokens: tuple[int, ...]) -> list[tuple[str, Shape]]:
    return [(name, (m, n, k)) for m in tokens for name, n, k in MODEL_LAYERS]


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m grader.commands.bench", description=__doc__)
    parser.add_argument("--out", default=str(REPO_ROOT / "reports" / "bench"), help="path prefix of the .md/.json/.png")
    parser.add_argument("--table", choices=("all", "squares", "models"), default="all")
    parser.add_argument("--tokens", type=_tokens, default=MODEL_TOKENS,
                        help=f"token counts (M) of the model table, comma-separated (default {MODEL_TOKENS})")
    parser.add_argument("--merge", nargs="+", metavar="JSON", type=Path,
                        help="write these earlier runs' OUT.json (split runs on one GPU) as one report; time nothing")
    args = parser.parse_args(argv)
    try:
        out = Path(args.out)
        for suffix in (".json", ".md", ".png"):
            outputs.writable_file(out.with_suffix(suffix), "--out")
        if args.merge:
            return _write(merged(args.merge), out)
    except (outputs.UnwritableOutput, UnmergeableRuns) as err:
        print(f"bench: {err}", file=sys.stderr)
        return 2

    import torch

    from grader.judge.cli import detect_gpu, resolve_arch_and_track

    gpu_name, gpu_arch, sm_count = detect_gpu()
    if gpu_arch is None:
        print("bench: needs a Hopper or Blackwell GPU (it times the reference solutions against cuBLAS)", file=sys.stderr)
        return 2
    arch, track = resolve_arch_and_track("auto", "auto", gpu_name, gpu_arch)
    solutions = REPO_ROOT / "solutions"
    steps = [spec for spec in STEPS[track].values() if (solutions / track / spec.file_name).exists()]

    triton_seed, triton_absent = _triton_seed()
    rows = []
    if args.table in ("all", "squares"):
        for shape in BENCH_SHAPES:
            runnable = [spec for spec in steps if spec.shapes.violation(shape) is None]
            rows.extend(_bench_shape(shape, runnable, track, arch, sm_count, triton_seed))
    if args.table in ("all", "models"):
        for layer, shape in model_shapes(args.tokens):
            runnable = [spec for spec in steps if spec.number in MODEL_STEPS and spec.shapes.violation(shape) is None]
            rows.extend({**row, "layer": layer}
                        for row in _bench_shape(shape, runnable, track, arch, sm_count, triton_seed))

    arguments = argv if argv is not None else sys.argv[1:]
    command = "python -m grader.commands.bench " + " ".join(shlex.quote(a) for a in arguments)
    payload = {
        "gpu": gpu_name,
        "driver": driver_version(),
        "torch": torch.__version__,
        "track": track,
        "date": datetime.date.today().isoformat(),
        "command": command.strip(),
        "triton_absent": triton_absent,
        "rows": rows,
    }
    return _write(payload, out)


def _write(payload: dict, out: Path) -> int:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(payload, indent=2) + "\n")
    out.with_suffix(".md").write_text(markdown(payload))
    draw(payload, out.with_suffix(".png"))
    print(markdown(payload))
    print(f"written: {out}.md, {out}.json, {out}.png")
    return 0 if all(row["correct"] for row in payload["rows"]) else 1


class UnmergeableRuns(Exception):
    """--merge was given files that are not bench runs, or runs from different GPUs or software."""


def merged(paths: list[Path]) -> dict:
    """One payload from split runs: their rows, squares first; their commands and dates listed."""
    runs = []
    for path in paths:
        try:
            run = json.loads(path.read_text())
        except (OSError, ValueError) as err:
            raise UnmergeableRuns(f"--merge: {path} cannot be read as JSON ({type(err).__name__}: {err})") from None
        if not (isinstance(run, dict) and isinstance(run.get("rows"), list) and isinstance(run.get("command"), str)):
            raise UnmergeableRuns(f"--merge: {path} is not the JSON of a bench run (it has no rows and command)")
        runs.append(run)
    for key in ("gpu", "driver", "torch", "track"):
        values = sorted({str(run.get(key)) for run in runs})
        if len(values) > 1:
            raise UnmergeableRuns(f"--merge: the runs differ in {key} ({', '.join(values)}); merge runs of one GPU")
    rows = [row for run in runs for row in run["rows"]]
    return {
        **{key: runs[0].get(key) for key in ("gpu", "driver", "torch", "track")},
        "date": ", ".join(dict.fromkeys(run.get("date", "?") for run in runs)),
        "command": "; ".join(run["command"] for run in runs),
        "triton_absent": next((run["triton_absent"] for run in runs if run.get("triton_absent")), None),
        "rows": [row for row in rows if "layer" not in row] + [row for row in rows if "layer" in row],
    }


TRITON_ROWS = {"triton-seed": False, "triton-seed-ws": True}  # row name -> warp_specialize


def _tokens(text: str) -> tuple[int, ...]:
    try:
        tokens = tuple(int(word) for word in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of token counts") from None
    if not tokens or min(tokens) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: token counts are positive")
    return tokens


def _triton_seed():
    """The seed's Triton module, and None; or None and why it cannot run here."""
    try:
        from grader.commands import triton_seed
    except Exception as err:  # no Triton, or one without the tensor-descriptor API the seed uses
        return None, f"the seed's Triton kernel cannot be imported here ({type(err).__name__}: {err})"
    return triton_seed, None


def _bench_shape(shape: Shape, specs: list, track: str, arch: str, sm_count: int, triton_seed) -> list[dict]:
    import torch

    from grader.core import build
    from grader.analysis import diagnosis, timing
    from grader.analysis.diagnosis import random_inputs

    solutions = REPO_ROOT / "solutions"
    a, b = random_inputs(shape, seed=sum(shape))
    outputs, calls = {}, {}
    for spec in specs:
        print(f"bench: building step {spec.number} at {format_shape(shape)}", file=sys.stderr, flush=True)
        factory = build.kernel_factory(solutions, track, spec)
        prim_func = build.make_prim_func(factory, spec, shape, sm_count)
        kernel = build.launcher(build.compile_module(prim_func, arch), build.scratch_buffers(prim_func))
        out = torch.empty((shape[0], shape[1]), dtype=torch.float16, device="cuda")
        outputs[spec.number] = out
        calls[spec.number] = lambda kernel=kernel, out=out: kernel(a, b, out)
    if triton_seed is not None:
        for name, warp_specialize in TRITON_ROWS.items():
            print(f"bench: autotuning {name} at {format_shape(shape)}", file=sys.stderr, flush=True)
            out = torch.empty((shape[0], shape[1]), dtype=torch.float16, device="cuda")
            triton_seed.matmul(a, b, out, warp_specialize)  # the autotuner's trials run here, not in the timing
            outputs[name] = out
            calls[name] = lambda out=out, ws=warp_specialize: triton_seed.matmul(a, b, out, ws)
    cublas_out = torch.empty((shape[0], shape[1]), dtype=torch.float16, device="cuda")
    calls["cublas"] = lambda: torch.matmul(a, b.T, out=cublas_out)
    print(f"bench: timing {len(calls) - 1} kernels and cuBLAS at {format_shape(shape)}", file=sys.stderr, flush=True)
    ms = timing.median_ms_interleaved(calls)
    reference = diagnosis.reference(a, b)
    rows = [
        {
            "step": number,
            "shape": list(shape),
            "kernel_ms": ms[number],
            "cublas_ms": ms["cublas"],
            "correct": diagnosis.compare(outputs[number], reference).passed,
        }
        for number in outputs
    ]
    # each shape's result as it comes: a run cut short (a time limit) still shows the shapes it finished
    print(progress_line(shape, rows), file=sys.stderr, flush=True)
    return rows


def progress_line(shape: Shape, rows: list[dict]) -> str:
    """One shape's ratios to cuBLAS, as the log shows them when the shape is done."""
    ratios = ", ".join(
        f"{implementation_name(row['step'])} {share_of_cublas(row):.3f}x" + ("" if row["correct"] else " (wrong)")
        for row in rows
    )
    return f"bench: {format_shape(shape)} done: {ratios} (cuBLAS {rows[0]['cublas_ms']:.4f} ms)"


def driver_version() -> str:
    import subprocess

    done = subprocess.run(
        ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True
    )
    return next(iter(done.stdout.split()), "unknown")  # one line per GPU, one driver for all


def share_of_cublas(row: dict) -> float:
    """The ratio every table shows: cuBLAS time / kernel time."""
    return row["cublas_ms"] / row["kernel_ms"]


def implementation_name(step: int | str) -> str:
    return f"step {step}" if isinstance(step, int) else step


def tflops(row: dict, key: str) -> float:
    m, n, k = row["shape"]
    return 2 * m * n * k / (row[key] * 1e-3) / 1e12


def markdown(payload: dict) -> str:
    lines = [
        f"# Speed ladder: {payload['track']} reference solutions vs cuBLAS",
        "",
        f"{payload['gpu']}, driver {payload['driver']}, torch {payload['torch']}, {payload['date']}; "
        f"`{payload['command']}`. Per shape, all steps and cuBLAS (`torch.matmul`) were timed in one "
        "interleaved run: CUDA events per call, each round queued ahead of the GPU, L2 flushed before each call, "
        "median. "
        "Ratio = cuBLAS time / kernel time.",
        "",
        *([f"Rows triton-seed and triton-seed-ws are absent: {payload['triton_absent']}.", ""]
          if payload.get("triton_absent") else []),
    ]
    squares = [row for row in payload["rows"] if "layer" not in row]
    layers = [row for row in payload["rows"] if "layer" in row]
    if squares:
        lines += ["## Squares", "", *_table(squares, with_layer=False), ""]
    if layers:
        lines += ["## Linear layers of LLMs (Llama-3-8B, Qwen2.5-7B), M = tokens", "",
                  "A step absent from a row does not take the shape (steps 8 and 10 need tile multiples).", "",
                  *_summary(layers), "", *_table(layers, with_layer=True), ""]
    return "\n".join(lines)


def _table(rows: list[dict], with_layer: bool) -> list[str]:
    lines = [("| layer " if with_layer else "") + "| step | shape (M x N x K) | kernel ms | TFLOP/s | cuBLAS ms | "
             "cuBLAS TFLOP/s | ratio | correct |",
             ("|---" if with_layer else "") + "|---:|---|---:|---:|---:|---:|---:|---|"]
    for row in rows:
        lines.append(
            (f"| {row['layer']} " if with_layer else "")
            + f"| {row['step']} | {format_shape(tuple(row['shape']))} | {row['kernel_ms']:.4f} | "
            f"{tflops(row, 'kernel_ms'):.1f} | {row['cublas_ms']:.4f} | {tflops(row, 'cublas_ms'):.1f} | "
            f"{share_of_cublas(row):.3f}x | {'yes' if row['correct'] else 'NO'} |"
        )
    return lines


def _summary(rows: list[dict]) -> list[str]:
    """Per implementation: the shapes it ran, its lowest share of cuBLAS and the geometric mean (Triton: the
    better of its two variants per shape)."""
    shares: dict[str, dict[tuple, float]] = {}
    for row in rows:
        name = "triton-seed (better variant)" if row["step"] in TRITON_ROWS else f"step {row['step']}"
        share = share_of_cublas(row) if row["correct"] else 0.0
        key = tuple(row["shape"])
        shares.setdefault(name, {})[key] = max(share, shares.get(name, {}).get(key, 0.0))
    lines = ["| implementation | shapes | lowest share of cuBLAS | geometric mean |", "|---|---:|---:|---:|"]
    for name, by_shape in shares.items():
        values = list(by_shape.values())
        mean = math.exp(sum(math.log(v) for v in values) / len(values)) if min(values) > 0 else 0.0
        lines.append(f"| {name} | {len(values)} | {min(values):.3f}x | {mean:.3f}x |")
    return lines


def draw(payload: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    squares = [row for row in payload["rows"] if "layer" not in row]
    layers = [row for row in payload["rows"] if "layer" in row]
    panels = [rows for rows in (squares, layers) if rows]
    figure, all_axes = plt.subplots(len(panels), 1, figsize=(11, 5.5 * len(panels)), squeeze=False)
    if squares:
        _draw_squares(all_axes[0][0], payload, squares)
    if layers:
        _draw_layers(all_axes[-1][0], payload, layers)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def _draw_layers(axes, payload: dict, rows: list[dict]) -> None:
    """Share of cuBLAS per layer shape, one marker per implementation."""
    shapes = list(dict.fromkeys(tuple(row["shape"]) for row in rows))
    names = list(dict.fromkeys(row["step"] for row in rows))
    for index, name in enumerate(names):
        points = [(shapes.index(tuple(row["shape"])), share_of_cublas(row))
                  for row in rows if row["step"] == name]
        axes.plot([x for x, _ in points], [y for _, y in points], "o" if isinstance(name, int) else "s",
                  color=f"C{index}", label=implementation_name(name))
    axes.axhline(1.0, color="black", linestyle="--", linewidth=1)
    labels = [f"{next(row['layer'] for row in rows if tuple(row['shape']) == s)} M={s[0]}" for s in shapes]
    axes.set_xticks(range(len(shapes)), labels, rotation=75, fontsize=7)
    axes.set_ylabel("cuBLAS time / kernel time")
    axes.set_title(f"LLM linear layers on {payload['gpu']} ({payload['date']}); dashed: cuBLAS")
    axes.legend(fontsize=8)
    axes.grid(alpha=0.3)


def _draw_squares(axes, payload: dict, rows: list[dict]) -> None:
    shapes = sorted({tuple(row["shape"]) for row in rows}, key=lambda s: s[0] * s[1] * s[2])
    steps = sorted({row["step"] for row in rows if isinstance(row["step"], int)})
    # the Triton rows stand right of step 10, one x position each
    x_of = {step: step for step in steps}
    x_of.update({name: max(steps, default=0) + 1 + i for i, name in enumerate(TRITON_ROWS)})
    for index, shape in enumerate(shapes):
        color = f"C{index}"
        shape_rows = [row for row in rows if tuple(row["shape"]) == shape]
        ladder = sorted((row for row in shape_rows if isinstance(row["step"], int)), key=lambda r: r["step"])
        axes.plot([row["step"] for row in ladder], [tflops(row, "kernel_ms") for row in ladder], "o-", color=color,
                  label=format_shape(shape))
        for row in shape_rows:
            if row["step"] in TRITON_ROWS:
                axes.plot(x_of[row["step"]], tflops(row, "kernel_ms"), "s", color=color)
        axes.axhline(tflops(shape_rows[0], "cublas_ms"), color=color, linestyle="--", linewidth=1)
    axes.set_xlabel("step")
    axes.set_ylabel("TFLOP/s")
    labels = {x_of[row["step"]]: str(row["step"]) for row in rows}
    axes.set_xticks(sorted(labels), [labels[x] for x in sorted(labels)])
    axes.set_title(f"{payload['track']} ladder on {payload['gpu']} ({payload['date']}); dashed: cuBLAS; "
                   "squares: the seed's Triton kernel")
    axes.legend(title="M x N x K", fontsize=8)
    axes.grid(alpha=0.3)


if __name__ == "__main__":
    sys.exit(main())
