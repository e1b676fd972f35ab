"""Per-call GPU timing: CUDA events around each call, L2 flushed before each, implementations interleaved.

Interleaving puts the kernel and its baselines under the same clocks and power state, so their ratio
holds even when the absolute numbers drift (long back-to-back loops on an H100 lose ~15% to power
limits). Flushing L2 makes every call read its inputs from device memory, as in a real model.
"""

from __future__ import annotations

import statistics
from typing import Callable

import torch

L2_FLUSH_BYTES = 256 * 1024 * 1024  # several times any current GPU's L2
WARMUP_CALLS = 3
TARGET_SECONDS_PER_IMPLEMENTATION = 0.3
MIN_CALLS, MAX_CALLS = 5, 50


def median_ms_interleaved(calls: dict[str, Callable[[], object]]) -> dict[str, float]:
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    slowest_ms = max(_warm_up(call, flush) for call in calls.values())
    rounds = int(min(MAX_CALLS, max(MIN_CALLS, TARGET_SECONDS_PER_IMPLEMENTATION * 1e3 / slowest_ms)))

    events = {name: [] for name in calls}
    names = list(calls)
    for round_index in range(rounds):
        rotation = round_index % len(names)  # no implementation always runs first
        for name in names[rotation:] + names[:rotation]:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            flush.zero_()
            start.record()
            calls[name]()
            end.record()
            events[name].append((start, end))
    torch.cuda.synchronize()
    return {name: statistics.median(s.elapsed_time(e) for s, e in pairs) for name, pairs in events.items()}


def _warm_up(call: Callable[[], object], flush: torch.Tensor) -> float:
    """Run a few calls (module load, first-launch costs) and return the last one's time in ms."""
    for _ in range(WARMUP_CALLS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        flush.zero_()
        start.record()
        call()
        end.record()
    torch.cuda.synchronize()
    return max(start.elapsed_time(end), 1e-3)
