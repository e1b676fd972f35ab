"""The report says what was checked where, and in instructor mode tells nothing to tune to."""

from __future__ import annotations

import json

from conftest import REPO
from grader.analysis import features
from grader.judge.grade import Config, StepResult
from grader.core.steps import STEPS
from grader.judge.report import print_report, write_json

DRAWN, LISTED = (1792, 2560, 1408), ("256x384x192", "2048x2048x2048")
SEED = 424242


def _config(instructor: bool, gpu_name: str | None = None) -> Config:
    return Config("steps", REPO / "steps", REPO / "solutions", "hopper", "sm_90a", gpu_name, 132, SEED, 60.0, None,
                  instructor)


def _result(correctness: str = "skipped") -> StepResult:
    digests = {shape: f"{i:064x}" for i, shape in enumerate([*LISTED, "1792x2560x1408"])}
    check = features.CheckResult("a check", True, "")
    return StepResult(step=5, file="steps/hopper/step05_software_pipeline.py", build="passed", checks=[check],
                      correctness=correctness, random_shape=DRAWN, cubin_sha256=digests)


def test_a_local_grade_names_the_shapes_it_built_and_which_one_was_drawn(capsys):
    print_report(_config(instructor=False), [_result()])
    out = capsys.readouterr().out
    assert ("step 5: built and checked at 256x384x192, 2048x2048x2048 and 1792x2560x1408 (drawn for this run "
            "from the step's rule)") in out
    assert "step 5: build and static checks passed" in out
    # it built three shapes, and simulated the barriers at all the step's correctness shapes: it says both
    shapes = len(STEPS["hopper"][5].correctness_shapes)
    assert f"simulated by the protocol checker at all {shapes} of the step's correctness shapes" in out


def test_instructor_mode_names_neither_the_seed_nor_the_drawn_shape(capsys, tmp_path):
    config, result = _config(instructor=True), _result()
    print_report(config, [result])
    write_json(config, [result], tmp_path / "r.json")
    out, report = capsys.readouterr().out, (tmp_path / "r.json").read_text()
    for text in (out, report):
        assert "1792" not in text and str(SEED) not in text
    assert "2 listed shapes and one drawn for this run" in out
    assert set(json.loads(report)["steps"][0]["cubin_sha256"]) == {*LISTED, "drawn"}


def test_a_protocol_failure_without_a_gpu_is_not_reported_as_passed(capsys):
    print_report(_config(instructor=False), [_result(correctness="failed")])
    out = capsys.readouterr().out
    assert "build and static checks passed" not in out
    assert "correctness here is the barrier protocol simulated on the CPU" in out
    assert "0 passed, 1 failed" in out


def test_a_step_whose_only_shape_was_drawn_names_it_once(capsys):
    result = _result()
    result.cubin_sha256 = {"1792x2560x1408": "0" * 64}
    print_report(_config(instructor=False, gpu_name="NVIDIA H100 80GB HBM3"), [result])
    out = capsys.readouterr().out
    assert ("step 5: built, checked and run at 1792x2560x1408 (drawn for this run from the step's rule); "
            "the sha256") in out


def test_the_json_report_gives_a_checks_hint_only_when_the_check_failed(tmp_path):
    """A hint names the step's answer ("four stages", "starts at phase 1"): a passed check must not hand it out."""
    result = _result()
    result.checks = [features.CheckResult("passed check", True, "the answer of a passed check"),
                     features.CheckResult("failed check", False, "what the failed check needs")]
    write_json(_config(instructor=False), [result], tmp_path / "r.json")
    report = (tmp_path / "r.json").read_text()
    checks = {c["name"]: c for c in json.loads(report)["steps"][0]["checks"]}
    assert checks["passed check"]["hint"] is None and checks["passed check"]["passed"] is True
    assert checks["failed check"]["hint"] == "what the failed check needs"
    assert "the answer of a passed check" not in report
