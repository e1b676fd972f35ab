"""Grade one step: build -> static checks -> correctness -> speed -> verdict."""

from __future__ import annotations

import dataclasses
import random
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from grader.analysis import features
from grader.core import build, sandbox
from grader.runs import build_child
from grader.runs import gpu_child as gpu
from grader.core.steps import (
    MAX_SLOWDOWN_VS_REFERENCE, SPEED_FLOORS, Shape, ShapeRule, StepSpec, format_shape, static_check_shape,
)


PROTOCOL_NOT_SIMULATED = "the protocol checker did not simulate this kernel"


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
    instructor: bool = False  # hidden seed, no solutions in the build process, re-check after timing


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
    notes: list[str] = field(default_factory=list)  # what was not checked, and why (no verdict)
    build_seconds: float = 0.0
    random_shape: Shape | None = None  # the shape drawn from the step's rule for this run
    cubin_sha256: dict[str, str] = field(default_factory=dict)  # per shape: the kernel the checks read and the GPU ran

    @property
    def features(self) -> str:
        if not self.checks:
            return "not run"
        return "passed" if all(c.passed for c in self.checks) else "failed"

    @property
    def passed(self) -> bool:
        graded = [self.build, self.features, self.correctness, self.speed]
        return all(state in ("passed", "skipped") for state in graded)


def grade_step(config: Config, spec: StepSpec, watch: sandbox.Watch | None = None) -> StepResult:
    """Build in an isolated process, check the built kernels here, run them in a GPU child.
    Raises sandbox.Tampered when the build changed a file the judging processes read."""
    path = build.step_file(config.impl_dir, config.track, spec)
    result = StepResult(step=spec.number, file=str(path.relative_to(config.impl_dir.parent)))
    watch = watch or sandbox.Watch(build.TOOLCHAIN or sandbox.Toolchain.resolve())
    drawn = random_shape(spec.shapes, random.Random(f"{config.seed}:{spec.number}"))
    checked = list(dict.fromkeys([*(config.shapes or spec.correctness_shapes), drawn]))
    on_gpu = config.gpu_name is not None
    # without a GPU the static checks read the largest shape and the drawn one, and for a step that takes any
    # shape its smallest too (a one-row matrix: where TIRx's tma_auto refuses a tensor map that tma_explicit
    # takes); with a GPU, every shape it runs, so no shape runs a kernel the checks did not read
    smallest = [min(checked, key=lambda s: s[0] * s[1] * s[2])] if spec.shapes.ragged else []
    shapes = list(dict.fromkeys(checked + list(spec.timing_shapes))) if on_gpu else list(
        dict.fromkeys([static_check_shape(tuple(checked)), drawn, *smallest]))
    result.random_shape = drawn

    with tempfile.TemporaryDirectory(prefix="grader-kernels-") as work:
        try:
            builds = _build(config, spec, config.impl_dir, shapes, Path(work), with_solutions=not config.instructor,
                            watch=watch, protocol_shapes=list(spec.correctness_shapes))
            built = builds.kernels
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
                f"build failed for {config.arch}:\n{err}\nhelp: {hint_command(spec.number, config.track)}"
            )
            return result
        result.build = "passed"
        result.build_seconds = sum(b.artifacts.seconds for b in built)
        result.cubin_sha256 = {format_shape(b.shape): sandbox.sha256_bytes(b.cubin) for b in built}

        result.checks = _static_checks(config, spec, built)
        for check in result.checks:
            if not check.passed:
                what = "missing feature" if check.kind == "feature" else "protocol mistake"
                result.problems.append(
                    f"{what}: {check.name} — {check.hint} (help: {hint_command(spec.number, config.track)})"
                )
        if builds.protocol_unsupported:
            result.notes.append(f"{PROTOCOL_NOT_SIMULATED}: {builds.protocol_unsupported}")
        if builds.protocol_problems and not on_gpu:
            # the kernel cannot run here: the simulated protocol is the only correctness evidence there is
            result.correctness = "failed"
            result.problems.append(PROTOCOL_HEADER + "\n".join(builds.protocol_problems)
                                   + f"\nhelp: make check STEP={spec.number} shows the same; {hint_command(spec.number, config.track)}")
        if not on_gpu or result.features == "failed":
            return result

        reference = None
        if config.impl != "solutions" and build.step_file(config.solutions_dir, config.track, spec).exists():
            reference = _build(config, spec, config.solutions_dir, list(spec.timing_shapes), Path(work) / "reference",
                               with_solutions=True, watch=watch).kernels
        gpu_result = gpu.run_step(
            gpu.GpuRequest(
                impl_dir=str(config.impl_dir),
                track=config.track,
                step=spec.number,
                arch=config.arch,
                seed=config.seed,
                correctness_shapes=checked,
                timing_shapes=list(spec.timing_shapes),
                kernels=[gpu.Kernel.of("kernel", b, Path(work)) for b in built]
                + [gpu.Kernel.of("reference", b, Path(work) / "reference") for b in reference or []],
                recheck_seed=config.seed + RECHECK_SEED_OFFSET if config.instructor else None,
                sm_count=config.sm_count,
                with_solutions=not config.instructor,
            ),
            config.timeout_s,
        )
    sandbox.sweep()
    # the GPU child loads libraries the build made, and on a hang the locator imports the step file again
    _check_unchanged(watch, f"running step {spec.number}")
    _judge_correctness(result, gpu_result, len(checked))
    if builds.protocol_problems:  # on a GPU the run decides; the simulation says where to look
        result.problems.append(PROTOCOL_HEADER + "\n".join(builds.protocol_problems))
    if result.correctness == "failed":
        result.problems.append(f"help: {hint_command(spec.number, config.track)}")
    if result.correctness == "passed":
        _judge_speed(result, gpu_result, config, spec)
    return result


def hint_command(step: int, track: str, todo: int | None = None) -> str:
    """The make command that helps with a step (or one of its TODOs), for the grader's messages."""
    todo_part = f" TODO={todo}" if todo is not None else ""
    return f"make hint STEP={step}{todo_part} TRACK={track}"

PROTOCOL_HEADER = "the protocol checker (the kernel's barriers simulated on the CPU, `make check`) predicts:\n"
RECHECK_SEED_OFFSET = 1_000_003
RANDOM_SHAPE_MAX_DIM = 4096
RANDOM_SHAPE_MAX_MACS = 2048 * 2048 * 4096  # keeps a drawn shape's check under a second on any course GPU


def random_shape(rule: ShapeRule, rng: random.Random) -> Shape:
    """A shape the step must support, drawn from its rule within the size budget."""
    while True:
        shape = tuple(
            fixed if fixed is not None else tile * rng.randint(1, RANDOM_SHAPE_MAX_DIM // tile)
            for fixed, tile in zip((rule.fixed_m, rule.fixed_n, rule.fixed_k), rule.tile)
        )
        if shape[0] * shape[1] * shape[2] <= RANDOM_SHAPE_MAX_MACS:
            return shape


def _build(config: Config, spec: StepSpec, impl_dir: Path, shapes: list[Shape], out_dir: Path, *,
           with_solutions: bool, watch: sandbox.Watch, protocol_shapes: list[Shape] = ()) -> build_child.Builds:
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        return build_child.build_isolated(impl_dir, config.track, spec, shapes, config.arch, config.sm_count,
                                          with_solutions=with_solutions, export=config.gpu_name is not None,
                                          out_dir=out_dir, protocol_shapes=protocol_shapes)
    finally:
        _check_unchanged(watch, f"building step {spec.number}")


def _check_unchanged(watch: sandbox.Watch, what: str) -> None:
    try:
        sandbox.check_unchanged(watch, what)
    except sandbox.Tampered as err:
        raise sandbox.Tampered(f"{err}; graded as failed") from None


def _static_checks(config: Config, spec: StepSpec, built: list[build_child.Built]) -> list[features.CheckResult]:
    """Each check must pass at every built shape: a technique used only at some shapes fails."""
    merged: dict[str, features.CheckResult] = {}
    for b in built:
        for check in features.run_checks(config.track, spec.number, b.artifacts, features.Launch(b.shape, config.sm_count)):
            seen = merged.setdefault(check.name, check)
            if seen.passed and not check.passed:
                merged[check.name] = dataclasses.replace(check, hint=f"{check.hint} (absent at {format_shape(b.shape)})")
    return list(merged.values())


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
            too_slow.append(f"no speed floor for step {spec.number} on {config.arch} in grader/speed_floors.json")
        elif timing.share_of_cublas < floor:
            too_slow.append(
                f"too slow at {format_shape(timing.shape)}: {timing.share_of_cublas:.1%} of cuBLAS "
                f"(floor for step {spec.number} on {config.arch}: {floor:.1%})"
            )
    result.problems.extend(too_slow)
    result.speed = "failed" if too_slow else "passed"
