"""Skeletons that teach (issue 14), over every step present in both trees, both tracks.

- A skeleton holds as code at most 25% of the code lines its solution adds to the previous solution
  (the rule of ../shared/tools/skeleton_metrics.py, in skeleton_measure.py).
- No skeleton comment holds a solution code line of 20 or more non-blank characters.
- Every TODO of every skeleton has its hints (levels 1-2) and its marked solution region (level 3),
  with the same numbering and titles in all three files, and `make hint` prints them.
- Pasting every TODO's level 3 into its skeleton gives a kernel that builds and passes the static checks.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from conftest import REPO, TRACK_ARCH
from grader.commands import hint
from grader.judge.grade import Config, grade_step
from grader.core.steps import DEFAULT_SM_COUNT, STEPS
from skeleton_measure import given_lines, leaked_lines

MAX_GIVEN_SHARE = 0.25
_TODO_BLOCK = re.compile(r"^([ \t]*)# TODO (\d+)\.(\d+): (.*)\n(?:\1#.*\n)*\1todo\(\"\2\.\3 [^\n]*\n", re.MULTILINE)


def _pairs() -> list[tuple[str, int]]:
    """(track, step) with both a skeleton and a solution."""
    return [
        (track, number)
        for track in TRACK_ARCH
        for number, spec in STEPS[track].items()
        if (REPO / "steps" / track / spec.file_name).exists() and (REPO / "solutions" / track / spec.file_name).exists()
    ]


def _paths(track: str, step: int) -> tuple[Path, Path]:
    name = STEPS[track][step].file_name
    return REPO / "solutions" / track / name, REPO / "steps" / track / name


def _skeleton_todos(track: str, step: int) -> list[tuple[int, str]]:
    text = _paths(track, step)[1].read_text()
    return [(int(found.group(3)), found.group(4)) for found in _TODO_BLOCK.finditer(text)]


@pytest.mark.parametrize("track,step", [p for p in _pairs() if p[1] > 1 and (p[0], p[1] - 1) in _pairs()])
def test_skeleton_gives_at_most_a_quarter_of_the_idea(track, step):
    previous = REPO / "solutions" / track / STEPS[track][step - 1].file_name
    solution, skeleton = _paths(track, step)
    idea, given = given_lines(previous, solution, skeleton)
    assert idea, "the solution adds no code to the previous step's"
    assert len(given) / len(idea) <= MAX_GIVEN_SHARE, f"{len(given)}/{len(idea)} idea lines given:\n" + "\n".join(given)


@pytest.mark.parametrize("track,step", _pairs())
def test_no_skeleton_comment_holds_a_solution_line(track, step):
    left, leaked = leaked_lines(*_paths(track, step))
    assert left, "the skeleton leaves nothing to write"
    assert leaked == []


@pytest.mark.parametrize("track,step", _pairs())
def test_every_todo_has_hints_at_every_level(track, step, capsys):
    todos = _skeleton_todos(track, step)
    assert [k for k, _ in todos] == list(range(1, len(todos) + 1)), "TODOs are numbered N.1, N.2, ... in file order"
    solution_titles = re.findall(rf"# >>> TODO {step}\.(\d+): (.*)", _paths(track, step)[0].read_text())
    assert [(int(k), title) for k, title in solution_titles] == todos
    assert [(t.number, t.title) for t in hint.read_todos(track, step)] == todos
    for k, title in todos:
        for level in hint.LEVELS:
            assert hint.main(["--step", str(step), "--todo", str(k), "--level", str(level), "--track", track]) == 0
            out = capsys.readouterr().out
            assert out.startswith(f"TODO {step}.{k}: {title} (level {level} of 3)")
            assert len(out.split("\n\n", 1)[1].strip()) > 0
    assert hint.main(["--step", str(step), "--track", track]) == 0
    listing = capsys.readouterr().out
    assert all(title in listing for _, title in todos)


@pytest.mark.parametrize(
    "args,message",
    [
        (["--step", "0"], "--step must be one of 1..10"),
        (["--step", "4", "--level", "4"], "--level must be one of 1..3"),
        (["--step", "4", "--todo", "x"], "--todo must be one of"),
        (["--step", "4", "--todo", "99", "--track", "blackwell"], "has TODOs 1-"),
        (["--step", "4", "--track", "ampere"], "unknown track 'ampere'"),
        (["--bogus"], "the following arguments are required: --step"),
    ],
)
def test_bad_hint_options_are_one_line_and_exit_2(capsys, args, message):
    assert hint.main(args) == 2
    out, err = capsys.readouterr()
    assert message in err and len(err.strip().splitlines()) == 1 and out == ""


def _filled_skeleton(track: str, step: int) -> str:
    def paste(found: re.Match) -> str:
        indent, k = found.group(1), int(found.group(3))
        lines = hint.reference_lines(track, step, k).splitlines()
        return "".join(f"{indent}{line}\n" if line.strip() else "\n" for line in lines)

    return _TODO_BLOCK.sub(paste, _paths(track, step)[1].read_text())


@pytest.mark.parametrize("track,step", _pairs())
def test_level_3_pasted_into_the_skeleton_passes_the_cpu_grade(track, step, tmp_path):
    filled = tmp_path / "steps" / track / STEPS[track][step].file_name
    filled.parent.mkdir(parents=True)
    filled.write_text(_filled_skeleton(track, step))
    assert "todo(" not in filled.read_text()
    shutil.copytree(REPO / "solutions", tmp_path / "solutions")
    arch = TRACK_ARCH[track]
    config = Config(
        impl="steps",
        impl_dir=tmp_path / "steps",
        solutions_dir=tmp_path / "solutions",
        track=track,
        arch=arch,
        gpu_name=None,
        sm_count=DEFAULT_SM_COUNT[arch],
        seed=0,
        timeout_s=60.0,
        shapes=None,
    )
    result = grade_step(config, STEPS[track][step])
    assert result.passed and result.build == "passed" and result.features == "passed", result.problems
