"""When does each SM finish? %globaltimer stamps of every CTA of step 12 at one shape, for the last wave.

    python3 experiments/every_shape/tail_stamps.py 4096x4096x4096 [PLAN] [--impl TREE] --json OUT.json

At 4096^3 step 12 and cuBLAS take the same SM-active cycles on average (ncu, h200-epilogue/), and the kernel's
elapsed cycles are 7% more than that average: the last wave (512 tiles for 132 SMs, 3.88 waves) and the spread of the
SMs' finishing times. A dynamic tile scheduler (the next tile to whichever SM is free first) takes back only the
spread; this measures it. The build is the kernel exactly as written (grader/analysis/instrument.py's postproc hook),
with a stamp at two places of every CTA:
  start  the mbarrier inits (one thread, before anything else);
  store  each TMA store of D (the elected thread of a consumer), with its box's coordinates: a tile's last store is
         its end.
Each stamp records the CTA, its SM, %globaltimer and %clock64. Times are put on one axis by each CTA's own straight
line of %globaltimer against %clock64 (the SM's clock keeps its resolution; the timer ticks in steps of up to 1 us).

Prints, per count of tiles a CTA ran: how many CTAs, their ends (min, median, max, from the first start) and their
tiles' mean time; the kernel's end; and what a greedy scheduler would reach with the tiles' measured times (each
tile, in order, to the CTA that is free first).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from check_and_time import REPO, forced_plan  # noqa: E402
from grader.analysis import diagnosis, instrument  # noqa: E402
from grader.core import build  # noqa: E402
from grader.core.steps import STEPS  # noqa: E402

CAPACITY = 1 << 18  # records; 8192^3 takes about 70 K a run
WORDS = 8  # a record: kind | smid << 8, cta, the box's two coordinates, %globaltimer (2 words), %clock64 (2 words)

DEVICE_CODE = r"""
__device__ __forceinline__ void tail_stamp(unsigned int kind, int c0, int c1) {
  unsigned long long t, c;
  unsigned int sm;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t) :: "memory");
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(c) :: "memory");
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  unsigned int* header = (unsigned int*)__RECORDS__ULL;
  unsigned int slot = atomicAdd(header + 1, 1u);
  if (slot >= __CAPACITY__u) { header[0] = 1u; return; }
  uint4* r = (uint4*)(header + 8 + slot * 8);
  r[0] = make_uint4(kind | (sm << 8), blockIdx.x, (unsigned int)c0, (unsigned int)c1);
  r[1] = make_uint4((unsigned int)t, (unsigned int)(t >> 32), (unsigned int)c, (unsigned int)(c >> 32));
}
"""
STORE = "tvm_builtin_ptx_cp_async_bulk_tensor_s2g_async_bulk_tensor_2d_global_shared__cta_tile_bulk_group"
INIT = "tvm_builtin_ptx_mbarrier_init_init_shared_b64"


def rewrite(records_address: int):
    def splice(source: str) -> str:
        if f"void {STORE}(" not in source or f"void {INIT}(" not in source:
            raise SystemExit("tail_stamps: the generated CUDA has no 2-D TMA store or mbarrier init helper")
        macros = [
            f"#define {STORE}(m, c0, c1, s) do {{ ({STORE})((m), (c0), (c1), (s)); tail_stamp(2u, (c0), (c1)); }} while (0)",
            # the first init of a CTA is its start; the others are stamped too and ignored (the earliest counts)
            f"#define {INIT}(a, n) do {{ tail_stamp(1u, 0, 0); ({INIT})((a), (n)); }} while (0)",
        ]
        code = DEVICE_CODE.replace("__RECORDS__", hex(records_address)).replace("__CAPACITY__", str(CAPACITY))
        return instrument.splice(source, code, macros)
    return splice


def per_cta_times(words: np.ndarray) -> dict[int, dict]:
    """{cta: {"sm", "start", "stores": [(t_ns, c0, c1)]}} on one axis (ns from the first start)."""
    kind, cta = words[:, 0] & 0xFF, words[:, 1].astype(np.int64)
    sm = (words[:, 0] >> 8) & 0xFFFF
    timer = words[:, 4].astype(np.float64) + words[:, 5].astype(np.float64) * 2**32
    clock = words[:, 6].astype(np.float64) + words[:, 7].astype(np.float64) * 2**32
    out = {}
    for c in np.unique(cta):
        rows = np.flatnonzero(cta == c)
        t, k = timer[rows], clock[rows]
        slope, intercept = np.polyfit(k, t, 1) if np.ptp(k) > 0 else (0.0, t.mean())
        times = k * slope + intercept if 0.3 < slope < 1.5 else t  # ns per cycle: 1/3.3 GHz .. 1/0.67 GHz
        starts = times[kind[rows] == 1]
        stores = [(times[i], int(words[rows[i], 2]), int(words[rows[i], 3]))
                  for i in range(len(rows)) if kind[rows[i]] == 2]
        out[int(c)] = {"sm": int(sm[rows[0]]), "start": float(starts.min()), "stores": sorted(stores)}
    zero = min(v["start"] for v in out.values())
    for v in out.values():
        v["start"] -= zero
        v["stores"] = [(t - zero, c0, c1) for t, c0, c1 in v["stores"]]
    return out


def tile_ends(stores: list[tuple[float, int, int]], tile_rows: int, tile_cols: int) -> list[float]:
    """Each tile's last store (a tile: the box coordinates divided by the tile's extent), in order of end."""
    ends: dict[tuple[int, int], float] = {}
    for t, c0, c1 in stores:  # c0: the column (innermost coordinate), c1: the row
        key = (c1 // tile_rows, c0 // tile_cols)
        ends[key] = max(ends.get(key, 0.0), t)
    return sorted(ends.values())


def greedy(durations: list[float], workers: int, start: float) -> float:
    """The end of `durations`, each in order to the worker free first (all free at `start`)."""
    free = [start] * workers
    for d in durations:
        i = min(range(workers), key=free.__getitem__)
        free[i] += d
    return max(free)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("shape")
    parser.add_argument("plan", nargs="?")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--impl", default=str(REPO / "solutions"), help="the tree of step 12 (a variant's)")
    parser.add_argument("--json")
    args = parser.parse_args()
    shape = tuple(int(x) for x in args.shape.split("x"))
    sm_count = torch.cuda.get_device_properties(0).multi_processor_count
    spec = STEPS["hopper"][12]
    factory = build.kernel_factory(Path(args.impl), "hopper", spec)
    module = SimpleNamespace(**factory.__globals__)
    plan = forced_plan(module, args.plan, shape, sm_count) if args.plan else module.plan_decomposition(*shape, sm_count)
    print("plan:", plan, flush=True)
    records = torch.zeros(8 + CAPACITY * WORDS, dtype=torch.int32, device="cuda")
    prim_func = factory(*shape, sm_count, plan=plan)
    with instrument.cuda_postproc(rewrite(records.data_ptr())):
        executable = build.compile_module(prim_func, "sm_90a")
    kernel = build.launcher(executable, build.scratch_buffers(prim_func))
    a, b = diagnosis.random_inputs(shape, 1234)
    d = torch.empty((shape[0], shape[1]), dtype=torch.float16, device="cuda")
    for _ in range(3):  # warm: the clock ramps, cuBLAS is not involved
        kernel(a, b, d)
    verdict = diagnosis.compare(d, diagnosis.reference(a, b))
    print("correct:", verdict.passed, flush=True)
    runs = []
    for run in range(args.runs):
        torch.cuda.synchronize()
        records.zero_()
        torch.cuda.synchronize()
        kernel(a, b, d)
        torch.cuda.synchronize()
        host = records.cpu().numpy().view(np.uint32)
        if host[0]:
            raise SystemExit("tail_stamps: the stamp buffer filled up")
        words = host[8:8 + 8 * int(host[1])].reshape(-1, 8)
        ctas = per_cta_times(words)
        by_count: dict[int, list] = {}
        all_tiles = []
        for c, v in ctas.items():
            ends = tile_ends(v["stores"], plan.tile_m, plan.tile_n)
            v["tile_ends"] = ends
            durations = np.diff([v["start"]] + ends)
            all_tiles.append((v["start"], list(durations)))
            by_count.setdefault(len(ends), []).append((ends[-1] if ends else v["start"], float(np.mean(durations))
                                                       if len(durations) else 0.0))
        kernel_end = max(e for group in by_count.values() for e, _ in group)
        # greedy: every tile's measured time, in the static order's waves, to the CTA free first
        order = sorted(((i, d) for _, ds in all_tiles for i, d in enumerate(ds)), key=lambda x: x[0])
        start = float(np.median([s for s, _ in all_tiles]))
        greedy_end = greedy([d for _, d in order], len(ctas), start)
        summary = {"run": run, "kernel_end_us": kernel_end / 1e3, "greedy_end_us": greedy_end / 1e3,
                   "starts_us": [min(v["start"] for v in ctas.values()) / 1e3,
                                 max(v["start"] for v in ctas.values()) / 1e3],
                   "by_tiles": {n: {"ctas": len(g), "end_min_us": min(e for e, _ in g) / 1e3,
                                    "end_median_us": statistics.median(e for e, _ in g) / 1e3,
                                    "end_max_us": max(e for e, _ in g) / 1e3,
                                    "tile_mean_us": statistics.mean(m for _, m in g) / 1e3}
                                for n, g in sorted(by_count.items())}}
        print(json.dumps(summary), flush=True)
        runs.append({"summary": summary, "ctas": ctas})
    if args.json:
        Path(args.json).write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "shape": args.shape,
                                               "plan": str(plan), "runs": runs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
