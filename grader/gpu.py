"""Correctness and speed on the GPU, one step per child process.

A deadlocked kernel never returns and an illegal address poisons the CUDA context for the rest of the
process, so each step runs in `python -m grader.gpu` with a timeout; its results reach the parent
through a JSON file that the child rewrites after every shape, so a crash loses nothing before it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from grader import locator
from grader.steps import Shape, format_shape

HANG_CAUSES = (
    "the usual causes: an mbarrier initialised with a count that differs from the number of arrivals; "
    "a producer and a consumer starting on the same phase, or a phase that is not flipped once per use; "
    "loops that issue and wait a different number of times (e.g. the TMA loop and the MMA loop over "
    "different trip counts); a barrier init or cta_sync inside a branch that some threads skip"
)


@dataclass
class GpuRequest:
    impl_dir: str
    reference_dir: str | None  # a reference solution to time beside the kernel, if there is one
    track: str
    step: int
    arch: str
    sm_count: int
    seed: int
    correctness_shapes: list[Shape]
    timing_shapes: list[Shape]


@dataclass
class GpuResult:
    device: str = ""
    correctness: list[dict] = field(default_factory=list)  # one per shape: shape, seed, verdict
    timing: list[dict] = field(default_factory=list)  # one per shape: shape, ms per implementation
    running: str = ""  # what the child was doing when it last wrote this file
    error: str = ""  # set when the step could not be run to the end


def run_step(request: GpuRequest, timeout_s: float) -> GpuResult:
    """Run one step's GPU work in a child process; never raises for the kernel's sake."""
    with tempfile.TemporaryDirectory(prefix="grader-gpu-") as tmp:
        request_path, result_path = Path(tmp) / "request.json", Path(tmp) / "result.json"
        request_path.write_text(json.dumps(asdict(request)))
        child = subprocess.Popen(
            [sys.executable, "-m", "grader.gpu", str(request_path), str(result_path)],
            cwd=Path(__file__).resolve().parent.parent,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # so a timeout can kill the child and anything it started
        )
        try:
            output, _ = child.communicate(timeout=timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            output, _ = child.communicate()
            timed_out = True
        result = _read_result(result_path)
        if timed_out:
            result.error = (
                f"did not finish in {timeout_s:.0f} s while {result.running or 'starting'}: "
                f"the kernel is probably deadlocked. Check {HANG_CAUSES}."
            ) + locator.hang_report(request, result)
        elif child.returncode != 0 and not result.error:
            lines = [line.strip() for line in output.splitlines() if line.strip()]
            result.error = _failure(result.running, (lines or ["(no output)"])[-1])
        return result


def _read_result(path: Path) -> GpuResult:
    if not path.exists():
        return GpuResult()
    return GpuResult(**json.loads(path.read_text()))


def _failure(running: str, detail: str) -> str:
    if "illegal" in detail:
        detail += " (an access past a buffer: check tile offsets, TMA coordinates and shared-memory sizes)"
    elif "unspecified launch failure" in detail:
        detail += f" (the driver stopped a kernel that ran too long: probably a deadlock; check {HANG_CAUSES})"
    return f"failed while {running or 'starting'}: {detail}"


# ---- the child -------------------------------------------------------------------------------


def _child(request: GpuRequest, result_path: Path) -> None:
    import torch

    from grader import build, diagnosis, timing
    from grader.steps import STEPS

    spec = STEPS[request.track][request.step]
    result = GpuResult(device=torch.cuda.get_device_name())

    def save(running: str) -> None:
        result.running = running
        result_path.write_text(json.dumps(asdict(result)))

    def compiled(impl_dir: str, shape: Shape):
        factory = build.kernel_factory(Path(impl_dir), request.track, spec)
        return build.compile_module(build.make_prim_func(factory, spec, shape, request.sm_count), request.arch)

    for index, shape in enumerate(request.correctness_shapes):
        seed = request.seed + index
        save(f"checking correctness at {format_shape(shape)} (seed {seed})")
        kernel = compiled(request.impl_dir, shape)
        a, b = random_inputs(shape, seed)
        d = torch.full((shape[0], shape[1]), float("nan"), dtype=torch.float16, device="cuda")
        kernel(a, b, d)
        torch.cuda.synchronize()
        verdict = diagnosis.compare(d, diagnosis.reference(a, b))
        result.correctness.append({"shape": shape, "seed": seed, **asdict(verdict)})
        if not verdict.passed:
            save("done")
            return

    for shape in request.timing_shapes:
        save(f"timing at {format_shape(shape)}")
        kernels = {"kernel": compiled(request.impl_dir, shape)}
        if request.reference_dir:
            kernels["reference"] = compiled(request.reference_dir, shape)
        calls = _timed_calls(kernels, *random_inputs(shape, request.seed))
        result.timing.append({"shape": shape, "ms": timing.median_ms_interleaved(calls)})
    save("done")


def _timed_calls(kernels: dict, a, b) -> dict:
    """One call per implementation on the same inputs, each writing its own output; cuBLAS last."""
    import torch

    def call(kernel):
        d = torch.empty((a.shape[0], b.shape[0]), dtype=torch.float16, device="cuda")
        return lambda: kernel(a, b, d)

    d_cublas = torch.empty((a.shape[0], b.shape[0]), dtype=torch.float16, device="cuda")
    return {name: call(kernel) for name, kernel in kernels.items()} | {
        "cublas": lambda: torch.matmul(a, b.T, out=d_cublas)
    }


def random_inputs(shape: Shape, seed: int):
    import torch

    m, n, k = shape
    generator = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn((m, k), generator=generator, device="cuda").half()
    b = torch.randn((n, k), generator=generator, device="cuda").half()
    return a, b



if __name__ == "__main__":
    _request = json.loads(Path(sys.argv[1]).read_text())
    _request["correctness_shapes"] = [tuple(s) for s in _request["correctness_shapes"]]
    _request["timing_shapes"] = [tuple(s) for s in _request["timing_shapes"]]
    _result_path = Path(sys.argv[2])
    try:
        _child(GpuRequest(**_request), _result_path)
    except Exception as _err:  # report anything the kernel or its build raised, then fail
        _partial = _read_result(_result_path)
        _partial.error = _failure(_partial.running, f"{type(_err).__name__}: {str(_err).strip()}")
        _result_path.write_text(json.dumps(asdict(_partial)))
        raise
