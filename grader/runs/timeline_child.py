"""The measured timeline's run: the step's timeline build (analysis/timeline.py: %globaltimer stamps around
its mbarrier helpers), run once after a warm-up on the GPU and checked; without a GPU, built and assembled
only (nvcc -cubin), to say what it would record.

It imports the step file, so `record` starts it as `python -m grader.runs.timeline_child` in a fresh copy
of the course (core/sandbox.run_child); comparing the course's files before and after is the caller's part.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from grader.analysis import instrument, timeline
from grader.analysis.diagnosis import compare, random_inputs, reference
from grader.core import build, sandbox
from grader.core.steps import STEPS, Shape

BUILD_TIMEOUT_S = 300.0  # the timeline build and nvcc, on a machine that may be slow
RUN_TIMEOUT_S = BUILD_TIMEOUT_S + timeline.RUN_LIMIT_S * 2  # plus the warm-up and the measured run


@dataclass
class TimelineRequest:
    impl_dir: str
    impl: str  # steps or solutions, as the document names it
    step: int
    shape: Shape
    sm_count: int
    seed: int
    tiles: int
    measure: bool  # False: build and assemble only (no GPU needed)


@dataclass
class TimelineResult:
    data: dict | None = None  # the measured document (analysis/timeline.document)
    sites: dict | None = None  # without a GPU: what the build would record, where
    roles: dict | None = None
    barriers: list[dict] | None = None
    build_error: str = ""  # the step file could not be built
    error: str = ""  # the child ended without a result


def record(request: TimelineRequest) -> TimelineResult:
    """Build (and on a GPU, run) the timeline build in a child over a copy of the course."""
    run = sandbox.run_child("grader.runs.timeline_child", asdict(request), Path(request.impl_dir),
                            with_solutions=True, timeout_s=RUN_TIMEOUT_S if request.measure else BUILD_TIMEOUT_S,
                            gpu=sandbox.this_gpu() if request.measure else None)
    if run.reply is not None:
        try:
            return TimelineResult(**run.reply)
        except TypeError:
            return TimelineResult(error="the timeline run wrote an unreadable result")
    if run.finished.returncode is None:
        return TimelineResult(error="the timeline run did not finish in time")
    lines = [line for line in run.finished.output.splitlines() if line.strip()] or ["(no output)"]
    return TimelineResult(error=lines[-1].strip())


# ---- the child ------------------------------------------------------------------------------------


def _child(request: TimelineRequest) -> TimelineResult:
    spec = STEPS[timeline.TRACK][request.step]
    try:
        factory = build.kernel_factory(Path(request.impl_dir), timeline.TRACK, spec)
        if request.measure:
            return TimelineResult(data=_measure(factory, request))
        from grader.core.steps import DEFAULT_SM_COUNT

        built = timeline.build_timeline(factory, spec, request.shape, timeline.ARCH, DEFAULT_SM_COUNT[timeline.ARCH],
                                        records_address=0)
        instrument.compile_cubin(built.cuda_source, timeline.ARCH, "the timeline build")
        return TimelineResult(sites=dict(built.sites), roles={str(w): r for w, r in built.roles.items()},
                              barriers=[asdict(b) for b in built.barriers])
    except (build.StepNotImplemented, build.BuildFailed) as err:
        return TimelineResult(build_error=str(err))


def _measure(factory, request: TimelineRequest) -> dict:
    """Build the timeline build, run it once after one warm-up, check it, and return the header + events."""
    import torch

    spec = STEPS[timeline.TRACK][request.step]
    os.environ["TVM_CUDA_COMPILE_MODE"] = "nvcc"  # as the locator: nvcc builds what the CPU tests compile
    buffer = torch.zeros(timeline.HEADER_WORDS + timeline.CAPACITY * timeline.RECORD_WORDS, dtype=torch.int32,
                         device="cuda")
    built = timeline.build_timeline(factory, spec, request.shape, timeline.ARCH, request.sm_count, buffer.data_ptr())
    a, b = random_inputs(request.shape, request.seed)
    d = torch.empty((request.shape[0], request.shape[1]), dtype=torch.float16, device="cuda")
    for _ in ("warm-up", "measured"):
        buffer.zero_()
        d.fill_(float("nan"))
        torch.cuda.synchronize()
        built.executable(a, b, d)
        _wait_for(torch.cuda.current_stream())
        torch.cuda.synchronize()  # whichever stream TVM launched on
    verdict = compare(d, reference(a, b))
    stamps, overflowed = timeline.decode(buffer.cpu().numpy().view("uint32"))
    return timeline.document(torch.cuda.get_device_name(0), spec, request.impl, request.shape, request.tiles,
                             verdict.message, verdict.max_error, stamps, overflowed, built.roles, built.barriers)


def _wait_for(stream) -> None:
    deadline = time.monotonic() + timeline.RUN_LIMIT_S
    while not stream.query():
        if time.monotonic() > deadline:
            print(f"the kernel did not finish in {timeline.RUN_LIMIT_S:.0f} s (make debug locates a hang)",
                  file=sys.stderr)
            os._exit(1)
        time.sleep(0.01)


if __name__ == "__main__":
    _request = json.loads(Path(sys.argv[1]).read_text())
    _request["shape"] = tuple(_request["shape"])
    _result = _child(TimelineRequest(**_request))
    Path(sys.argv[2]).write_text(json.dumps(asdict(_result)))
