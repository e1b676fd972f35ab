"""`python -m grader.commands.hint --step N [--todo k] [--level 1|2|3] [--track ...]`: help for one TODO, in levels.

Level 1: the idea and the invariant; level 2: the API calls, their arguments' meaning, shapes and
units (both from hints/<track>/stepNN.md); level 3: the reference lines, read from the solution file
between its `# >>> TODO N.k` and `# <<< TODO N.k` markers, so they cannot drift from the solution.
Without --todo: the step's TODOs with their titles.

Exit status: 0 help printed, 2 the options were wrong.
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

from grader.core.build import REPO_ROOT
from grader.core.steps import STEPS
from grader.judge import cli

HINTS_DIR = REPO_ROOT / "hints"
LEVELS = (1, 2, 3)


class HintError(Exception):
    """Wrong options or a missing hint: reported as one line, exit status 2."""


@dataclass(frozen=True)
class Todo:
    number: int  # k of TODO N.k
    title: str
    levels: dict[int, str]  # 1 and 2, from the hints file


def read_todos(track: str, step: int) -> list[Todo]:
    path = HINTS_DIR / track / f"step{step:02d}.md"
    if not path.exists():
        raise HintError(f"no hints for step {step} of the {track} track ({path.relative_to(REPO_ROOT)})")
    todos: list[Todo] = []
    for section in re.split(r"^## ", path.read_text(), flags=re.MULTILINE)[1:]:
        heading = re.match(rf"TODO {step}\.(\d+): (.*)", section)
        if heading is None:
            continue
        levels = {
            int(level): body.strip()
            for level, body in re.findall(r"^### level (\d)\n(.*?)(?=^### |\Z)", section, flags=re.MULTILINE | re.DOTALL)
        }
        todos.append(Todo(int(heading.group(1)), heading.group(2).strip(), levels))
    return todos


def reference_lines(track: str, step: int, todo: int) -> str:
    """The solution's code between `# >>> TODO step.todo` and `# <<< TODO step.todo`, dedented."""
    path = REPO_ROOT / "solutions" / track / STEPS[track][step].file_name
    if not path.exists():
        raise HintError(f"level 3 reads the reference solution, and this copy of the course has no "
                        f"{path.relative_to(REPO_ROOT)}; levels 1 and 2 work without it")
    found = re.search(
        rf"^[ \t]*# >>> TODO {step}\.{todo}:.*?\n(.*?)^[ \t]*# <<< TODO {step}\.{todo}[ \t]*$",
        path.read_text(),
        flags=re.MULTILINE | re.DOTALL,
    )
    if found is None:
        raise HintError(f"{path.relative_to(REPO_ROOT)} has no region marked TODO {step}.{todo}")
    return textwrap.dedent(found.group(1)).rstrip("\n")


def render(track: str, step: int, todo: int | None, level: int) -> str:
    todos = read_todos(track, step)
    if todo is None:
        listing = "\n".join(f"  TODO {step}.{t.number}: {t.title}" for t in todos)
        return f"step {step} ({track}) has {len(todos)} TODOs:\n{listing}\nmore: make hint STEP={step} TODO=k LEVEL=1|2|3"
    chosen = next((t for t in todos if t.number == todo), None)
    if chosen is None:
        raise HintError(f"step {step} ({track}) has TODOs 1-{len(todos)}, not {todo}")
    text = reference_lines(track, step, todo) if level == 3 else chosen.levels.get(level)
    if text is None:
        raise HintError(f"hints/{track}/step{step:02d}.md has no level {level} for TODO {step}.{todo}")
    return f"TODO {step}.{todo}: {chosen.title} (level {level} of 3)\n\n{text}"


def main(argv: list[str] | None = None) -> int:
    parser = cli._Parser(prog="python -m grader.commands.hint", description="Help for a step's TODOs, in levels.")
    parser.add_argument("--step", required=True, help="1..10 (Hopper: 1..12)")
    parser.add_argument("--todo", default="", help="k of TODO N.k (default: list the step's TODOs)")
    parser.add_argument("--level", default="1", help="1 idea, 2 API calls, 3 reference lines (default 1)")
    parser.add_argument("--track", default="auto", help="blackwell or hopper (default: the GPU's, else blackwell)")
    try:
        args = parser.parse_args(argv)
        step = _number(args.step, "--step", sorted({number for specs in STEPS.values() for number in specs}))
        level = _number(args.level, "--level", LEVELS)
        todo = _number(args.todo, "--todo", range(1, 100)) if args.todo else None
        track = args.track if args.track != "auto" else _auto_track()
        cli.resolve_arch_and_track("auto", track, None, None)  # rejects an unknown track
        if step not in STEPS[track]:
            raise HintError(f"step {step} is not part of the course")
        print(render(track, step, todo, level))
    except (HintError, cli.UsageError) as err:
        print(f"hint: {err}", file=sys.stderr)
        return 2
    return 0


def _number(text: str, option: str, allowed) -> int:
    if not cli.ASCII_NUMBER.fullmatch(text) or int(text) not in allowed:
        raise HintError(f"{option} must be one of {allowed[0]}..{allowed[-1]}, not {text!r}")
    return int(text)


def _auto_track() -> str:
    """The grader's rule: the track of the GPU here, else blackwell."""
    gpu_name, gpu_arch, _ = cli.detect_gpu()
    return cli.resolve_arch_and_track("auto", "auto", gpu_name, gpu_arch)[1]


if __name__ == "__main__":
    sys.exit(main())
