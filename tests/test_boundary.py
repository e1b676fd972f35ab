"""Every path that imports a student's file runs it in a child process over a throwaway copy of the course,
under the before/after file check of the build: the grade, `make check`, `make inspect`, `make debug`,
`make timeline`; `make hint` never imports it.

The student's file is a step whose kernel hangs on a GPU (step 7 with the producer starting on the
consumer's phase) and whose module code, when imported, writes into the course: relative to its working
folder and to its own file (a child that runs in the course tree itself, as the locator's did, writes
the course), or by the course's absolute path (the sandbox refuses it; without one, the file check must
catch it). Each case runs in a private copy of the course (`python -m ...` there), never this checkout.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, gpu_arch
from grader.core import sandbox
from grader.core.steps import STEPS

TRACK, STEP, SHAPE = "hopper", 7, "256x384x192"
HANG = (r"produce = PipelineState\(PIPE_DEPTH, 1\)", "produce = PipelineState(PIPE_DEPTH, 0)")
MARKER = "written-by-the-step-file"

# what the student's file does when imported: find the course the way a file can, and write into it; a
# write the sandbox refuses is passed over, so the step goes on to build (the kernel's own verdict stands)
RELATIVE_WRITE = f"""
import pathlib as _pathlib
for _course in {{_pathlib.Path.cwd(), _pathlib.Path(__file__).resolve().parents[2]}}:
    if (_course / "grader" / "core" / "steps.py").is_file():
        try:
            with open(_course / "grader" / "core" / "steps.py", "a") as _file:
                _file.write("\\n# changed by the student\\n")
            (_course / "{MARKER}").write_text("the step file ran here")
        except OSError:
            pass
"""


def _absolute_write(course: Path) -> str:
    return f"""
try:
    with open({str(course / "grader" / "core" / "steps.py")!r}, "a") as _file:
        _file.write("\\n# changed by the student\\n")
except OSError:
    pass
"""


def _course(tmp_path: Path, attack: str) -> Path:
    """A private copy of the course whose steps/ holds the hanging step 7 with `attack` at module level."""
    course = tmp_path / "course"
    for part in ("grader", "kernel_helpers", "solutions", "steps", "hints"):
        shutil.copytree(REPO / part, course / part, ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    for part in ("Makefile", "pyproject.toml"):
        shutil.copy(REPO / part, course / part)
    file_name = STEPS[TRACK][STEP].file_name
    hanging, count = re.subn(HANG[0], HANG[1], (REPO / "solutions" / TRACK / file_name).read_text())
    assert count == 1, "the mutation no longer matches step 7's solution"
    (course / "steps" / TRACK / file_name).write_text(hanging + attack)
    return course


def _append(course: Path, attack: str) -> None:
    with open(course / "steps" / TRACK / STEPS[TRACK][STEP].file_name, "a") as file:
        file.write(attack)


def _snapshot(course: Path) -> dict[str, str]:
    return {str(p.relative_to(course)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(course.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


def _run(course: Path, *args: str, gpu: bool = False, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key != "CUDA_VISIBLE_DEVICES"}
    if not gpu:
        env["CUDA_VISIBLE_DEVICES"] = ""  # the CPU path, wherever the tests run
    return subprocess.run([sys.executable, *args], cwd=course, env=env, capture_output=True, text=True, timeout=timeout)


# each path that imports the step file: its command, and the exit status it gives this kernel on a CPU
PATHS = {
    "grade": (["-m", "grader", "--step", str(STEP), "--track", TRACK, "--shape", SHAPE], 1),  # the protocol hangs
    "check": (["-m", "grader.commands.check", "--step", str(STEP), "--track", TRACK, "--shape", SHAPE], 1),
    "inspect": (["-m", "grader.commands.inspect_step", "--step", str(STEP), "--track", TRACK], 0),
    "debug": (["-m", "grader.commands.debug", "--step", str(STEP), "--track", TRACK, "--shape", SHAPE], 0),
    "timeline": (["-m", "grader.commands.timeline", "--step", str(STEP), "--impl", "steps", "--shape", SHAPE], 0),
}


def _args(tmp_path: Path, name: str) -> list[str]:
    args = PATHS[name][0]
    return [*args, "--json", str(tmp_path / "report.json")] if name == "grade" else args


@pytest.mark.parametrize("name", PATHS)
def test_a_step_file_that_writes_the_course_where_it_runs_leaves_it_unchanged(tmp_path, name):
    course = _course(tmp_path, RELATIVE_WRITE)
    before = _snapshot(course)
    done = _run(course, *_args(tmp_path, name))
    assert done.returncode == PATHS[name][1], done.stdout + done.stderr
    assert "changed files the grader relies on" not in done.stdout + done.stderr
    assert not (course / MARKER).exists(), f"{name} imported the step file in the course tree itself"
    assert _snapshot(course) == before


@pytest.mark.parametrize("name", PATHS)
def test_a_step_file_that_writes_the_course_by_its_path_is_refused_or_caught(tmp_path, name):
    course = _course(tmp_path, "")
    _append(course, _absolute_write(course))
    before = _snapshot(course)
    done = _run(course, *_args(tmp_path, name))
    output = done.stdout + done.stderr
    if sandbox.confinement().mode == "none":  # the write lands: the file check must catch it
        assert done.returncode == 1, output
        assert "changed files the grader relies on (grader/core/steps.py)" in output, output
        assert "tried to change the grader" in output
    else:  # the sandbox refuses it: the course is untouched and the kernel gets its own verdict
        assert done.returncode == PATHS[name][1], output
        assert _snapshot(course) == before


def test_hint_never_imports_the_step_file(tmp_path):
    course = _course(tmp_path, RELATIVE_WRITE)
    _append(course, _absolute_write(course))
    before = _snapshot(course)
    for args in (["--step", str(STEP)], ["--step", str(STEP), "--todo", "1", "--level", "3"]):
        done = _run(course, "-m", "grader.commands.hint", "--track", TRACK, *args)
        assert done.returncode == 0, done.stderr
    assert _snapshot(course) == before


# the grade's hang path: the kernel hangs on the GPU, the locator builds the debug build of the step file
# again; that import must happen in a copy of the course too. The static checks would fail this kernel
# before the GPU runs it, so they are set aside in the judging process (they run there, not in a child).
GRADE_WITHOUT_STATIC_CHECKS = """
import sys
from grader.analysis import features
features.CHECKS["hopper"][7] = []
from grader.judge import cli
sys.exit(cli.main(sys.argv[1:]))
"""


@pytest.mark.gpu
@pytest.mark.skipif("gpu_arch() != 'sm_90a'", reason="a mutation of the Hopper solution of step 7")
def test_the_grade_of_a_hanging_step_leaves_the_course_unchanged(tmp_path):
    course = _course(tmp_path, RELATIVE_WRITE)
    before = _snapshot(course)
    report = tmp_path / "report.json"
    done = _run(course, "-c", GRADE_WITHOUT_STATIC_CHECKS, "--step", str(STEP), "--track", TRACK, "--shape", SHAPE,
                "--timeout", "30", "--json", str(report), gpu=True)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "where it hangs (debug build at " in output, output  # the locator ran
    assert "changed files the grader relies on" not in output, output
    (entry,) = json.loads(report.read_text())["steps"]
    assert (entry["correctness"], entry["passed"]) == ("failed", False)
    assert not (course / MARKER).exists(), "the locator imported the step file in the course tree itself"
    assert _snapshot(course) == before
