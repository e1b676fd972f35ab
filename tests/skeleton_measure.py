"""How much of a step a skeleton gives away: the rule of ../shared/tools/skeleton_metrics.py.

idea: the code lines a step's solution adds to (or changes from) the previous step's solution
    (difflib over the two files' code lines; lines that are only re-indented count as added).
    Docstrings, comments and blank lines are not code. Nothing is excepted: the signature,
    imports and constants count like any other line.
given: the idea lines whose text (whitespace ignored) stands anywhere in the skeleton as code.
    A generic line such as `T.cuda.cta_sync()` therefore counts as given when the skeleton holds
    it anywhere, e.g. in an earlier step's barrier init.
leaked: of the solution's code lines the skeleton leaves out, those of at least 20 non-blank
    characters (shorter lines such as `phase = 0` or `if k < K_TILES:` are too generic to be an
    answer) that stand, whitespace ignored, inside the skeleton's comments.
"""

from __future__ import annotations

import ast
import difflib
import re
from pathlib import Path

MIN_LEAK_CHARS = 20


def squeeze(line: str) -> str:
    return re.sub(r"\s+", "", line)


def code_lines(path: Path) -> list[str]:
    """The file's lines with docstrings, comments and blank lines blanked out (positions kept)."""
    text = path.read_text()
    docstring_lines: set[int] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            docstring_lines.update(range(node.lineno - 1, node.end_lineno))
    return [
        line if i not in docstring_lines and line.strip() and not line.strip().startswith("#") else ""
        for i, line in enumerate(text.splitlines())
    ]


def _changed(old: list[str], new: list[str], ops: tuple[str, ...], side: str) -> list[str]:
    out: list[str] = []
    for op, a0, a1, b0, b1 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if op in ops:
            out += [line for line in (new[b0:b1] if side == "new" else old[a0:a1]) if line]
    return out


def idea_lines(previous_solution: Path, solution: Path) -> list[str]:
    """The code lines `solution` adds to or changes from `previous_solution`."""
    return _changed(code_lines(previous_solution), code_lines(solution), ("replace", "insert"), "new")


def given_lines(previous_solution: Path, solution: Path, skeleton: Path) -> tuple[list[str], list[str]]:
    """(the step's idea lines, those of them the skeleton holds as code anywhere)."""
    skeleton_code = {squeeze(line) for line in code_lines(skeleton) if line}
    idea = idea_lines(previous_solution, solution)
    return idea, [line for line in idea if squeeze(line) in skeleton_code]


def student_lines(solution: Path, skeleton: Path) -> list[str]:
    """The solution's code lines the skeleton does not hold as code: what the student writes."""
    skeleton_code = {squeeze(line) for line in code_lines(skeleton) if line}
    return [line for line in code_lines(solution) if line and squeeze(line) not in skeleton_code]


def leaked_lines(solution: Path, skeleton: Path) -> tuple[list[str], list[str]]:
    """(solution code lines the skeleton leaves out, those of them that stand in its comments)."""
    left = [
        line
        for line in _changed(code_lines(solution), code_lines(skeleton), ("replace", "delete"), "old")
        if len(squeeze(line)) >= MIN_LEAK_CHARS
    ]
    comments = squeeze(" ".join(line.split("#", 1)[1] for line in skeleton.read_text().splitlines() if "#" in line))
    return left, [line for line in left if squeeze(line) in comments]
