"""Skeletons that teach, over every step present in both trees, both tracks.

- A skeleton holds as code at most 25% of the code lines its solution adds to the previous solution
  (the rule of ../shared/tools/skeleton_metrics.py, in skeleton_measure.py).
- No skeleton comment holds a solution code line of 20 or more non-blank characters.
- Every TODO of every skeleton has its hints (levels 1-2) and its marked solution region (level 3),
  with the same numbering and titles in all three files, and `make hint` prints them.
- Pasting every TODO's level 3 into its skeleton gives a kernel that builds and passes the static checks.
- Steps 4-10 and 12 leave the design to the student (docs/writing-a-step.md, "Skeletons: the goal and the contract"):
  no protocol-table row the solution adds to the previous solution's stands in the skeleton; a TODO's level 2
  hint neither repeats its skeleton comment nor holds a line of level 3; every "Trap:" a skeleton or a hint
  names has a known-bad variant marked as that TODO's trap.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

import pytest

from conftest import REPO, TRACK_ARCH
from grader.commands import hint
from grader.core.steps import DEFAULT_SM_COUNT, STEPS, ShapeRule, static_check_shape
from grader.judge.grade import Config, grade_step
from known_bad import VARIANTS
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
        (["--step", "0"], "--step must be one of 1..12"),
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


# The paste is the reference's text: it is graded where its code takes each of its paths, not at every correctness
# shape (that grading is the reference's own, in tests/test_protocol.py and on the GPU). Steps 1-11 take one path at
# every shape: their static-check shape (step 11's is ragged in M, N and K). Step 12's plan changes with the shape:
# on Blackwell whole tiles (4093x2056x560) or stream-K (257x264x4104); on Hopper also the tile width and the
# cluster and the CTA's rows: 176-wide lone 128-row CTAs (4093x2056x560), 48-wide pairs of 64-row CTAs in split-K
# x3, ranges of unequal length (257x264x4104), whole 128-wide tiles in pairs of 64-row CTAs (1000^3; both where
# K % 16 != 0), stream-K across tiles after two waves of whole ones in pairs (1751x2312x3072, the static-check shape).
_PASTE_SHAPES = {("blackwell", 12): ((4093, 2056, 560), (257, 264, 4104)),
                 ("hopper", 12): ((4093, 2056, 560), (257, 264, 4104), (1000, 1000, 1000), (1751, 2312, 3072))}


def _paste_shapes(track: str, step: int) -> tuple[tuple[int, int, int], ...]:
    return _PASTE_SHAPES.get((track, step), (static_check_shape(STEPS[track][step].correctness_shapes),))


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
    spec = STEPS[track][step]
    shapes = _paste_shapes(track, step)
    assert set(shapes) <= set(spec.correctness_shapes)
    (m, n, k) = shapes[0]  # also the shape drawn: built once
    spec = dataclasses.replace(spec, correctness_shapes=shapes,
                               shapes=ShapeRule(spec.shapes.tile, fixed_m=m, fixed_n=n, fixed_k=k))
    result = grade_step(config, spec)
    assert result.passed and result.build == "passed" and result.features == "passed", result.problems


# ---- steps 4-10 and 12: the design is the student's (step 11 adds no barrier and no design cell) ----
DESIGN_STEPS = (*range(4, 11), 12)
SHARED_WORDS = 8  # a level 2 hint shares no run of this many consecutive words with its skeleton comment
MIN_CODE_CHARS = 12  # a level 3 line at least this long (stripped) never stands verbatim in level 2


def _design_pairs() -> list[tuple[str, int]]:
    pairs = _pairs()
    return [(track, step) for track, step in pairs if step in DESIGN_STEPS and (track, step - 1) in pairs]


def _table_rows(path: Path) -> set[str]:
    """The docstring table rows of a file that say something ('|'-lines with at least two filled cells),
    whitespace collapsed: the rule of ../shared/tools/design_given.py."""
    rows = set()
    for line in path.read_text().splitlines():
        row = line.strip()
        if row.startswith("|") and row.endswith("|") and not re.fullmatch(r"[|\-\s:]+", row):
            if sum(bool(cell.strip()) for cell in row.strip("|").split("|")) >= 2:
                rows.add(" ".join(row.split()))
    return rows


@pytest.mark.parametrize("track,step", _design_pairs())
def test_skeleton_leaves_the_new_protocol_rows_to_the_student(track, step):
    solution, skeleton = _paths(track, step)
    previous = REPO / "solutions" / track / STEPS[track][step - 1].file_name
    new_rows = _table_rows(solution) - _table_rows(previous)
    assert new_rows, "the solution's docstring adds no protocol-table row to the previous step's"
    assert sorted(new_rows & _table_rows(skeleton)) == []


def _todo_comments(track: str, step: int) -> dict[int, str]:
    """TODO k -> its skeleton comment (title line and body, without the '#')."""
    comments = {}
    for found in _TODO_BLOCK.finditer(_paths(track, step)[1].read_text()):
        lines = found.group(0).splitlines()[:-1]  # the last line is the todo(...) call
        comments[int(found.group(3))] = "\n".join(line.strip().lstrip("#").strip() for line in lines)
    return comments


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9_]+", text.lower())


def _shared_run(a: str, b: str, length: int) -> str | None:
    """A run of `length` consecutive words of a that stands in b, else None."""
    b_words = _words(b)
    b_runs = {tuple(b_words[i:i + length]) for i in range(len(b_words) - length + 1)}
    a_words = _words(a)
    for i in range(len(a_words) - length + 1):
        if tuple(a_words[i:i + length]) in b_runs:
            return " ".join(a_words[i:i + length])
    return None


def _level_3_code_lines(track: str, step: int, k: int) -> list[str]:
    """The level 3 lines a level 2 must not hold: non-comment lines, trailing comment cut, >= MIN_CODE_CHARS."""
    lines = [re.sub(r"\s+#.*$", "", line).strip() for line in hint.reference_lines(track, step, k).splitlines()]
    return [line for line in lines if len(line) >= MIN_CODE_CHARS and not line.startswith("#")]


@pytest.mark.parametrize("track,step", _design_pairs())
def test_level_2_steps_up_from_the_skeleton_comment_and_stops_short_of_level_3(track, step):
    comments = _todo_comments(track, step)
    for todo in hint.read_todos(track, step):
        level_2, level_3 = todo.levels[2], hint.reference_lines(track, step, todo.number)
        name = f"{track} TODO {step}.{todo.number}"
        assert " ".join(level_2.lower().split()) != " ".join(comments[todo.number].lower().split()), name
        run = _shared_run(level_2, comments[todo.number], SHARED_WORDS)
        assert run is None, f"{name}: level 2 repeats the skeleton comment: '{run}'"
        squeezed = re.sub(r"\s+", "", level_2)
        verbatim = [line for line in _level_3_code_lines(track, step, todo.number)
                    if re.sub(r"\s+", "", line) in squeezed]
        assert verbatim == [], f"{name}: level 2 holds level 3's lines"
        assert " ".join(level_2.split()) != " ".join(level_3.split()), name


def _traps(track: str, step: int) -> set[str]:
    """The TODOs ("9.2") whose skeleton comment or hints name a trap."""
    named = {f"{step}.{k}" for k, comment in _todo_comments(track, step).items() if "Trap:" in comment}
    return named | {f"{step}.{t.number}" for t in hint.read_todos(track, step)
                    if any("Trap:" in text for text in t.levels.values())}


@pytest.mark.parametrize("track,step", _design_pairs())
def test_every_trap_a_skeleton_or_hint_names_is_a_known_bad_variant(track, step):
    marked = {v.todo for v in VARIANTS if v.track == track and v.step == step and v.trap}
    named = _traps(track, step)
    assert sorted(named - marked) == [], "a Trap: without a known-bad variant marked trap=True for its TODO"
    assert sorted(marked - named) == [], "a variant marked trap=True for a TODO whose skeleton and hints name no trap"
