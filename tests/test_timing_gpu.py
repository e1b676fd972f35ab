"""GPU tests of the timing: what a call spends on the host before its launch stays out of its time."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.gpu


def _matmuls():
    import torch

    a = torch.randn(2048, 2048, dtype=torch.float16, device="cuda")
    b = torch.randn(2048, 2048, dtype=torch.float16, device="cuda")
    outputs = [torch.empty_like(a) for _ in range(2)]
    return lambda index: torch.matmul(a, b, out=outputs[index])


def test_host_time_before_a_launch_is_not_timed():
    from grader.analysis import timing

    matmul = _matmuls()

    def late_launch():
        time.sleep(0.001)  # 1 ms on the host, about 30 times the matmul and 10 times the L2 flush before it
        matmul(0)

    ms = timing.median_ms_interleaved({"late": late_launch, "prompt": lambda: matmul(1)})
    assert ms["late"] < 1.15 * ms["prompt"], ms


def test_a_host_that_cannot_keep_ahead_is_an_error_not_a_time():
    from grader.analysis import timing

    matmul = _matmuls()

    def stalled_launch():
        time.sleep(0.1)  # longer than the longest spin the timing queues before a round
        matmul(0)

    with pytest.raises(RuntimeError, match="could not queue one round"):
        timing.median_ms_interleaved({"stalled": stalled_launch, "prompt": lambda: matmul(1)})
