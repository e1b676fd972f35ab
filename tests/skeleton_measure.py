"""How much of a step a skeleton gives away (after ../shared/tools/skeleton_metrics.py, two differences).

idea: the code lines a step's solution adds to (or changes from) the previous step's solution,
    except what is not the lesson and stays given by rule: the `def hgemm_vN(` line, imports and
    UPPER_CASE constants. Docstrings and comments are not code.
given: the idea lines the skeleton holds as code at the same place, i.e. matched when the
    skeleton's code lines are aligned with the solution's (difflib). The shared tool counts a line
    as given when the same text stands anywhere in the skeleton, so a `T.cuda.cta_sync()` of the
    barrier init also "gives" the one the student writes after the K loop.
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


_GIVEN_BY_RULE = re.compile(r"\s*(def hgemm_v\d+\(|import |from \S+ import |[A-Z][A-Z0-9_]*(, *[A-Z][A-Z0-9_]*)* = )")


def idea_lines(previous_solution: Path, solution: Path) -> list[int]:
    """Indexes (into code_lines(solution)) of the step's idea lines."""
    old, new = code_lines(previous_solution), code_lines(solution)
    changed = []
    for op, _, _, b0, b1 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if op in ("replace", "insert"):
            changed += [i for i in range(b0, b1) if new[i] and not _GIVEN_BY_RULE.match(new[i])]
    return changed


def given_lines(previous_solution: Path, solution: Path, skeleton: Path) -> tuple[list[str], list[str]]:
    """(the step's idea lines, those of them the skeleton holds as code at their place)."""
    solution_code = code_lines(solution)
    sol_index = [i for i, line in enumerate(solution_code) if line]
    skel_code = [squeeze(line) for line in code_lines(skeleton) if line]
    matcher = difflib.SequenceMatcher(None, [squeeze(solution_code[i]) for i in sol_index], skel_code, autojunk=False)
    matched = {sol_index[a + j] for a, _, size in matcher.get_matching_blocks() for j in range(size)}
    idea = idea_lines(previous_solution, solution)
    return [solution_code[i] for i in idea], [solution_code[i] for i in idea if i in matched]


def leaked_lines(solution: Path, skeleton: Path) -> tuple[list[str], list[str]]:
    """(solution code lines the skeleton leaves out, those of them that stand in its comments)."""
    left = [
        line
        for line in _changed(code_lines(solution), code_lines(skeleton), ("replace", "delete"), "old")
        if len(squeeze(line)) >= MIN_LEAK_CHARS
    ]
    comments = squeeze(" ".join(line.split("#", 1)[1] for line in skeleton.read_text().splitlines() if "#" in line))
    return left, [line for line in left if squeeze(line) in comments]
