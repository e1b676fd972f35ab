"""Per-call GPU timing: CUDA events around each call, L2 flushed before each, implementations interleaved.

Every timed call of the graded kernel writes into an output refilled with NaN before it (outside the
timed region), on one of two input sets in turn, and each output is compared with the reference
after the call: a kernel that does its work only on a first call, only into an unwritten output, or
caches across calls, fails here instead of being timed as fast.

Interleaving puts the kernel and its baselines under the same clocks and power state, so their ratio
holds even when the absolute numbers drift (long back-to-back loops on an H100 lose ~15% to power
limits). Flushing L2 makes every call read its inputs from device memory, as in a real model.

A CUDA event times the GPU, not the call: if the GPU reaches a window's start event before the host has
queued the call, the window holds host time too (a Python launcher, a Triton autotuner's dispatch, a
garbage collection). Each round of calls is therefore queued behind a spin on the GPU, and a round whose
spin ended before the host had queued all of it is timed again behind a spin twice as long.
"""

from __future__ import annotations

import statistics
from typing import Callable

import torch

L2_FLUSH_BYTES = 256 * 1024 * 1024  # several times any current GPU's L2
WARMUP_CALLS = 3
TARGET_SECONDS_PER_IMPLEMENTATION = 0.3
MIN_CALLS, MAX_CALLS = 5, 50
HOST_LEAD_CYCLES = 1 << 20  # the spin before each round: about 0.5 ms at an H100's clocks
MAX_HOST_LEAD_CYCLES = 1 << 27  # about 70 ms: a host this far behind is broken, not slow


INPUT_SETS = 2


def time_checked(kernels: dict[str, Callable], shape: tuple[int, int, int], seed: int) -> tuple[dict[str, float], int]:
    """Median ms of each kernel and of cuBLAS at `shape`, and how many timed calls of "kernel" were wrong."""
    from grader.analysis import diagnosis

    m, n, _ = shape
    inputs = [diagnosis.random_inputs(shape, seed + 7919 * (i + 1)) for i in range(INPUT_SETS)]
    references = [diagnosis.reference(a, b) for a, b in inputs]
    scales = [diagnosis.scale(r) for r in references]
    outputs = {name: torch.empty((m, n), dtype=torch.float16, device="cuda") for name in [*kernels, "cublas"]}
    wrong = torch.zeros((), dtype=torch.int64, device="cuda")
    turn = {name: 0 for name in outputs}

    def checked_call(name: str, kernel: Callable) -> Callable[[], object]:
        def call() -> None:
            a, b = inputs[turn[name] % INPUT_SETS]
            kernel(a, b, outputs[name])
        return call

    def before(name: str) -> None:
        outputs[name].fill_(float("nan"))

    def after(name: str) -> None:
        index = turn[name] % INPUT_SETS
        turn[name] += 1
        if name == "kernel":
            wrong.add_((~diagnosis.within_tolerance(outputs[name], references[index], scales[index])).any())

    calls = {name: checked_call(name, kernel) for name, kernel in kernels.items()}
    calls["cublas"] = lambda: torch.matmul(*_cublas_operands(inputs, turn["cublas"]), out=outputs["cublas"])
    ms = median_ms_interleaved(calls, before, after)
    torch.cuda.synchronize()
    return ms, int(wrong.item())


def _cublas_operands(inputs, turn: int):
    a, b = inputs[turn % INPUT_SETS]
    return a, b.T


def median_ms_interleaved(
    calls: dict[str, Callable[[], object]],
    before: Callable[[str], None] = lambda _: None,
    after: Callable[[str], None] = lambda _: None,
) -> dict[str, float]:
    """`before(name)` and `after(name)` run around each call, outside its timed region."""
    flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    slowest_ms = max(_warm_up(name, call, flush, before, after) for name, call in calls.items())
    rounds = int(min(MAX_CALLS, max(MIN_CALLS, TARGET_SECONDS_PER_IMPLEMENTATION * 1e3 / slowest_ms)))

    events = {name: [] for name in calls}
    names = list(calls)
    lead_cycles, timed_rounds = HOST_LEAD_CYCLES, 0
    while timed_rounds < rounds:
        rotation = timed_rounds % len(names)  # no implementation always runs first
        lead_done = torch.cuda.Event()
        torch.cuda._sleep(lead_cycles)
        lead_done.record()
        round_events = []
        for name in names[rotation:] + names[:rotation]:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            before(name)
            flush.zero_()
            start.record()
            calls[name]()
            end.record()
            after(name)
            round_events.append((name, start, end))
        if lead_done.query():  # the GPU may have waited for the host inside a window: time the round again
            lead_cycles *= 2
            if lead_cycles > MAX_HOST_LEAD_CYCLES:
                raise RuntimeError(f"the host could not queue one round of {len(names)} calls within "
                                   f"{MAX_HOST_LEAD_CYCLES} GPU cycles; no timing is trustworthy on this machine")
            continue
        for name, start, end in round_events:
            events[name].append((start, end))
        timed_rounds += 1
    torch.cuda.synchronize()
    return {name: statistics.median(s.elapsed_time(e) for s, e in pairs) for name, pairs in events.items()}


def _warm_up(name: str, call: Callable[[], object], flush: torch.Tensor, before, after) -> float:
    """Run a few calls (module load, first-launch costs) and return the last one's time in ms."""
    for _ in range(WARMUP_CALLS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        before(name)
        flush.zero_()
        start.record()
        call()
        end.record()
        after(name)
    torch.cuda.synchronize()
    return max(start.elapsed_time(end), 1e-3)
