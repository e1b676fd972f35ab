"""Correctness, determinism and speed of the Hopper steps 10-12 at given shapes, one interleaved run per shape.

python experiments/every_shape/check_and_time.py --steps 10,11,12 --shapes 256x4096x4096,1000x1000x1000 [--json OUT]
    [--plans dp256,dp128,dp64,sk256,sk128]

--plans adds step 12 built with other decompositions than its own choice (dpW: whole tiles W columns
wide; skW: stream-K over W-wide tiles; a c1 suffix: clusters of one CTA; a q suffix: whole tiles in clusters of
2 x 2 CTAs, with --impl experiments/every_shape/cluster2x2; an sN suffix after a dp plan: at most N pipeline
stages, with --impl experiments/every_shape/stages; auto: the step's own choice), timed in the same run.
--plans-impl DIR[,DIR...] builds those plans from other trees than --impl (variants of step 12 beside the
solutions), each plan from each tree, labelled step12-TREE-PLAN where there are several trees. --time-wrong times
the kernels that failed their check too (their checks say so).

Per shape: each step that takes the shape is built (the grader's build), run on fresh random inputs
and compared with A.float() @ B.float().T (the grader's tolerance); a step with a workspace is run
twice, and its two outputs must be the same bits (locks left non-zero would hang or corrupt the
second run); then all of them
and cuBLAS are timed in one interleaved run (the grader's timing: L2 flushed, median).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from types import SimpleNamespace
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from grader.analysis import diagnosis, timing  # noqa: E402
from grader.core import build  # noqa: E402
from grader.core.steps import STEPS, format_shape  # noqa: E402


class ImpossiblePlan(ValueError):
    """A forced split-K plan that the shape cannot have: more ranges than clusters, or more than the K tiles."""


def forced_plan(module, name: str, shape, sm_count: int):
    """A Decomposition of step 12's module named dpW or skW (clusters of 2 CTAs), dpWc1 or skWc1 (of 1); an r64
    after the width (dp64r64c1): CTA tiles of 64 rows, else 128; a kS suffix on a sk plan (sk112k2): split-K, every
    tile's K tiles cut into S ranges, one per cluster (the tiles times S clusters at most, S at most the K tiles)."""
    m, n, k = shape
    if name == "auto":
        return module.plan_decomposition(m, n, k, sm_count)
    if name.endswith("x"):  # A and B swapped (experiments/every_shape/swap_ab): the plan of D^T = B A^T
        return dataclasses.replace(forced_plan(module, name[:-1], (n, m, k), sm_count), swap_ab=True)
    name, _, stages = name.partition("s") if name.startswith("dp") else (name, "", "")
    if stages:  # at most this many pipeline stages (experiments/every_shape/stages)
        return dataclasses.replace(forced_plan(module, name, shape, sm_count), max_stages=int(stages))
    if name.endswith("q"):  # clusters of 2 x 2 CTAs (experiments/every_shape/cluster2x2): whole tiles, 30 clusters
        width, _, rows = name[2:-1].partition("r")
        width, rows = int(width), int(rows or 128)
        tiles = -(-m // (2 * rows)) * -(-n // (2 * width))
        return module.Decomposition(rows, width, 4, tiles, -(-k // module.BLK_K), 30, 0, 0, k % 16 == 0, cluster_n=2)
    name, _, splits = name.rpartition("k") if name.startswith("sk") and "k" in name[2:] else (name, "", "")
    width, _, single = name[2:].partition("c")
    width, _, rows = width.partition("r")
    width, cluster, rows = int(width), 1 if single else 2, int(rows or 128)
    clusters, k_tiles = sm_count // cluster, -(-k // module.BLK_K)
    tiles = -(-m // (rows * cluster)) * -(-n // width)
    if name.startswith("dp"):
        return module.Decomposition(rows, width, cluster, tiles, k_tiles, clusters, 0, 0, k % 16 == 0)
    if splits:
        if tiles * int(splits) > clusters:
            raise ImpossiblePlan(f"{name}k{splits}: {tiles} tiles x {splits} splits are more than {clusters} clusters")
        if k_tiles < int(splits):  # a range would be empty: its tile's final range would wait for it forever
            raise ImpossiblePlan(f"{name}k{splits}: {k_tiles} K tiles are fewer than {splits} ranges")
        return module.Decomposition(rows, width, cluster, tiles, k_tiles, clusters, tiles, tiles * int(splits),
                                    k % 16 == 0, splits=int(splits))
    return module.stream_k(width, cluster, tiles, k_tiles, clusters, rows, k % 16 == 0)


def load(step: int, shape, sm_count: int, impl: Path, plan_name: str | None = None):
    spec = STEPS["hopper"][step]
    factory = build.kernel_factory(impl, "hopper", spec)
    if plan_name:
        plan = forced_plan(SimpleNamespace(**factory.__globals__), plan_name, shape, sm_count)
        prim_func = factory(*shape, sm_count, plan=plan)
    else:
        prim_func = build.make_prim_func(factory, spec, shape, sm_count)
    scratch = build.scratch_buffers(prim_func)
    return build.launcher(build.compile_module(prim_func, "sm_90a"), scratch), scratch


def check_kernel(kernel, scratch, shape, seed: int) -> dict:
    """Run `kernel` on random inputs into an output filled with NaN and compare it with the fp32 reference (the
    grader's tolerance): {"passed": ..., "detail": ... where wrong}; a kernel with a workspace runs twice, and
    "same_bits" says whether its two outputs are the same bits."""
    a, b = diagnosis.random_inputs(shape, seed)
    ref = diagnosis.reference(a, b)
    outs = []
    for _ in range(2 if scratch else 1):
        d = torch.full((shape[0], shape[1]), float("nan"), dtype=torch.float16, device="cuda")
        kernel(a, b, d)
        torch.cuda.synchronize()
        outs.append(d)
    verdict = diagnosis.compare(outs[0], ref)
    check = {"passed": verdict.passed}
    if not verdict.passed:
        check["detail"] = str(verdict)[:300]
    if scratch:
        check["same_bits"] = bool(torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16)))
    return check


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", default="10,11,12")
    parser.add_argument("--shapes", required=True)
    parser.add_argument("--impl", default=str(REPO / "solutions"))
    parser.add_argument("--json")
    parser.add_argument("--no-time", action="store_true")
    parser.add_argument("--plans", default="")
    parser.add_argument("--plans-impl")
    parser.add_argument("--time-wrong", action="store_true",
                        help="time kernels that failed the check too (a bound, e.g. a variant without its writeback)")
    args = parser.parse_args()
    sm_count = torch.cuda.get_device_properties(0).multi_processor_count
    steps = [int(s) for s in args.steps.split(",")]
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    rows = []
    for shape in shapes:
        row = {"shape": format_shape(shape), "checks": {}, "ms": {}}
        kernels = {}
        trees = [Path(tree) for tree in args.plans_impl.split(",")] if args.plans_impl else [Path(args.impl)]
        variants = [(step, None, Path(args.impl)) for step in steps] + [
            (12, name, tree) for tree in trees for name in args.plans.split(",") if name]
        for step, plan_name, impl in variants:
            if STEPS["hopper"][step].shapes.violation(shape):
                continue
            label = f"step{step}" + (f"-{impl.name}" if plan_name and len(trees) > 1 else "") + (
                f"-{plan_name}" if plan_name else "")
            t0 = time.time()
            try:
                kernel, scratch = load(step, shape, sm_count, impl, plan_name)
            except ImpossiblePlan as error:
                print(format_shape(shape), label, "skipped:", error, flush=True)
                continue
            check = check_kernel(kernel, scratch, shape, 1234)
            check["build_s"] = round(time.time() - t0, 1)
            row["checks"][label] = check
            print(format_shape(shape), label, check, flush=True)
            if check["passed"] or args.time_wrong:
                kernels[label] = kernel
        if kernels and not args.no_time:
            a, b = diagnosis.random_inputs(shape, 99)
            d = {name: torch.empty((shape[0], shape[1]), dtype=torch.float16, device="cuda") for name in kernels}
            calls = {name: (lambda k=k, o=d[name]: k(a, b, o)) for name, k in kernels.items()}
            d_cublas = torch.empty((shape[0], shape[1]), dtype=torch.float16, device="cuda")
            calls["cublas"] = lambda: torch.matmul(a, b.T, out=d_cublas)
            ms = timing.median_ms_interleaved(calls)
            row["ms"] = ms
            ratios = {name: round(ms["cublas"] / t, 3) for name, t in ms.items() if name != "cublas"}
            row["vs_cublas"] = ratios
            print(format_shape(shape), "cublas %.4f ms" % ms["cublas"], ratios, flush=True)
        rows.append(row)
    if args.json:
        Path(args.json).write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
