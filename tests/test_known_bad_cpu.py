"""The CPU grade fails every known-bad kernel (tests/known_bad.py) with a message that names the fix,
and the reference solutions pass every protocol check.

Each variant is graded as a student's file through grade_step without a GPU, at the step's
static-check shape only, or the variant's own shape where its mistake shows only there (the shape rule
is narrowed to that shape, so the drawn shape is the same one and the build runs once).
"""

from __future__ import annotations

import dataclasses
import re

import pytest

from conftest import REPO, TRACK_ARCH, build_step
from grader.analysis import features
from grader.core import build
from grader.core.steps import DEFAULT_SM_COUNT, MAX_SLOWDOWN_VS_REFERENCE, STEPS, ShapeRule, static_check_shape
from grader.judge.grade import PROTOCOL_HEADER, Config, grade_step
from known_bad import BUILD, GPU_ONLY, GPU_ONLY_VARIANTS, SIMULATED, VARIANTS, Variant


def _static_shape_only(track: str, step: int, shape=None):
    """The step narrowed to one shape: its static-check shape, or the variant's own (one its mistake shows at)."""
    spec = STEPS[track][step]
    m, n, k = shape or static_check_shape(spec.correctness_shapes)
    return dataclasses.replace(spec, shapes=ShapeRule(spec.shapes.tile, fixed_m=m, fixed_n=n, fixed_k=k),
                               correctness_shapes=((m, n, k),))


def _cpu_config(tree, track: str) -> Config:
    arch = TRACK_ARCH[track]
    return Config("steps", tree, REPO / "solutions", track, arch, None, DEFAULT_SM_COUNT[arch], 7, 60.0, None)


def first_finding(result) -> str:
    """What the student reads first: the first problem, and of the simulated protocol its first finding."""
    first = result.problems[0]
    if first.startswith(PROTOCOL_HEADER):
        return next(line for line in first.splitlines() if line.startswith("- "))
    return first


@pytest.mark.parametrize("variant", VARIANTS, ids=[v.name for v in VARIANTS])
def test_known_bad_kernel_fails_the_cpu_grade(tmp_path, variant: Variant):
    tree = variant.write(tmp_path / "steps")
    result = grade_step(_cpu_config(tree, variant.track), _static_shape_only(variant.track, variant.step, variant.shape))
    assert result.build == ("failed" if variant.check == BUILD else "passed"), result.problems
    assert not result.passed
    if variant.check == BUILD:
        pass  # the build's own message is the first finding (checked below)
    elif variant.check == SIMULATED:
        assert result.correctness == "failed" and any(p.startswith(PROTOCOL_HEADER) for p in result.problems)
    else:
        failed = {check.name: check for check in result.checks if not check.passed}
        assert variant.check in failed, f"{variant.name}: failed {sorted(failed)}, expected {variant.check!r}"
        message = next(p for p in result.problems if variant.check in p)
        # a TODO whose decision is a step's feature itself (its warpgroups, its cluster) fails that feature check
        kind = failed[variant.check].kind
        assert message.startswith("protocol mistake: " if kind == "protocol" else "missing feature: ")
        assert failed[variant.check].hint in message  # the fix, in the student's report
    # the cause comes first, in the step's own names
    first = first_finding(result)
    missing = [name for name in variant.names if name.lower() not in first.lower()]
    assert not missing, f"{variant.name}: the first finding does not name {missing}:\n{first}"


def _todos(track: str, step: int) -> set[str]:
    skeleton = (REPO / "steps" / track / STEPS[track][step].file_name).read_text()
    return set(re.findall(r"# TODO (\d+\.\d+):", skeleton))


# Mistakes in the code a step keeps from the step before (outside its TODOs): known-bad, but no TODO of this step's
OUTSIDE_THE_TODOS = {"hopper-11-partner-on-the-same-rows", "hopper-11-cluster-rows-doubled"}


# and step 11 (step 12: the test below, with the mistakes only a GPU sees)
@pytest.mark.parametrize("track,step", [(t, s) for t in TRACK_ARCH for s in range(4, 12)])
def test_every_todo_of_steps_4_to_11_has_a_known_bad_variant_that_names_its_cause(track, step):
    variants = [v for v in VARIANTS if v.track == track and v.step == step and v.name not in OUTSIDE_THE_TODOS]
    todos = _todos(track, step)
    assert all(v.todo in todos for v in variants), [v.name for v in variants if v.todo not in todos]
    assert all(v.names for v in variants), [v.name for v in variants if not v.names]
    uncovered = todos - {v.todo for v in variants}
    assert not uncovered, f"{track} step {step}: no known-bad variant for TODO {sorted(uncovered)}"


@pytest.mark.parametrize("track,step", [(t, s) for t in TRACK_ARCH for s in sorted(STEPS[t])])
def test_reference_solution_passes_every_protocol_check(track, step):
    artifacts = build_step(REPO / "solutions", track, step)
    launch = features.Launch(static_check_shape(STEPS[track][step].correctness_shapes), DEFAULT_SM_COUNT[TRACK_ARCH[track]])
    results = features.run_checks(track, step, artifacts, launch)
    assert [r.name for r in results if r.kind == "protocol" and not r.passed] == []
    assert any(r.kind == "protocol" for r in results)


def test_the_variants_cover_both_tracks_and_every_step_class():
    covered = {(v.track, v.step) for v in VARIANTS}
    for track in TRACK_ARCH:
        assert {step for t, step in covered if t == track} >= {1, 2, 3, 4, 5, 6}
        assert any(step >= 7 for t, step in covered if t == track)
    assert {v.gpu for v in VARIANTS} <= {"hang", "wrong", "slow", "fault", "build", "race", "redundant"}
    assert {"hang", "wrong", "slow"} <= {v.gpu for v in VARIANTS}
    assert len({v.name for v in VARIANTS}) == len(VARIANTS)
    checks = {c.name for steps in features.CHECKS.values() for checks in steps.values() for c in checks}
    assert {v.check for v in VARIANTS} <= checks | {SIMULATED, BUILD}


def test_every_todo_of_step_12_has_a_known_bad_variant_on_the_cpu_or_the_gpu():
    """Step 12's mistakes that the CPU grade cannot see (GPU_ONLY_VARIANTS) still name their TODO, still
    match the solution, and stay out of VARIANTS; with the CPU ones they cover every TODO of the step."""
    gpu_only = [v for v in GPU_ONLY_VARIANTS if v.step == 12]
    cpu = [v for v in VARIANTS if v.track == "hopper" and v.step == 12]
    assert {v.name for v in gpu_only}.isdisjoint(v.name for v in VARIANTS)
    assert all(v.check == GPU_ONLY and v.names for v in gpu_only)  # a simulated mistake is in VARIANTS
    for variant in gpu_only:
        assert variant.source() != (REPO / "solutions" / "hopper" / STEPS["hopper"][12].file_name).read_text()
    todos = _todos("hopper", 12)
    assert {v.todo for v in gpu_only + cpu} == todos, sorted(todos - {v.todo for v in gpu_only + cpu})


# the TODOs of step 12 whose code runs on the host: the plan, its cost, stream-K's ranges
_HOST_TODOS = {"12.1", "12.2", "12.3"}


# How far the reference's model may be off at a plan it did not pick: 1000x3584x18944, stream-K rated 6% faster than
# whole tiles, ran 14% slower (solutions/hopper/step12_stream_k.py, STREAM_K_MARGIN)
MODEL_ERROR = 1.2


@pytest.mark.parametrize("variant", [v for v in GPU_ONLY_VARIANTS if v.todo in _HOST_TODOS],
                         ids=lambda v: v.name)
def test_a_gpu_only_plan_mistake_makes_a_plan_slow_past_the_limit_at_a_timing_shape(tmp_path, variant: Variant):
    """A mistake in the host's choice is seen by the GPU grade only where the plan it makes is slow: at a timing
    shape the reference's own model must rate the mistaken plan past the grade's limit, with room for the model's
    error, or the variant passes the GPU grade and tests nothing (three did: two changed no plan, one made plans
    the model rated 1.16x, and passed an H200 grade)."""
    spec = STEPS["hopper"][12]
    sm_count = DEFAULT_SM_COUNT["sm_90a"]
    mistaken = build.kernel_factory(variant.write(tmp_path / "steps"), "hopper", spec).__globals__
    reference = build.kernel_factory(REPO / "solutions", "hopper", spec).__globals__

    def rated(shape) -> float:  # the mistaken plan's time over the reference's, both in the reference's model
        plan = reference["Decomposition"](**dataclasses.asdict(mistaken["plan_decomposition"](*shape, sm_count)))
        best = reference["plan_decomposition"](*shape, sm_count)
        return reference["estimated_time"](*shape, plan) / reference["estimated_time"](*shape, best)

    ratings = {shape: rated(shape) for shape in spec.timing_shapes}
    slowest = max(ratings, key=ratings.get)
    assert ratings[slowest] >= MAX_SLOWDOWN_VS_REFERENCE * MODEL_ERROR, (
        f"{variant.name}: its plans are rated at most {ratings[slowest]:.2f}x the reference's time (at "
        f"{'x'.join(map(str, slowest))}), within the grade's {MAX_SLOWDOWN_VS_REFERENCE}x and the model's error")


def test_a_cpu_grade_of_a_ragged_step_builds_its_smallest_shape_where_tma_auto_is_refused(tmp_path):
    """The full CPU grade, not narrowed to one shape: it builds the largest shape, the drawn one and, for a step
    that takes any shape, the smallest (1x8x8), where TIRx refuses tma_auto's tensor map for a one-row A."""
    variant = next(v for v in VARIANTS if v.name == "hopper-11-loads-by-tma-auto")
    tree = variant.write(tmp_path / "steps")
    result = grade_step(_cpu_config(tree, "hopper"), STEPS["hopper"][11])
    assert result.build == "failed" and not result.passed
    assert "tma_explicit" in result.problems[0], result.problems[0]
