"""What every step notebook does: pick the track, show a step's code diff, build it, run it on a GPU.

Without a GPU the notebooks show the Hopper track (its solutions ran on an H100); on a Hopper or
Blackwell GPU they show that GPU's track and also run, check and time each step against cuBLAS.
"""

from __future__ import annotations

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

from figures import code_diff, grep, tflops  # noqa: E402

SOLUTIONS = REPO / "solutions"
GPU_ARCH = ARCH_OF_CAPABILITY.get(torch.cuda.get_device_capability(0)) if torch.cuda.is_available() else None
ARCH = GPU_ARCH or "sm_90a"
TRACK = "hopper" if ARCH == "sm_90a" else "blackwell"
SM_COUNT = torch.cuda.get_device_properties(0).multi_processor_count if GPU_ARCH else DEFAULT_SM_COUNT[ARCH]
NO_GPU = (
    "skipped: no GPU here (torch.cuda.is_available() is False)" if not torch.cuda.is_available()
    else f"skipped: {torch.cuda.get_device_name()} is neither a Hopper nor a Blackwell GPU"
)


def describe() -> str:
    gpu_name = torch.cuda.get_device_name() if GPU_ARCH else "none (build and read only)"
    return f"track {TRACK}, arch {ARCH}, SMs {SM_COUNT}, GPU: {gpu_name}"


def solution_file(step: int, track: str = TRACK) -> Path:
    return build.step_file(SOLUTIONS, track, STEPS[track][step])


def show_diff(step: int, track: str = TRACK) -> None:
    """The kernel code that step `step` adds to step `step - 1` (docstrings and comments left out)."""
    previous, current = solution_file(step - 1, track), solution_file(step, track)
    missing = [p.relative_to(REPO) for p in (previous, current) if not p.exists()]
    if missing:
        print(f"{track}: {', '.join(map(str, missing))} not written yet")
        return
    print(code_diff(previous, current))


def build_step(step: int, shape, track: str = TRACK, arch: str | None = None) -> build.Artifacts:
    """Build the reference solution; print its launch and the static checks the grader runs on it."""
    arch = arch or (ARCH if track == TRACK else {"hopper": "sm_90a", "blackwell": "sm_100a"}[track])
    spec = STEPS[track][step]
    factory = build.kernel_factory(SOLUTIONS, track, spec)
    artifacts = build.build(factory, spec, tuple(shape), arch, sm_count=SM_COUNT if arch == ARCH else DEFAULT_SM_COUNT[arch])
    print(f"step {step} ({track}, {arch}) at {format_shape(shape)}: built in {artifacts.seconds:.1f} s, "
          f"grid {artifacts.grid}, {artifacts.threads_per_cta} threads per CTA")
    if step not in features.CHECKS[track]:
        print(f"  grader/analysis/features.py has no static checks for {track} step {step} yet")
        return artifacts
    for check in features.run_checks(track, step, artifacts, features.Launch(tuple(shape), SM_COUNT)):
        print(f"  static check {'pass' if check.passed else 'FAIL'}: {check.name}")
    return artifacts


def run_on_gpu(step: int, check_shape, timing_shape=(4096, 4096, 4096), seed: int = 0) -> None:
    """Check the reference solution against fp32 at check_shape, then time it against cuBLAS."""
    if not GPU_ARCH:
        print(NO_GPU)
        return
    spec = STEPS[TRACK][step]
    factory = build.kernel_factory(SOLUTIONS, TRACK, spec)

    def compiled(shape):
        return build.compile_module(build.make_prim_func(factory, spec, tuple(shape), SM_COUNT), ARCH)

    a, b = diagnosis.random_inputs(tuple(check_shape), seed)
    d = torch.full((a.shape[0], b.shape[0]), float("nan"), dtype=torch.float16, device="cuda")
    compiled(check_shape)(a, b, d)
    torch.cuda.synchronize()
    verdict = diagnosis.compare(d, diagnosis.reference(a, b))
    print(f"correctness at {format_shape(check_shape)}: {verdict.message} (max error {verdict.max_error:.1e} x rms)")

    kernel = compiled(timing_shape)
    a, b = diagnosis.random_inputs(tuple(timing_shape), seed)
    d, d_cublas = (torch.empty((a.shape[0], b.shape[0]), dtype=torch.float16, device="cuda") for _ in range(2))
    ms = timing.median_ms_interleaved(
        {"kernel": lambda: kernel(a, b, d), "cublas": lambda: torch.matmul(a, b.T, out=d_cublas)}
    )
    print(f"at {format_shape(timing_shape)}: step {step} {ms['kernel']:.3f} ms = "
          f"{tflops(timing_shape, ms['kernel']):.0f} TFLOP/s; cuBLAS {ms['cublas']:.3f} ms = "
          f"{tflops(timing_shape, ms['cublas']):.0f} TFLOP/s; share of cuBLAS {ms['cublas'] / ms['kernel']:.0%}")


__all__ = ["REPO", "build", "diagnosis", "features", "timing", "TRACK", "ARCH", "GPU_ARCH", "SM_COUNT", "describe", "solution_file", "show_diff",
           "build_step", "run_on_gpu", "grep", "STEPS"]
