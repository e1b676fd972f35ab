"""Correctness of the Hopper steps 11 and 12 at shapes drawn at random, none of them chosen by hand.

python experiments/every_shape/sweep.py --count 160 --seed 20261129 --shard 0/12 --json OUT.json

Each drawn shape is built for step 11 (the grader's build) and for step 12 twice: its own plan, and a plan
drawn at random (data-parallel or stream-K, any tile width, 64- or 128-row CTAs, lone or paired), each for an
SM count drawn from the GPU's own, fewer (8, half) and twice as many (a grid larger than the GPU holds, where a
stream-K range must wait only on clusters launched before it). Each kernel runs on fresh random inputs into
an output filled with NaN and is compared with A.float() @ B.float().T (the grader's tolerance); a kernel with
a workspace runs twice and must give the same bits. Shards split the shapes so that several processes build at
once (the builds are CPU work; the checks take the GPU for milliseconds).

The shapes: M from 1 up (decode batches, a few rows over a tile, thousands), N and K multiples of 8 (half of
the Ks off 32-byte rows, K % 16 == 8), some on a tile's edge plus or minus 8, some with K of less than one K tile;
at most 2e10 multiply-adds each.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import torch  # noqa: E402

from check_and_time import ImpossiblePlan, check_kernel, load  # noqa: E402
from grader.core.steps import STEPS, format_shape  # noqa: E402

MAX_MULTIPLY_ADDS = 2e10
WIDTHS = tuple(range(256, 31, -16))


def draw_shape(rng: random.Random) -> tuple[int, int, int]:
    while True:
        kind = rng.choice(("decode", "tokens", "large", "edges", "short_k"))
        if kind == "decode":
            m = rng.randint(1, 64)
        elif kind == "tokens":
            m = rng.randint(65, 1100)
        elif kind == "large":
            m = rng.randint(1100, 8192)
        else:
            m = max(1, 64 * rng.randint(1, 40) + rng.choice((-1, 0, 1, 7)))
        n = 8 * rng.randint(1, 1024)
        k = 8 * rng.randint(1, 1024)
        if kind == "edges":
            n = max(8, 16 * rng.randint(1, 300) + rng.choice((-8, 0, 8)))
            k = max(8, 64 * rng.randint(1, 100) + rng.choice((-8, 0, 8)))
        if kind == "short_k":
            k = 8 * rng.randint(1, 8)
        if m * n * k <= MAX_MULTIPLY_ADDS:
            return m, n, k


def draw_plan(rng: random.Random) -> str:
    """A name check_and_time.forced_plan understands: dpW / skW, an r64 (64-row CTAs), a c1 (lone CTAs), on some
    stream-K plans a kS (split-K, S ranges a tile, of unequal length where S does not divide the K tiles; a shape
    with too many tiles for it skips it), and on a quarter an x (A and B swapped)."""
    kind = rng.choice(("dp", "sk"))
    return (kind + str(rng.choice(WIDTHS)) + rng.choice(("", "r64")) + rng.choice(("", "c1"))
            + (rng.choice(("", "", "k2", "k3", "k5")) if kind == "sk" else "") + rng.choice(("", "", "", "x")))


def check(step: int, shape, sm_count: int, plan: str | None, impl: Path, seed: int) -> dict:
    t0 = time.time()
    try:
        kernel, scratch = load(step, shape, sm_count, impl, plan)
    except ImpossiblePlan as err:
        return {"skipped": str(err)}
    except Exception as err:  # noqa: BLE001 - a refusal or a build failure is a result of the sweep
        return {"passed": False, "detail": f"build: {type(err).__name__}: {str(err)[:300]}"}
    result = check_kernel(kernel, scratch, shape, seed)
    result["passed"] = result["passed"] and result.get("same_bits", True)
    result["s"] = round(time.time() - t0, 1)
    return result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=160)
    parser.add_argument("--seed", type=int, default=20261129)
    parser.add_argument("--shard", default="0/1", help="i/n: this process checks the shapes i, i + n, ...")
    parser.add_argument("--impl", default=str(HERE.parents[1] / "solutions"))
    parser.add_argument("--json", required=True)
    args = parser.parse_args()
    shard, shards = (int(x) for x in args.shard.split("/"))
    gpu_sms = torch.cuda.get_device_properties(0).multi_processor_count
    rng = random.Random(args.seed)
    cases = []
    for index in range(args.count):  # every shard draws the whole list, so that the list is one list
        shape = draw_shape(rng)
        sm_count = rng.choice((gpu_sms, gpu_sms, 8, gpu_sms // 2, 2 * gpu_sms))
        cases.append((index, shape, sm_count, draw_plan(rng)))
    rows = []
    for index, shape, sm_count, plan in cases[shard::shards]:
        for variant, (step, plan_name) in enumerate(((11, None), (12, None), (12, plan))):
            if STEPS["hopper"][step].shapes.violation(shape):
                continue
            result = check(step, shape, sm_count, plan_name, Path(args.impl), 3 * index + variant)
            if "skipped" in result:
                print(format_shape(shape), plan_name, "skipped:", result["skipped"], flush=True)
                continue
            row = {"index": index, "shape": format_shape(shape), "sm_count": sm_count, "step": step,
                   "plan": plan_name or "auto", **result}
            rows.append(row)
            print(json.dumps(row), flush=True)
            Path(args.json).write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "rows": rows}, indent=1))
    failed = [r for r in rows if not r["passed"]]
    print(f"shard {args.shard}: {len(rows)} kernels, {len(failed)} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
