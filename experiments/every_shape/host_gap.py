"""Did the bench's timed windows hold host time? The timing before and after the fix, at model shapes, same run.

python experiments/every_shape/host_gap.py 256x4608x3584 128x4608x3584 ...   (a Hopper GPU; Triton optional)

Per shape it builds what the bench builds (steps 8-12 that take the shape, the Triton seed's two variants) and
times them with cuBLAS twice in turn: as the bench did before 2026-11-28 (flush, start event, call, end event; no
lead), counting the windows whose start event the GPU had already passed when the host came to queue the call
(the window then holds the host's launch time), and with grader.analysis.timing as it is (each round queued
behind a spin). Prints per implementation: ms before, share of windows that waited on the host, host
microseconds per call, ms after.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from grader.analysis import timing  # noqa: E402
from grader.commands import bench  # noqa: E402
from grader.core.steps import STEPS  # noqa: E402


def without_lead(calls: dict) -> tuple[dict, dict, dict]:
    """The timing before the fix, and per call whether the GPU was already waiting and the host's time for it."""
    flush = torch.empty(timing.L2_FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    for call in calls.values():
        call()
    torch.cuda.synchronize()
    names, events = list(calls), {name: [] for name in calls}
    waited, host_us = {name: 0 for name in calls}, {name: [] for name in calls}
    for round_index in range(timing.MAX_CALLS):
        rotation = round_index % len(names)
        for name in names[rotation:] + names[:rotation]:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            flush.zero_()
            start.record()
            began = time.perf_counter()
            waited[name] += start.query()  # the GPU has passed the start: the window now runs on host time
            calls[name]()
            host_us[name].append((time.perf_counter() - began) * 1e6)
            end.record()
            events[name].append((start, end))
    torch.cuda.synchronize()
    ms = {name: statistics.median(s.elapsed_time(e) for s, e in pairs) for name, pairs in events.items()}
    return ms, {name: count / timing.MAX_CALLS for name, count in waited.items()}, \
        {name: statistics.median(values) for name, values in host_us.items()}


def main() -> None:
    from grader.judge.cli import detect_gpu

    _, arch, sm_count = detect_gpu()
    seed, _ = bench._triton_seed()
    steps = [spec for spec in STEPS["hopper"].values() if spec.number in bench.MODEL_STEPS]
    captured = {}

    def capture(calls, *_):
        captured.update(calls)
        return {name: 1.0 for name in calls}

    for text in sys.argv[1:]:
        shape = tuple(int(x) for x in text.split("x"))
        captured.clear()
        real, timing.median_ms_interleaved = timing.median_ms_interleaved, capture
        bench._bench_shape(shape, [s for s in steps if s.shapes.violation(shape) is None], "hopper", arch, sm_count,
                           seed)
        timing.median_ms_interleaved = real
        before, waited, host_us = without_lead(captured)
        after = timing.median_ms_interleaved(captured)
        print(f"\n{text}: implementation | ms before | windows that waited on the host | host us per call | ms after")
        for name in captured:
            print(f"  {name!s:15} | {before[name]:.4f} | {waited[name]:.0%} | {host_us[name]:.0f} | {after[name]:.4f}")
        print("  cuBLAS share, before: " + ", ".join(f"{n}={before['cublas'] / before[n]:.3f}" for n in captured)
              + "\n  after: " + ", ".join(f"{n}={after['cublas'] / after[n]:.3f}" for n in captured), flush=True)


if __name__ == "__main__":
    main()
