"""Writes an experiment's variant of step 12: the Hopper solution with its EDITS made, into FOLDER/hopper/, a
tree check_and_time.py and ncu_launch.py take as --impl / IMPL_DIR."""

from collections.abc import Callable
from pathlib import Path

SOLUTION = Path(__file__).resolve().parents[2] / "solutions" / "hopper" / "step12_stream_k.py"


def write_variant(folder: Path, edits: list[tuple[str, str]], everywhere: bool = False,
                  transform: Callable[[str], str] | None = None) -> None:
    """Each edit's old text must be in the solution once, or with `everywhere` at least once (every place edited);
    `transform`, where given, first rewrites the solution's whole text (a change that is not a replacement of text)."""
    text = SOLUTION.read_text()
    text = transform(text) if transform else text
    for old, new in edits:
        if text.count(old) != 1 and not (everywhere and old in text):
            raise SystemExit(f"{folder.name}: the solution no longer has{'' if everywhere else ' once'}:\n{old}")
        text = text.replace(old, new)
    out = folder / "hopper" / SOLUTION.name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"wrote {out}")
