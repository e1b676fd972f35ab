"""What the step notebooks say and show that differs between the tracks, keyed by track and topic.

`walkthrough.explain(topic)` renders text(track, topic); `walkthrough.show_emitted(step, shape)` greps the
generated code for emitted(track, step): (artifact field, regular expression, how many lines).

The texts of steps 4-12 state each step's reference design (its barrier protocol, values and release order),
which the student is asked to design, so they are not in notebooks/: they live in solutions/notebook_text.py
(REFERENCE), ship with the solutions and are withheld with them. Here stays only what gives no step's design
away: step 3's grep patterns. Without that file, text() is None and explain() says so in one line.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from types import ModuleType

REFERENCE = Path(__file__).resolve().parent.parent / "solutions" / "notebook_text.py"

_STEP_3 = [("cuda_source", r"blockIdx\.[xy]\) \* 128", 2), ("sass", r"LDG|STS", 3)]
EMITTED: dict[str, dict[int, list[tuple[str, str, int]]]] = {"hopper": {3: _STEP_3}, "blackwell": {3: _STEP_3}}


@functools.cache
def reference() -> ModuleType | None:
    """solutions/notebook_text.py, loaded from its file (None in a course handed out without solutions/)."""
    if not REFERENCE.exists():
        return None
    spec = importlib.util.spec_from_file_location("notebook_text", REFERENCE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def text(track: str, topic: str) -> str | None:
    """The track's text for a notebook topic ("7", "7-code", ...), or None without the solutions."""
    module = reference()
    return None if module is None else module.TEXT[track][topic]


def emitted(track: str, step: int) -> list[tuple[str, str, int]] | None:
    """The grep patterns of a step's generated code, or None without the solutions (steps 4-12)."""
    if step in EMITTED[track]:
        return EMITTED[track][step]
    module = reference()
    return None if module is None else module.EMITTED[track][step]


def withheld(topic: str) -> str:
    """The one line explain() prints for a topic whose text is withheld with the solutions."""
    step = topic.split("-")[0]
    return (f"this text describes step {step}'s reference design and comes with the solutions "
            f"({REFERENCE.relative_to(REFERENCE.parent.parent)}, not in this copy of the course): "
            f"read it after your step {step} passes `make grade`")


def units(plan) -> list[tuple[int, int, int, int]] | None:
    """Step 12's units of a plan, (cluster, tile, k_begin, k_end) in each cluster's order, or None without the
    solutions (the walk is step 12's design)."""
    module = reference()
    return None if module is None else module.units(plan)
