"""The CPU grade fails every known-bad kernel (tests/known_bad.py) with a message that names the fix,
and the reference solutions pass every protocol check.

Each variant is graded as a student's file through grade_step without a GPU, at the step's
static-check shape only (its shape rule is narrowed to that shape, so the drawn shape is the same
one and the build runs once).
"""

from __future__ import annotations

import dataclasses

import pytest

from conftest import REPO, TRACK_ARCH, build_step
from grader.analysis import features
from grader.judge.grade import Config, grade_step
from grader.core.steps import DEFAULT_SM_COUNT, STEPS, ShapeRule, static_check_shape
from known_bad import VARIANTS, Variant


def _static_shape_only(track: str, step: int):
    spec = STEPS[track][step]
    m, n, k = static_check_shape(spec.correctness_shapes)
    return dataclasses.replace(spec, shapes=ShapeRule(spec.shapes.tile, fixed_m=m, fixed_n=n, fixed_k=k),
                               correctness_shapes=((m, n, k),))


def _cpu_config(tree, track: str) -> Config:
    arch = TRACK_ARCH[track]
    return Config("steps", tree, REPO / "solutions", track, arch, None, DEFAULT_SM_COUNT[arch], 7, 60.0, None)


@pytest.mark.parametrize("variant", VARIANTS, ids=[v.name for v in VARIANTS])
def test_known_bad_kernel_fails_the_cpu_grade(tmp_path, variant: Variant):
    tree = variant.write(tmp_path / "steps")
    result = grade_step(_cpu_config(tree, variant.track), _static_shape_only(variant.track, variant.step))
    assert result.build == "passed", result.problems
    assert not result.passed
    failed = {check.name: check for check in result.checks if not check.passed}
    assert variant.check in failed, f"{variant.name}: failed {sorted(failed)}, expected {variant.check!r}"
    message = next(p for p in result.problems if variant.check in p)
    assert message.startswith("protocol mistake: ")
    assert failed[variant.check].hint in message  # the fix, in the student's report


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
    assert {v.gpu for v in VARIANTS} <= {"hang", "wrong", "slow", "fault", "race", "redundant"}
    assert {"hang", "wrong", "slow"} <= {v.gpu for v in VARIANTS}
    assert len({v.name for v in VARIANTS}) == len(VARIANTS)
    protocol = {c.name for steps in features.CHECKS.values() for checks in steps.values() for c in checks
                if c.kind == "protocol"}
    assert {v.check for v in VARIANTS} <= protocol
