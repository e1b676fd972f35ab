"""What every step notebook does: pick the track, explain it, show a step's code diff, build it, run it on a GPU.

The track: on a Hopper or Blackwell GPU, that GPU's (and the notebooks also run, check and time each step
against cuBLAS); without one, COURSE_TRACK=hopper|blackwell in the environment (`make notebooks
TRACK=blackwell` sets it), else Hopper (its solutions ran on an H100). Every text and pattern that differs
between the tracks comes from track_text.py, so a notebook describes the track it was opened for; the texts
that state a step's reference design (steps 4-12) come with the solutions (solutions/notebook_text.py).

A course handed out without solutions/ still runs every notebook: a cell that needs a reference solution
says so in one line (`needs_solutions`), an explain() cell says in one line that its text comes with the
solutions, and the others run as usual.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from grader.core import build  # noqa: E402
from grader.analysis import diagnosis, features, timing  # noqa: E402
from grader.judge.cli import ARCH_OF_CAPABILITY  # noqa: E402
from grader.core.steps import DEFAULT_SM_COUNT, STEPS, format_shape  # noqa: E402

import figures  # noqa: E402
import track_text  # noqa: E402
from figures import code_diff, grep, tflops  # noqa: E402

SOLUTIONS = REPO / "solutions"
TRACK_ARCH = {"hopper": "sm_90a", "blackwell": "sm_100a"}
CHOSEN_TRACK = os.environ.get("COURSE_TRACK", "auto")
if CHOSEN_TRACK not in (*TRACK_ARCH, "auto"):
    raise ValueError(f"COURSE_TRACK={CHOSEN_TRACK!r}: use hopper, blackwell or auto")
GPU_ARCH = ARCH_OF_CAPABILITY.get(torch.cuda.get_device_capability(0)) if torch.cuda.is_available() else None
ARCH = GPU_ARCH or TRACK_ARCH["hopper" if CHOSEN_TRACK == "auto" else CHOSEN_TRACK]
TRACK = "hopper" if ARCH == "sm_90a" else "blackwell"
OTHER_TRACK = "blackwell" if TRACK == "hopper" else "hopper"
SM_COUNT = torch.cuda.get_device_properties(0).multi_processor_count if GPU_ARCH else DEFAULT_SM_COUNT[ARCH]
NO_GPU = (
    "skipped: no GPU here (torch.cuda.is_available() is False)" if not torch.cuda.is_available()
    else f"skipped: {torch.cuda.get_device_name()} is neither a Hopper nor a Blackwell GPU"
)


def describe() -> str:
    gpu_name = torch.cuda.get_device_name() if GPU_ARCH else "none (build and read only)"
    chosen = "" if GPU_ARCH or CHOSEN_TRACK != "auto" else "; COURSE_TRACK=blackwell reads the other track"
    return f"track {TRACK}, arch {ARCH}, SMs {SM_COUNT}, GPU: {gpu_name}{chosen}"


def explain(topic: str, track: str = TRACK) -> None:
    """This track's text for a topic of the notebook (track_text.text), rendered as Markdown; without the
    solutions, one line that says the text describes the step's reference design and comes with them."""
    text = track_text.text(track, topic)
    if text is None:
        print(track_text.withheld(topic))
        return
    try:
        from IPython.display import Markdown, display
    except ImportError:  # a plain interpreter
        print(text)
        return
    display(Markdown(text))


def solution_file(step: int, track: str = TRACK) -> Path:
    return build.step_file(SOLUTIONS, track, STEPS[track][step])


def needs_solutions(*steps: int, track: str = TRACK) -> bool:
    """True when the reference solutions of these steps are here; else one line that says which is missing."""
    missing = [solution_file(step, track) for step in steps if not solution_file(step, track).exists()]
    if missing:
        print(f"this cell needs {missing[0].relative_to(REPO)}, which this copy of the course does not have "
              f"(handed out without solutions/)")
    return not missing


def show_diff(step: int, track: str = TRACK) -> None:
    """The kernel code that step `step` adds to step `step - 1` (docstrings and comments left out)."""
    if needs_solutions(step - 1, step, track=track):
        print(code_diff(solution_file(step - 1, track), solution_file(step, track)))


def show_docstring(step: int, track: str = TRACK) -> None:
    """The docstring of the reference solution's hgemm_vN: its data path and barrier protocol."""
    if needs_solutions(step, track=track):
        print(build.kernel_factory(SOLUTIONS, track, STEPS[track][step]).__doc__)


def build_step(step: int, shape, track: str = TRACK, arch: str | None = None,
               static_checks: bool = True) -> build.Artifacts | None:
    """Build the reference solution; print its launch and the static checks the grader runs on it."""
    if not needs_solutions(step, track=track):
        return None
    arch = arch or (ARCH if track == TRACK else TRACK_ARCH[track])
    spec = STEPS[track][step]
    factory = build.kernel_factory(SOLUTIONS, track, spec)
    artifacts = build.build(factory, spec, tuple(shape), arch, sm_count=SM_COUNT if arch == ARCH else DEFAULT_SM_COUNT[arch])
    print(f"step {step} ({track}, {arch}) at {format_shape(shape)}: built in {artifacts.seconds:.1f} s, "
          f"grid {artifacts.grid}, {artifacts.threads_per_cta} threads per CTA")
    if not static_checks:
        return artifacts
    if step not in features.CHECKS[track]:
        print(f"  grader/analysis/features.py has no static checks for {track} step {step} yet")
        return artifacts
    for check in features.run_checks(track, step, artifacts, features.Launch(tuple(shape), SM_COUNT)):
        print(f"  static check {'pass' if check.passed else 'FAIL'}: {check.name}")
    return artifacts


def show_emitted(step: int, shape, patterns=None) -> build.Artifacts | None:
    """Build the step and print the lines of its CUDA / PTX / SASS that embody the step's idea on this track
    (track_text.emitted, or `patterns`: (artifact field, regular expression, how many lines))."""
    artifacts = build_step(step, shape)
    if artifacts is not None:
        for field, pattern, limit in patterns or track_text.emitted(TRACK, step) or []:
            print(grep(getattr(artifacts, field), pattern, limit=limit))
    return artifacts


def sass_counts(artifacts: build.Artifacts | None,
                names=("UTCHMMA", "UTCBAR", "LDTM", "HGMMA", "LDG", "STS", "STG")) -> dict[str, int]:
    """How often each instruction name occurs in the SASS ({} without a build)."""
    if artifacts is None:
        return {}
    return {name: artifacts.sass.count(name) for name in names if artifacts.sass.count(name)}


def pipe_depth(step: int, track: str = TRACK) -> int | None:
    """The step's PIPE_DEPTH, evaluated from its reference solution (None, with one line, without it)."""
    return figures.constant(solution_file(step, track), "PIPE_DEPTH") if needs_solutions(step, track=track) else None


def drawn_protocol(step: int, track: str = TRACK) -> tuple[figures.Protocol, str] | None:
    """Steps 7-10: the protocol of the step's reference solution as figures draws it, and a title."""
    stages = pipe_depth(step, track)
    if stages is None:
        return None
    if track == "hopper":
        consumers = figures.constant(solution_file(10, track), "NUM_CONSUMERS") if step == 10 else 1
        protocol = figures.Protocol(stages=stages, producer=True, groups_in_flight=1,
                                    ctas=2 if step >= 9 else 1, consumers=consumers)
        who = (f"producer + {protocol.ctas} CTA(s) x {consumers} consumer(s), wgmma groups in flight "
               f"{protocol.groups_in_flight}{'; CTA 1 drawn 10% slower' if protocol.ctas > 1 else ''}")
    else:
        # one MMA issuer per accumulator; tcgen05.mma is asynchronous and a commit releases each stage,
        # so the issuer moves on to the next K tile as a wgmma consumer with one group in flight does
        consumers = figures.constant(solution_file(10, track), "NUM_CONSUMER") if step == 10 else 1
        protocol = figures.Protocol(stages=stages, producer=True, groups_in_flight=1, consumers=consumers)
        who = f"TMA producer + {consumers} MMA issuer(s){' for the CTA pair' if step >= 9 else ''}"
    return protocol, f"step {step} ({track}): {who}, {stages} stages"


def run_on_gpu(step: int, check_shape, timing_shape=(4096, 4096, 4096), seed: int = 0) -> None:
    """Check the reference solution against fp32 at check_shape, then time it against cuBLAS at timing_shape
    (None: no timing)."""
    if not GPU_ARCH:
        print(NO_GPU)
        return
    if not needs_solutions(step):
        return
    spec = STEPS[TRACK][step]
    factory = build.kernel_factory(SOLUTIONS, TRACK, spec)

    def compiled(shape):
        # step 12's workspace and locks: allocated once and zeroed, passed after D (build.launcher)
        prim_func = build.make_prim_func(factory, spec, tuple(shape), SM_COUNT)
        return build.launcher(build.compile_module(prim_func, ARCH), build.scratch_buffers(prim_func))

    a, b = diagnosis.random_inputs(tuple(check_shape), seed)
    d = torch.full((a.shape[0], b.shape[0]), float("nan"), dtype=torch.float16, device="cuda")
    compiled(check_shape)(a, b, d)
    torch.cuda.synchronize()
    verdict = diagnosis.compare(d, diagnosis.reference(a, b))
    print(f"correctness at {format_shape(check_shape)}: {verdict.message} (max error {verdict.max_error:.1e} x rms)")
    if timing_shape is None:
        return

    kernel = compiled(timing_shape)
    a, b = diagnosis.random_inputs(tuple(timing_shape), seed)
    d, d_cublas = (torch.empty((a.shape[0], b.shape[0]), dtype=torch.float16, device="cuda") for _ in range(2))
    ms = timing.median_ms_interleaved(
        {"kernel": lambda: kernel(a, b, d), "cublas": lambda: torch.matmul(a, b.T, out=d_cublas)}
    )
    print(f"at {format_shape(timing_shape)}: step {step} {ms['kernel']:.3f} ms = "
          f"{tflops(timing_shape, ms['kernel']):.0f} TFLOP/s; cuBLAS {ms['cublas']:.3f} ms = "
          f"{tflops(timing_shape, ms['cublas']):.0f} TFLOP/s; share of cuBLAS {ms['cublas'] / ms['kernel']:.0%}")


def solution_names(step: int) -> dict | None:
    """The module-level names of a step's reference solution (its host-side functions, constants), or None with
    one line without it."""
    if not needs_solutions(step):
        return None
    return build.kernel_factory(SOLUTIONS, TRACK, STEPS[TRACK][step]).__globals__


def check_protocol(factory, shape, sm_count: int, **kwargs) -> bool:
    """Simulate a kernel's barrier protocol (and step 12's fixup through global memory) on the CPU at one shape,
    as `make check` does, and print the verdict; kwargs go to the kernel factory (step 12: plan=...)."""
    from grader.analysis import protocol

    verdict = protocol.check_kernel(protocol.compile_kernel(factory(*shape, sm_count, **kwargs)), tuple(shape), True)
    print("\n".join(verdict.lines()))
    return verdict.ok


__all__ = ["REPO", "build", "diagnosis", "features", "timing", "TRACK", "OTHER_TRACK", "ARCH", "GPU_ARCH",
           "SM_COUNT", "describe", "explain", "solution_file", "needs_solutions", "show_diff", "show_docstring",
           "build_step", "show_emitted", "sass_counts", "pipe_depth", "drawn_protocol", "run_on_gpu", "grep", "STEPS",
           "solution_names", "check_protocol", "SOLUTIONS"]
