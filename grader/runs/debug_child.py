"""The deadlock locator's debug run: the step's debug build (analysis/locator.py: every mbarrier wait
bounded), run once on the GPU with its records read back while it runs; without a GPU, built and
assembled only (nvcc -cubin), for the barrier map.

It imports the step file, so `locate` starts it as `python -m grader.runs.debug_child` in a fresh copy of
the course (core/sandbox.run_child), like the build; comparing the course's files before and after is
the caller's part (the grade after a hang, `make debug`).
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from grader.analysis import locator
from grader.core import build, sandbox
from grader.core.steps import STEPS, Shape, format_shape

RUN_LIMIT_S = 20.0  # how long the debug run may take after launch before the host stops waiting for it
CHILD_TIMEOUT_S = 60.0  # the whole debug child: start, build, run, read back
BUILD_ONLY_TIMEOUT_S = 300.0  # without a GPU: the debug build and nvcc, on a machine that may be slow


@dataclass
class LocateRequest:
    impl_dir: str
    track: str
    step: int
    arch: str
    sm_count: int
    shape: Shape
    seed: int
    run: bool = True  # False: build and assemble the debug build only (no GPU needed)


@dataclass
class LocateResult:
    records: list[dict]
    overflowed: bool
    finished: bool  # whether the debug kernel ended within RUN_LIMIT_S
    barriers: list[dict]
    error: str = ""
    build_error: str = ""  # the step file could not be built: not implemented, TIRx or nvcc errors


def locate(request: LocateRequest, timeout_s: float = CHILD_TIMEOUT_S, *, with_solutions: bool = True) -> LocateResult:
    """Run the debug build once in a child process over a copy of the course; never raises for the kernel's sake."""
    run = sandbox.run_child("grader.runs.debug_child", asdict(request), Path(request.impl_dir),
                            with_solutions=with_solutions, timeout_s=timeout_s,
                            gpu=sandbox.this_gpu() if request.run else None)
    if run.reply is not None:
        try:
            return LocateResult(**run.reply)
        except TypeError:
            return LocateResult([], False, False, [], "the debug run wrote an unreadable result")
    output = run.finished.output if run.finished.returncode is not None else (
        f"the debug run did not finish in {timeout_s:.0f} s")
    lines = [line for line in output.splitlines() if line.strip()] or ["(no output)"]
    return LocateResult([], False, False, [], f"the debug run failed: {lines[-1].strip()}")


def explain(result: LocateResult) -> list[str]:
    """What to tell the student about one debug run."""
    if result.build_error:
        return [f"the debug build failed: {result.build_error}"]
    if result.error and not result.records:
        return [result.error]
    records = [locator.Record(**{**r, "cta": tuple(r["cta"]), "grid": tuple(r["grid"])}) for r in result.records]
    lines = locator.summarize(records, barriers(result))
    if not records:
        lines.append(
            "no mbarrier wait gave up in the debug build"
            + (": the hang did not recur there (it may depend on timing)" if result.finished else
               ": the kernel is stuck elsewhere (a named barrier such as warpgroup_sync, or a loop of its own)")
        )
    elif not result.finished:
        lines.append("the kernel did not end after these waits gave up: some warps are also stuck in a named "
                     "barrier (bar.sync / warpgroup_sync) or a loop of their own, which the locator cannot bound")
    if result.overflowed:
        capacity = locator.CAPACITY
        lines.append(f"(more than {capacity} waits gave up: only the first {capacity} are counted above)")
    if result.error:
        lines.append(f"the debug run ended with: {result.error}")
    return lines


def barriers(result: LocateResult) -> list[locator.Barrier]:
    return [locator.Barrier(**{**b, "wait_lines": tuple(b["wait_lines"])}) for b in result.barriers]


def hang_report(request, result) -> str:
    """Called by the GPU runner when a step timed out: re-run the shape that hung under the debug build."""
    done = len(result.correctness)
    if done < len(request.correctness_shapes):
        shape, seed = tuple(request.correctness_shapes[done]), request.seed + done
    elif len(result.timing) < len(request.timing_shapes):
        shape, seed = tuple(request.timing_shapes[len(result.timing)]), request.seed
    else:
        return ""
    located = locate(LocateRequest(request.impl_dir, request.track, request.step, request.arch,
                                   request.sm_count, shape, seed), with_solutions=request.with_solutions)
    header = f"\n  where it hangs (debug build at {format_shape(shape)}, each wait bounded at {locator.BOUND_S} s):"
    return header + "".join(f"\n  {line}" for line in explain(located))


# ---- the child ------------------------------------------------------------------------------------


class _PinnedBuffer:
    """Host memory the device writes through a mapped pointer (driver API, through ctypes)."""

    def __init__(self, words: int, device: int):
        self._cuda = ctypes.CDLL("libcuda.so.1")
        self.words = words
        handle, context = ctypes.c_int(), ctypes.c_void_p()  # the primary context, which torch and TVM use too
        self._check(self._cuda.cuInit(0))
        self._check(self._cuda.cuDeviceGet(ctypes.byref(handle), device))
        self._check(self._cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), handle))
        self._check(self._cuda.cuCtxSetCurrent(context))
        self.host = ctypes.c_void_p()
        flags = 0x1 | 0x2  # CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP
        self._check(self._cuda.cuMemHostAlloc(ctypes.byref(self.host), ctypes.c_size_t(words * 4), flags))
        ctypes.memset(self.host, 0, words * 4)
        mapped = ctypes.c_uint64()
        self._check(self._cuda.cuMemHostGetDevicePointer_v2(ctypes.byref(mapped), self.host, 0))
        self.device_address = mapped.value

    def read(self):
        import numpy as np

        return np.ctypeslib.as_array((ctypes.c_uint32 * self.words).from_address(self.host.value)).copy()

    @staticmethod
    def _check(status: int) -> None:
        if status != 0:
            raise RuntimeError(f"CUDA driver call failed with status {status}")


def _child(request: LocateRequest) -> LocateResult:
    spec = STEPS[request.track][request.step]
    try:
        factory = build.kernel_factory(Path(request.impl_dir), request.track, spec)
        if not request.run:
            debug = locator.build_debug(factory, spec, request.shape, request.arch, request.sm_count, records_address=0)
            locator.compile_cubin(debug.cuda_source, request.arch)
            return LocateResult([], False, False, [asdict(b) for b in debug.barriers])
        return _run_debug(request, factory)
    except (build.StepNotImplemented, build.BuildFailed) as err:
        return LocateResult([], False, False, [], build_error=str(err))


def _run_debug(request: LocateRequest, factory) -> LocateResult:
    import torch

    from grader.analysis.diagnosis import random_inputs  # torch: the judge, which imports this module, needs neither

    # nvcc compiles the debug build, as in the CPU tests, whether or not NVRTC is installed here
    os.environ["TVM_CUDA_COMPILE_MODE"] = "nvcc"
    torch.zeros(1, device="cuda")
    buffer = _PinnedBuffer(locator.HEADER_WORDS + locator.CAPACITY * locator.RECORD_WORDS, torch.cuda.current_device())
    spec = STEPS[request.track][request.step]
    debug = locator.build_debug(factory, spec, request.shape, request.arch, request.sm_count, buffer.device_address)
    a, b = random_inputs(request.shape, request.seed)
    d = torch.full((request.shape[0], request.shape[1]), float("nan"), dtype=torch.float16, device="cuda")
    stream = torch.cuda.current_stream()
    error = ""
    debug.executable(a, b, d)
    deadline = time.monotonic() + RUN_LIMIT_S
    finished = False
    while time.monotonic() < deadline:
        try:
            finished = stream.query()
        except RuntimeError as err:  # the debug kernel itself failed (e.g. an illegal address)
            error, finished = str(err).strip().splitlines()[0], True
        if finished:
            break
        time.sleep(0.05)
    records, overflowed = locator.decode(buffer.read())
    return LocateResult([asdict(r) for r in records], overflowed, finished, [asdict(b) for b in debug.barriers], error)


if __name__ == "__main__":
    _request = json.loads(Path(sys.argv[1]).read_text())
    _request["shape"] = tuple(_request["shape"])
    _result = _child(LocateRequest(**_request))
    _written = Path(sys.argv[2] + ".part")
    _written.write_text(json.dumps(asdict(_result)))
    _written.rename(sys.argv[2])  # whole or not at all, should the exit below be killed
    os._exit(0)  # a kernel still running must not hold the process at exit
