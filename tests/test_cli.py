"""The grader's command line: bad input is one clear line and exit status 2; a CPU run builds only."""

from __future__ import annotations

import json

import pytest

from conftest import REPO, present_steps
from grader.judge import cli


def _run(capsys, *args):
    status = cli.main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize(
    "args,message",
    [
        (["--step", "0"], "--step must be a number from 1 to 12"),
        (["--step", "13"], "--step must be a number from 1 to 12"),
        (["--step", "five"], "--step must be a number from 1 to 12"),
        (["--track", "ampere"], "unknown track 'ampere'"),
        (["--arch", "sm_80"], "unknown arch 'sm_80'"),
        (["--track", "hopper", "--arch", "sm_100a"], "track hopper builds for sm_90a, not sm_100a"),
        (["--impl", "mine"], "--impl must be steps or solutions"),
        (["--step", "3", "--shape", "200x128x64"], "M=200 is not a positive multiple of 128"),
        (["--step", "3", "--shape", "128x128x96"], "K=96 is not a positive multiple of 64"),
        (["--step", "1", "--shape", "256x128x64"], "this step supports only M=128"),
        (["--step", "3", "--shape", "128by128"], "--shape must look like 256x512x128"),
        (["--bogus"], "unrecognized arguments"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, args, message):
    status, out, err = _run(capsys, *args)
    assert status == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1
    assert out == ""


def test_arch_the_present_gpu_cannot_run_is_refused(capsys, monkeypatch):
    monkeypatch.setattr(cli, "detect_gpu", lambda: ("NVIDIA H100 80GB HBM3", "sm_90a", 132))
    status, _, err = _run(capsys, "--arch", "sm_100a", "--step", "1")
    assert status == 2
    assert "runs sm_90a kernels, not sm_100a" in err


def test_gpu_picks_its_track():
    assert cli.resolve_arch_and_track("auto", "auto", "NVIDIA H100 80GB HBM3", "sm_90a") == ("sm_90a", "hopper")
    assert cli.resolve_arch_and_track("auto", "auto", None, None) == ("sm_100a", "blackwell")
    assert cli.resolve_arch_and_track("sm_103a", "auto", None, None) == ("sm_103a", "blackwell")


@pytest.mark.parametrize("track,step", present_steps("steps"))
def test_untouched_skeleton_says_not_implemented(capsys, monkeypatch, tmp_path, track, step):
    monkeypatch.setattr(cli, "detect_gpu", lambda: (None, None, 0))
    status, out, _ = _run(capsys, "--step", str(step), "--track", track, "--json", str(tmp_path / "r.json"))
    assert status == 1
    file = f"steps/{track}/step{step:02d}_"
    assert f"step {step}: not implemented yet (fill the TODOs in {file}" in out
    assert "Traceback" not in out


def test_cpu_grade_of_a_solution_builds_checks_and_skips_the_gpu(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(cli, "detect_gpu", lambda: (None, None, 0))
    report = tmp_path / "report.json"
    status, out, _ = _run(capsys, "--step", "1", "--impl", "solutions", "--track", "hopper", "--json", str(report))
    assert status == 0
    assert "correctness here is the barrier protocol simulated on the CPU" in out
    (step,) = json.loads(report.read_text())["steps"]
    assert (step["build"], step["features"], step["correctness"], step["speed"]) == ("passed", "passed", "skipped", "skipped")


def test_grading_never_writes_into_the_course_trees(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(cli, "detect_gpu", lambda: (None, None, 0))
    before = {p: p.stat().st_mtime_ns for tree in ("steps", "solutions") for p in (REPO / tree).rglob("*.py")}
    _run(capsys, "--step", "1", "--impl", "solutions", "--track", "hopper", "--json", str(tmp_path / "r.json"))
    after = {p: p.stat().st_mtime_ns for tree in ("steps", "solutions") for p in (REPO / tree).rglob("*.py")}
    assert before == after


def _course(root, filled: tuple[str, ...]):
    """A course tree whose steps/<track>/step01 is the skeleton, or the solution for tracks in `filled`."""
    for track in ("blackwell", "hopper"):
        (root / "steps" / track).mkdir(parents=True)
        tree = "solutions" if track in filled else "steps"
        name = "step01_single_tile.py"
        (root / "steps" / track / name).write_text((REPO / tree / track / name).read_text())
    return root


@pytest.mark.parametrize("filled,tracks", [((), ["blackwell"]), (("hopper",), ["hopper"]),
                                           (("blackwell",), ["blackwell"]), (("blackwell", "hopper"), ["blackwell", "hopper"])])
def test_without_a_gpu_track_auto_grades_the_tracks_filled_in(tmp_path, filled, tracks):
    chosen, line = cli.cpu_tracks("1", _course(tmp_path, filled) / "steps")
    assert chosen == tracks
    if len(filled) == 1:
        assert f"grading the {filled[0]} track" in line
    assert (line is None) == (not filled)


def test_cpu_grade_of_a_finished_hopper_step_with_track_auto(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr(cli, "detect_gpu", lambda: (None, None, 0))
    monkeypatch.setattr(cli, "REPO_ROOT", _course(tmp_path / "course", ("hopper",)))
    status, out, err = _run(capsys, "--step", "1", "--json", str(tmp_path / "r.json"))
    assert "no GPU and TRACK=auto: grading the hopper track" in err
    assert "grading steps/hopper for sm_90a" in out
    assert "step 1: build and static checks passed; not checked without a GPU: numerical result, speed" in out
    assert status == 0


def test_a_course_handed_out_without_solutions_grades_and_hints(tmp_path):
    """Instructors may hand out the course without solutions/: grading works, level 3 says why it cannot."""
    import shutil
    import subprocess
    import sys

    course = tmp_path / "course"
    for part in ("grader", "kernel_helpers", "hints"):
        shutil.copytree(REPO / part, course / part, ignore=shutil.ignore_patterns("__pycache__"))
    _course(course, ("hopper",))
    graded = subprocess.run([sys.executable, "-m", "grader", "--step", "1", "--track", "hopper", "--json",
                             str(tmp_path / "r.json")], cwd=course, capture_output=True, text=True, timeout=600)
    assert graded.returncode == 0, graded.stdout + graded.stderr
    assert "step 1: build and static checks passed" in graded.stdout
    hinted = subprocess.run([sys.executable, "-m", "grader.commands.hint", "--step", "1", "--todo", "1", "--level", "3",
                             "--track", "hopper"], cwd=course, capture_output=True, text=True, timeout=120)
    assert hinted.returncode == 2
    assert hinted.stderr.strip().splitlines() == [
        "hint: level 3 reads the reference solution, and this copy of the course has no "
        "solutions/hopper/step01_single_tile.py; levels 1 and 2 work without it"]
