"""Correctness and speed on the GPU, one step per child process.

A deadlocked kernel never returns and an illegal address poisons the CUDA context for the rest of the
process, so each step runs in `python -m grader.runs.gpu_child` with a timeout; its results reach the parent
through a JSON file that the child rewrites after every shape, so a crash loses nothing before it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from grader.core import sandbox
from grader.core.steps import Shape, format_shape
from grader.runs.debug_child import hang_report

HANG_CAUSES = (
    "the usual causes: an mbarrier initialised with a count that differs from the number of arrivals; "
    "a producer and a consumer starting on the same phase, or a phase that is not flipped once per use; "
    "loops that issue and wait a different number of times (e.g. the TMA loop and the MMA loop over "
    "different trip counts); a barrier init or cta_sync inside a branch that some threads skip"
)


@dataclass
class Kernel:
    """A built kernel the child loads without importing any student code."""

    name: str  # "kernel" (the graded one) or "reference"
    shape: Shape
    library: str  # TVM's exported library: host launcher + device code
    cubin: str  # the cubin the static checks read; the library must run exactly these bytes
    scratch: list = field(default_factory=list)  # (shape, dtype) of each parameter after A, B, D

    @classmethod
    def of(cls, name: str, built, folder: Path) -> Kernel:
        cubin = folder / f"{name}_{format_shape(built.shape)}.cubin"
        cubin.write_bytes(built.cubin)
        return cls(name, tuple(built.shape), built.library, str(cubin), list(built.artifacts.scratch))


@dataclass
class GpuRequest:
    impl_dir: str  # the graded tree, for the deadlock locator's debug build only
    track: str
    step: int
    arch: str
    seed: int
    correctness_shapes: list[Shape]
    timing_shapes: list[Shape]
    kernels: list[Kernel]
    recheck_seed: int | None = None  # instructor mode: check correctness again on these inputs after timing
    sm_count: int = 0
    with_solutions: bool = True  # whether the locator's copy of the course holds solutions/ (not in instructor mode)


@dataclass
class GpuResult:
    device: str = ""
    correctness: list[dict] = field(default_factory=list)  # one per shape: shape, seed, verdict
    timing: list[dict] = field(default_factory=list)  # one per shape: shape, ms per implementation
    running: str = ""  # what the child was doing when it last wrote this file
    error: str = ""  # set when the step could not be run to the end

    @classmethod
    def from_json(cls, data: dict) -> GpuResult:
        """The result as the child wrote it, each field checked for the type the judge reads."""
        result = cls(**{name: data[name] for name in ("device", "running", "error") if name in data})
        if not all(isinstance(text, str) for text in (result.device, result.running, result.error)):
            raise TypeError("device, running and error must be text")
        result.correctness = [_checked(entry, CORRECTNESS_FIELDS) for entry in data.get("correctness", [])]
        result.timing = [_checked(entry, TIMING_FIELDS) for entry in data.get("timing", [])]
        for entry in result.timing:
            if not all(isinstance(ms, float) and ms > 0 for ms in entry["ms"].values()) or "kernel" not in entry["ms"]:
                raise ValueError("timings must be positive numbers of milliseconds")
        return result


CORRECTNESS_FIELDS = {"shape": list, "seed": int, "passed": bool, "message": str}
TIMING_FIELDS = {"shape": list, "ms": dict}


def _checked(entry, fields: dict[str, type]) -> dict:
    if not isinstance(entry, dict) or not all(isinstance(entry.get(name), kind) for name, kind in fields.items()):
        raise TypeError(f"an entry lacks one of {', '.join(fields)}")
    if len(entry["shape"]) != 3 or not all(type(d) is int for d in entry["shape"]):
        raise ValueError("a shape must be three whole numbers")
    return entry


def run_step(request: GpuRequest, timeout_s: float) -> GpuResult:
    """Run one step's GPU work in a child process; never raises for the kernel's sake. The child is confined
    like the build (core/sandbox), with its GPU's device nodes only; it reads the kernels' folders and
    writes its result into its scratch folder."""
    confined = sandbox.confinement()
    gpu = sandbox.this_gpu()
    kernel_folders = sorted({Path(path).parent for k in request.kernels for path in (k.cubin, k.library)})
    copy = sandbox.course_copy(Path(request.impl_dir), with_solutions=False)
    request_path, result_path = copy / "request.json", copy / sandbox.SCRATCH / "result.json"
    try:
        request_path.write_text(json.dumps(asdict(request)))
        confined.prepare(copy, kernel_folders)
        with tempfile.TemporaryFile("w+", errors="replace") as log:
            child = subprocess.Popen(
                confined.command(sandbox.python_command("grader.runs.gpu_child", str(request_path), str(result_path)),
                                 copy, kernel_folders, gpu=gpu),
                cwd=copy, env=confined.environment(dict(os.environ), copy, gpu), stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,  # so a timeout can kill the child and anything it started
                **confined.popen_arguments(),
            )
            timed_out = _wait_with_progress(child, result_path, request.step, timeout_s)
            sandbox.sweep()
            log.seek(0)
            output = log.read()
        result = _read_result(result_path)
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    if timed_out:
        result.error = (
            f"did not finish in {timeout_s:.0f} s while {result.running or 'starting'}: "
            f"the kernel is probably deadlocked. Check {HANG_CAUSES}."
        ) + hang_report(request, result)
    elif child.returncode != 0 and not result.error:
        lines = [line.strip() for line in output.splitlines() if line.strip()]
        result.error = _failure(result.running, (lines or ["(no output)"])[-1])
    return result


def _wait_with_progress(child: subprocess.Popen, result_path: Path, step: int, timeout_s: float) -> bool:
    """Wait for the child, printing what it does on stderr as it changes; True if it ran out of time."""
    deadline, shown = time.monotonic() + timeout_s, ""
    while child.poll() is None:
        if time.monotonic() > deadline:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            return True
        running = _read_result(result_path).running if result_path.exists() else ""
        if running and running != shown and running != "done":
            print(f"  step {step}: {running[:200]}", file=sys.stderr, flush=True)
            shown = running
        time.sleep(0.2)
    try:
        os.killpg(child.pid, signal.SIGKILL)  # anything the child left running
    except (ProcessLookupError, PermissionError):
        pass
    return False


def _read_result(path: Path) -> GpuResult:
    """The child's result as far as it got; one that is not what the child writes is an error, never a traceback."""
    reply, unreadable = sandbox.read_reply(path)
    if reply is None:
        return GpuResult(error="the GPU child wrote an unreadable result" if unreadable else "")
    try:
        return GpuResult.from_json(reply)
    except (KeyError, TypeError, ValueError) as err:
        return GpuResult(error=f"the GPU child wrote a malformed result ({err})")


def _failure(running: str, detail: str) -> str:
    if "illegal" in detail:
        detail += " (an access past a buffer: check tile offsets, TMA coordinates and shared-memory sizes)"
    elif "unspecified launch failure" in detail:
        detail += f" (the driver stopped a kernel that ran too long: probably a deadlock; check {HANG_CAUSES})"
    return f"failed while {running or 'starting'}: {detail}"


# ---- the child -------------------------------------------------------------------------------


def _child(request: GpuRequest, result_path: Path) -> None:
    import torch

    from grader.analysis import diagnosis, timing

    result = GpuResult(device=torch.cuda.get_device_name())
    kernels = {(k.name, tuple(k.shape)): k for k in request.kernels}

    def save(running: str) -> None:
        result.running = running
        _write_atomically(result_path, json.dumps(asdict(result)))

    def check(seed_base: int, shapes: list[Shape]) -> bool:
        for index, shape in enumerate(shapes):
            seed = seed_base + index
            save(f"checking correctness at {format_shape(shape)} (seed {seed})")
            kernel = load(kernels[("kernel", shape)], request.arch)
            a, b = diagnosis.random_inputs(shape, seed)
            d = torch.full((shape[0], shape[1]), float("nan"), dtype=torch.float16, device="cuda")
            kernel(a, b, d)
            torch.cuda.synchronize()
            verdict = diagnosis.compare(d, diagnosis.reference(a, b))
            result.correctness.append({"shape": shape, "seed": seed, **asdict(verdict)})
            if not verdict.passed:
                return False
        return True

    if not check(request.seed, request.correctness_shapes):
        save("done")
        return
    for shape in request.timing_shapes:
        save(f"timing at {format_shape(shape)}")
        loaded = {name: load(kernels[(name, shape)], request.arch) for name in ("kernel", "reference")
                  if (name, shape) in kernels}
        ms, wrong = timing.time_checked(loaded, shape, request.seed)
        if wrong:
            raise WrongWhileTimed(
                f"{wrong} timed call(s) at {format_shape(shape)} left a wrong output (each timed call writes into a "
                "fresh NaN-filled output and is compared with cuBLAS after timing): the result must not depend on "
                "an earlier call, on what the output held before, or on which call is timed"
            )
        result.timing.append({"shape": shape, "ms": ms})
    if request.recheck_seed is not None:
        result.correctness.clear()
        check(request.recheck_seed, request.correctness_shapes)
    save("done")


def _write_atomically(path: Path, text: str) -> None:
    path.with_suffix(".tmp").write_text(text)
    os.replace(path.with_suffix(".tmp"), path)


class WrongWhileTimed(Exception):
    """A timed call's output differed from the reference."""


class NotTheCheckedKernel(Exception):
    """The library would run device code other than the cubin the static checks read."""


def load(kernel: Kernel, arch: str):
    """Load a built library with TVM's runtime; its device code must be the checked cubin."""
    import torch
    import tvm
    import tvm_ffi
    from tvm.support import nvcc  # noqa: F401  registers TVM's compile callback, which is replaced below

    from grader.core import build

    checked = Path(kernel.cubin).read_bytes()
    compiled_here: list[bytes] = []

    def compile_cuda(code, *_):  # a library that carries CUDA source is compiled at load: same command
        compiled_here.append(build.compile_cubin(code, arch))
        return compiled_here[-1]

    tvm_ffi.register_global_func("tvm_callback_cuda_compile", compile_cuda, override=True)
    function = build.launcher(tvm.runtime.load_module(kernel.library).main,
                              [(tuple(shape), dtype) for shape, dtype in kernel.scratch])
    if checked in Path(kernel.library).read_bytes():
        return function
    m, n, k = kernel.shape  # the device code is compiled at load or at the first call: make one
    function(*(torch.zeros(rows, k, dtype=torch.float16, device="cuda") for rows in (m, n)),
             torch.empty((m, n), dtype=torch.float16, device="cuda"))
    torch.cuda.synchronize()
    if compiled_here != [checked]:
        raise NotTheCheckedKernel(
            f"the built library at {format_shape(kernel.shape)} does not run the kernel the static checks read "
            "(its device code differs from the checked cubin): the submission tried to change the grader"
        )
    return function


if __name__ == "__main__":
    _request = json.loads(Path(sys.argv[1]).read_text())
    _request["correctness_shapes"] = [tuple(s) for s in _request["correctness_shapes"]]
    _request["timing_shapes"] = [tuple(s) for s in _request["timing_shapes"]]
    _request["kernels"] = [Kernel(**{**k, "shape": tuple(k["shape"])}) for k in _request["kernels"]]
    _result_path = Path(sys.argv[2])
    try:
        _child(GpuRequest(**_request), _result_path)
    except Exception as _err:  # report anything the kernel or its build raised, then fail
        _partial = _read_result(_result_path)
        _detail = str(_err).strip() if isinstance(_err, (WrongWhileTimed, NotTheCheckedKernel)) else (
            f"{type(_err).__name__}: {str(_err).strip()}")
        _partial.error = _failure(_partial.running, _detail)
        _write_atomically(_result_path, json.dumps(asdict(_partial)))
        raise
