"""The speed verdict: relative to the reference solution when there is one, else a share of cuBLAS."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.runs import gpu_child as gpu
from grader.judge.grade import Config, StepResult, _judge_speed
from grader.core.steps import MAX_SLOWDOWN_VS_REFERENCE, SPEED_FLOORS, STEPS


def _config() -> Config:
    return Config("steps", Path("steps"), Path("solutions"), "hopper", "sm_90a", "H100", 132, 0, 60.0, None)


def _judge(step: int, kernel_ms: float, cublas_ms: float, reference_ms: float | None) -> StepResult:
    spec = STEPS["hopper"][step]
    ms = {"kernel": kernel_ms, "cublas": cublas_ms} | ({"reference": reference_ms} if reference_ms else {})
    result = StepResult(step=step, file="f")
    _judge_speed(result, gpu.GpuResult(timing=[{"shape": s, "ms": ms} for s in spec.timing_shapes]), _config(), spec)
    return result


@pytest.mark.parametrize("slowdown,verdict", [(1.0, "passed"), (1.29, "passed"), (1.31, "failed"), (3.0, "failed")])
def test_slowdown_against_the_reference(slowdown, verdict):
    result = _judge(5, kernel_ms=slowdown * 2.0, cublas_ms=0.5, reference_ms=2.0)
    assert result.speed == verdict
    if verdict == "failed":
        assert f"limit {MAX_SLOWDOWN_VS_REFERENCE}x" in result.problems[0]


@pytest.mark.parametrize("margin,verdict", [(1.05, "passed"), (0.95, "failed")])
def test_share_of_cublas_without_a_reference(margin, verdict):
    floor = SPEED_FLOORS["sm_90a"][6]
    cublas_ms = 1.0
    kernel_ms = cublas_ms / (floor * margin)
    result = _judge(6, kernel_ms=kernel_ms, cublas_ms=cublas_ms, reference_ms=None)
    assert result.speed == verdict


def test_incomplete_timing_fails():
    result = StepResult(step=4, file="f")
    _judge_speed(result, gpu.GpuResult(error="failed while timing at 4096x4096x4096: boom"), _config(), STEPS["hopper"][4])
    assert result.speed == "failed"
    assert "boom" in result.problems[0]
