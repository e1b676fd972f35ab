"""The child process that runs GPU work: a hang or a crash is reported for its step, never raised."""

from __future__ import annotations

from conftest import REPO
from grader.runs import gpu_child as gpu


def _request() -> gpu.GpuRequest:
    return gpu.GpuRequest(
        impl_dir=str(REPO / "solutions"),
        track="hopper",
        step=1,
        arch="sm_90a",
        seed=1,
        correctness_shapes=[(128, 128, 64)],
        timing_shapes=[(128, 128, 64)],
        kernels=[gpu.Kernel("kernel", (128, 128, 64), "/nowhere/kernel.so", "/nowhere/kernel.cubin")],
    )


def test_a_child_that_does_not_finish_is_killed_and_explained():
    result = gpu.run_step(_request(), timeout_s=0.05)
    assert result.error.startswith("did not finish in 0 s")
    assert "deadlocked" in result.error
    assert "mbarrier initialised with a count" in result.error


def test_a_child_that_crashes_is_reported(monkeypatch, tmp_path):
    request = _request()
    result = gpu.run_step(request, timeout_s=120)
    assert result.error.startswith("failed while")
    assert result.correctness == []
