"""`make autograder`: the Gradescope package, unpacked and run on sample submissions (CPU: build and
static checks only), and its answers to bad input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import REPO
from grader.commands import autograder
from grader.core.steps import STEPS

TRACK = "hopper"
DEFAULT_WEIGHTS = [5, 5, 10, 10, 10, 10, 15, 5, 15, 15, 10, 15]


def _solution(step: int) -> str:
    return (REPO / "solutions" / TRACK / STEPS[TRACK][step].file_name).read_text()


@pytest.fixture(scope="module")
def package(tmp_path_factory) -> Path:
    """build/autograder.zip from `make autograder`, unpacked as Gradescope does (file modes kept)."""
    done = subprocess.run(["make", "-s", "autograder", f"PYTHON={sys.executable}"], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    root = tmp_path_factory.mktemp("source")
    with zipfile.ZipFile(REPO / "build" / "autograder.zip") as archive:
        for info in archive.infolist():
            archive.extract(info, root)
            os.chmod(root / info.filename, info.external_attr >> 16)
    return root


def _run(package: Path, submission: Path, results: Path, **env: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "AUTOGRADER_SOURCE": str(package), "PYTHON": sys.executable,
                   "AUTOGRADER_SUBMISSION": str(submission), "AUTOGRADER_RESULTS": str(results),
                   "CUDA_VISIBLE_DEVICES": "", "TRACK": TRACK, **env}
    return subprocess.run([str(package / "run_autograder")], env=environment, capture_output=True, text=True,
                          timeout=600)


def test_the_package_holds_the_scripts_and_the_course_without_its_tests(package):
    assert os.access(package / "setup.sh", os.X_OK) and os.access(package / "run_autograder", os.X_OK)
    assert autograder.read_weights(package / "weights") == DEFAULT_WEIGHTS
    assert sorted(p.name for p in package.iterdir()) == ["course", "run_autograder", "setup.sh", "weights"]
    course = package / "course"
    assert sorted(p.name for p in course.iterdir()) == sorted(autograder.COURSE_PARTS)
    for tree in ("steps", "solutions"):
        assert (course / tree / TRACK / STEPS[TRACK][10].file_name).read_text() == (
            REPO / tree / TRACK / STEPS[TRACK][10].file_name).read_text()
    assert (course / "grader" / "speed_floors.json").is_file()
    assert not list(course.rglob("__pycache__"))


def test_a_sample_submission_scores_exactly_its_passing_steps(package, tmp_path):
    submission = tmp_path / "submission"
    files = {
        "step01_single_tile.py": _solution(1),  # flat
        "hw/steps/hopper/step03_spatial_tiling.py": _solution(3),  # nested
        # a solution imported at grade time: instructor mode keeps solutions/ out of the build
        "steps/hopper/step02_k_loop.py": "from solutions.hopper.step02_k_loop import hgemm_v2  # noqa\n",
        # the wrong step: step 3's kernel as step 4 lacks TMA
        "steps/hopper/step04_tma.py": _solution(3).replace("def hgemm_v3(", "def hgemm_v4("),
        # neither another track's file nor a copy of the course's solutions is the student's step 5:
        # the skeleton is graded
        "steps/blackwell/step05_software_pipeline.py": (
            REPO / "solutions" / "blackwell" / STEPS["blackwell"][5].file_name).read_text(),
        "course/solutions/hopper/step05_software_pipeline.py": _solution(5),
    }
    for name, source in files.items():
        (submission / name).parent.mkdir(parents=True, exist_ok=True)
        (submission / name).write_text(source)
    results = tmp_path / "results"

    done = _run(package, submission, results, STEPS="1 2 3 4 5")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((results / "results.json").read_text())
    tests = {int(test["name"].split(":")[0].removeprefix("step ")): test for test in report["tests"]}
    assert sorted(tests) == [1, 2, 3, 4, 5]
    assert {n: (t["score"], t["max_score"]) for n, t in tests.items()} == {
        1: (5, 5), 2: (0, 5), 3: (10, 10), 4: (0, 10), 5: (0, 10)}
    assert report["score"] == 15
    assert all(t["visibility"] == "visible" for t in tests.values())
    assert "your step01_single_tile.py" in tests[1]["output"]
    assert "your hw/steps/hopper/step03_spatial_tiling.py" in tests[3]["output"]
    assert "No module named 'solutions" in tests[2]["output"]
    assert "missing feature: TMA loads" in tests[4]["output"]
    assert "not implemented yet" in tests[5]["output"] and "the course's skeleton" in tests[5]["output"]
    for test in tests.values():
        assert "not checked here (no GPU that runs sm_90a): correctness and speed" in test["output"]
    assert "instructor mode" in report["output"] and "no GPU" in report["output"]
    assert "seed" not in done.stdout.replace("hidden seed", "").replace("seed hidden", "")


@pytest.mark.parametrize("case,message", [
    ("no files", "no hopper step files in the submission"),
    ("weights unreadable", "must hold 12 numbers of points"),
    ("weights missing", "cannot read the weights file"),
    ("bad steps", "STEPS must be all, or step numbers from 1 to"),
    ("bad track", "TRACK must be auto, blackwell or hopper"),
])
def test_bad_input_is_one_line_and_a_results_file_that_says_so(package, tmp_path, case, message):
    submission = tmp_path / "submission"
    (submission / "steps" / "blackwell").mkdir(parents=True)
    (submission / "steps" / "blackwell" / STEPS["blackwell"][1].file_name).write_text(_solution(1))
    if case != "no files":
        (submission / STEPS[TRACK][1].file_name).write_text(_solution(1))
    weights = tmp_path / "weights"
    weights.write_text("5 5 10 ten\n" if case == "weights unreadable" else " ".join(map(str, DEFAULT_WEIGHTS)))
    env = {"AUTOGRADER_WEIGHTS": str(tmp_path / "absent" if case == "weights missing" else weights)}
    env |= {"STEPS": "0 3"} if case == "bad steps" else {}
    env |= {"TRACK": "ampere"} if case == "bad track" else {}
    results = tmp_path / "results"

    done = _run(package, submission, results, **env)
    assert done.returncode == 2
    assert done.stdout == "" and len(done.stderr.strip().splitlines()) == 1
    assert done.stderr.startswith("autograder: ") and message in done.stderr
    report = json.loads((results / "results.json").read_text())
    assert report == {"score": 0, "output": done.stderr.strip(), "tests": []}


@pytest.mark.parametrize("text", ["5 5 10 10 10 10 15 5 15 15", "1 2 3 4 5 6 7 8 9 10 11 -1",
                                  "1 2 3 4 5 6 7 8 9 10 11 nan"])
def test_weights_must_be_twelve_numbers_of_zero_or_more(tmp_path, text):
    path = tmp_path / "weights"
    path.write_text(text)
    with pytest.raises(autograder.BadInput, match="12 numbers"):
        autograder.read_weights(path)


def test_weights_are_read_with_comments(tmp_path):
    path = tmp_path / "weights"
    path.write_text("# points\n1 2 3 4 5  # steps 1-5\n6 7 8 9 10 11 12.5\n")
    assert autograder.read_weights(path) == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12.5]


def test_the_students_copy_of_the_course_is_found_in_steps(tmp_path):
    course = tmp_path / "submission" / "tirx-gemm-course"
    for tree in ("solutions", "steps"):
        shutil.copytree(REPO / tree, course / tree)
    found = autograder.find_step_files(tmp_path / "submission", TRACK)
    assert found == {n: course / "steps" / TRACK / spec.file_name for n, spec in STEPS[TRACK].items()
                     if (REPO / "steps" / TRACK / spec.file_name).exists()}


def test_a_link_in_the_submission_is_not_followed(tmp_path):
    submission = tmp_path / "submission"
    submission.mkdir()
    (submission / STEPS[TRACK][1].file_name).symlink_to(REPO / "solutions" / TRACK / STEPS[TRACK][1].file_name)
    shutil.copy(REPO / "steps" / TRACK / STEPS[TRACK][2].file_name, submission)
    assert autograder.find_step_files(submission, TRACK) == {2: submission / STEPS[TRACK][2].file_name}


@pytest.mark.parametrize("track", ["hopper", "blackwell"])
def test_all_steps_are_the_tracks_steps_and_a_step_it_lacks_is_refused(track):
    assert autograder.parse_steps("all", track) == sorted(STEPS[track])
    assert autograder.parse_steps("3 1 3", track) == [1, 3]
    missing = max(STEPS[track]) + 1
    with pytest.raises(autograder.BadInput, match=f"from 1 to {max(STEPS[track])} \\({track} track\\)"):
        autograder.parse_steps(str(missing), track)
