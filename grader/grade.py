"""Grade one step: build -> static checks -> correctness -> speed -> verdict."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from grader import build, features, gpu
from grader.hint import hint_command
from grader.steps import MAX_SLOWDOWN_VS_REFERENCE, SPEED_FLOORS, Shape, StepSpec, format_shape, static_check_shape


@dataclass(frozen=True)
class Config:
    impl: str  # "steps" (the student's) or "solutions" (the reference)
    impl_dir: Path
    solutions_dir: Path
    track: str
    arch: str
    gpu_name: str | None  # None: build and static checks only
    sm_count: int
    seed: int
    timeout_s: float
    shapes: tuple[Shape, ...] | None  # replaces each step's correctness shapes when given


@dataclass
class Timing:
    shape: Shape
    kernel_ms: float
    cublas_ms: float
    reference_ms: float | None

    @property
    def tflops(self) -> float:
        m, n, k = self.shape
        return 2 * m * n * k / (self.kernel_ms * 1e-3) / 1e12

    @property
    def share_of_cublas(self) -> float:
        return self.cublas_ms / self.kernel_ms


@dataclass
class StepResult:
    step: int
    file: str
    build: str = "not run"  # passed | failed | not implemented
    checks: list[features.CheckResult] = field(default_factory=list)
    correctness: str = "skipped"  # passed | failed | skipped
    speed: str = "skipped"
    timings: list[Timing] = field(default_factory=list)
    correctness_shapes: list[dict] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # what the student should read, in order
    build_seconds: float = 0.0

    @property
    def features(self) -> str:
        if not self.checks:
            return "not run"
        return "passed" if all(c.passed for c in self.checks) else "failed"

    @property
    def passed(self) -> bool:
        graded = [self.build, self.features, self.correctness, self.speed]
        return all(state in ("passed", "skipped") for state in graded)


def grade_step(config: Config, spec: StepSpec) -> StepResult:
    path = build.step_file(config.impl_dir, config.track, spec)
    result = StepResult(step=spec.number, file=str(path.relative_to(config.impl_dir.parent)))
    shapes = config.shapes or spec.correctness_shapes
    static_shape = static_check_shape(shapes)

    try:
        factory = build.kernel_factory(config.impl_dir, config.track, spec)
        artifacts = build.build(factory, spec, static_shape, config.arch, config.sm_count)
    except build.StepNotImplemented as err:
        result.build = "not implemented"
        todo = re.match(rf"{spec.number}\.(\d+) ", str(err))
        help_command = hint_command(spec.number, config.track, int(todo.group(1)) if todo else None)
        result.problems.append(
            f"not implemented yet (fill the TODOs in {result.file})\n  first open TODO: {err}\n  help: {help_command}"
        )
        return result
    except build.BuildFailed as err:
        result.build = "failed"
        result.problems.append(
            f"build failed for {config.arch} at {format_shape(static_shape)}:\n{err}\n"
            f"help: {hint_command(spec.number, config.track)}"
        )
        return result
    result.build, result.build_seconds = "passed", artifacts.seconds

    launch = features.Launch(static_shape, config.sm_count)
    result.checks = features.run_checks(config.track, spec.number, artifacts, launch)
    for check in result.checks:
        if not check.passed:
            result.problems.append(
                f"missing feature: {check.name} — {check.hint} (help: {hint_command(spec.number, config.track)})"
            )
    if config.gpu_name is None or result.features == "failed":
        return result

    reference = build.step_file(config.solutions_dir, config.track, spec)
    use_reference = config.impl != "solutions" and reference.exists()
    gpu_result = gpu.run_step(
        gpu.GpuRequest(
            impl_dir=str(config.impl_dir),
            reference_dir=str(config.solutions_dir) if use_reference else None,
            track=config.track,
            step=spec.number,
            arch=config.arch,
            sm_count=config.sm_count,
            seed=config.seed,
            correctness_shapes=list(shapes),
            timing_shapes=list(spec.timing_shapes),
        ),
        config.timeout_s,
    )
    _judge_correctness(result, gpu_result, len(shapes))
    if result.correctness == "failed":
        result.problems.append(f"help: {hint_command(spec.number, config.track)}")
    if result.correctness == "passed":
        _judge_speed(result, gpu_result, config, spec)
    return result


def _judge_correctness(result: StepResult, gpu_result: gpu.GpuResult, expected: int) -> None:
    result.correctness_shapes = gpu_result.correctness
    failed = [c for c in gpu_result.correctness if not c["passed"]]
    for c in failed:
        result.problems.append(f"wrong result at {format_shape(c['shape'])} (seed {c['seed']}): {c['message']}")
    if gpu_result.error and len(gpu_result.correctness) < expected:
        result.problems.append(gpu_result.error)
    complete = len(gpu_result.correctness) == expected
    result.correctness = "passed" if complete and not failed else "failed"


def _judge_speed(result: StepResult, gpu_result: gpu.GpuResult, config: Config, spec: StepSpec) -> None:
    if gpu_result.error or len(gpu_result.timing) < len(spec.timing_shapes):
        result.speed = "failed"
        result.problems.append(gpu_result.error or "timing did not complete")
        return
    result.timings = [
        Timing(tuple(t["shape"]), t["ms"]["kernel"], t["ms"]["cublas"], t["ms"].get("reference"))
        for t in gpu_result.timing
    ]
    floor = SPEED_FLOORS[config.arch].get(spec.number)
    too_slow = []
    for timing in result.timings:
        if timing.reference_ms is not None:
            slowdown = timing.kernel_ms / timing.reference_ms
            if slowdown > MAX_SLOWDOWN_VS_REFERENCE:
                too_slow.append(
                    f"too slow at {format_shape(timing.shape)}: {slowdown:.2f}x the reference solution's time "
                    f"(limit {MAX_SLOWDOWN_VS_REFERENCE}x)"
                )
        elif floor is None:
            too_slow.append(f"no speed floor for step {spec.number} on {config.arch} in grader/steps.py")
        elif timing.share_of_cublas < floor:
            too_slow.append(
                f"too slow at {format_shape(timing.shape)}: {timing.share_of_cublas:.1%} of cuBLAS "
                f"(floor for step {spec.number} on {config.arch}: {floor:.1%})"
            )
    result.problems.extend(too_slow)
    result.speed = "failed" if too_slow else "passed"
