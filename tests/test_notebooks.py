"""Every notebook runs top to bottom (GPU cells say "skipped" on a machine without a GPU), follows the track it
is opened for, and runs in a course handed out without solutions/ (the cells that need one say so in one line).
The notebooks' text on each step's design (steps 4-12) comes with the solutions (solutions/notebook_text.py):
a course without them holds none of it, in its notebooks/ files or in what its notebooks show."""

from __future__ import annotations

import re
import shutil
import sys

import nbformat
import pytest
from nbclient import NotebookClient

from conftest import REPO

sys.path.insert(0, str(REPO / "notebooks"))
import track_text  # noqa: E402  (notebooks/ is not a package)

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
FIGURES_SEEN: set[str] = set()  # notebooks that showed at least one image
EXECUTED: set[str] = set()
# the notebooks whose text and emitted-code patterns differ most between the tracks, run again for Blackwell
TRACK_NOTEBOOKS = [p for p in NOTEBOOKS if p.name.startswith(("07_08", "09_10", "11_12"))]
NO_SOLUTION = re.compile(r"^this cell needs solutions/\S+, which this copy of the course does not have "
                         r"\(handed out without solutions/\)$")
# what only the Hopper track does: a Blackwell notebook that shows one of these describes the wrong track
HOPPER_ONLY = ("setmaxnreg", "wgmma", "the consumer (128 threads)", "USETMAXREG")
# what explain() prints in place of a step's design text when the course comes without solutions/
WITHHELD = re.compile(r"^this text describes step (\d+)'s reference design and comes with the solutions "
                      r"\(solutions/notebook_text\.py, not in this copy of the course\): "
                      r"read it after your step \1 passes `make grade`$")
# what states a step's barrier protocol in other words than the withheld text's (phases, arrival counts,
# release order, the values the student chooses)
DESIGN_PHRASES = re.compile(
    r"phase starts at [01]|starts? at phase [01]|\b\d+ arrivals?\b|arrival count of \d|own phase bit|"
    r"phases carry over|wait_group\(1\)|released a K tile late|stage s may be refilled|2 x 97 KiB|"
    r"CTAS_PER_SM|PIPE_DEPTH = \d",
    re.IGNORECASE,
)
WINDOW = 8  # words: a run of this many words of a withheld text found elsewhere is that text


def _design_windows() -> set[str]:
    """Every run of WINDOW words of every withheld text (whitespace collapsed, so rewrapping does not hide it)."""
    windows = set()
    for texts in track_text.reference().TEXT.values():
        for text in texts.values():
            words = text.split()
            windows.update(" ".join(words[i:i + WINDOW]) for i in range(max(1, len(words) - WINDOW + 1)))
    return windows


def _design_text_in(text: str, windows: set[str]) -> list[str]:
    """The withheld design text (runs of its words, or DESIGN_PHRASES) that `text` contains."""
    words = text.split()
    found = sorted({" ".join(words[i:i + WINDOW]) for i in range(len(words))} & windows)
    return found + [m.group(0) for m in DESIGN_PHRASES.finditer(text)]


def _explained_topics(path) -> list[str]:
    return [topic for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code"
            for topic in re.findall(r'explain\("([^"]+)"\)', cell.source)]


def _rendered(outputs) -> list[str]:
    return [out["data"]["text/markdown"] for out in outputs if "text/markdown" in out.get("data", {})]


def _execute(path, monkeypatch, track: str | None = None) -> list[dict]:
    """Run a notebook in its folder (COURSE_TRACK=track for the kernel, if given) and return its outputs."""
    if track:
        monkeypatch.setenv("COURSE_TRACK", track)
    notebook = nbformat.read(path, as_version=4)
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert not [cell for cell in code_cells if cell.outputs], "committed notebooks carry no outputs"
    NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    outputs = [out for cell in notebook.cells if cell.cell_type == "code" for out in cell.outputs]
    errors = [out for out in outputs if out.output_type == "error"]
    assert not errors, [f"{out.ename}: {out.evalue}" for out in errors]
    return outputs


def _text(out) -> str:
    """What an output shows: printed text, or a displayed text (Markdown from explain())."""
    return out.get("text", "") + out.get("data", {}).get("text/markdown", "")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_top_to_bottom(path, monkeypatch):
    outputs = _execute(path, monkeypatch)
    assert any("UTCHMMA" in out.get("text", "") or "HGMMA" in out.get("text", "") for out in outputs)
    # with solutions/, every explain() cell renders the Hopper track's design text (this machine has no GPU
    # or a Hopper one, or the notebook's track is the GPU's: compare with that track's text)
    track = "blackwell" if any("track blackwell" in _text(out) for out in outputs) else "hopper"
    assert _rendered(outputs) == [track_text.reference().TEXT[track][topic] for topic in _explained_topics(path)]
    EXECUTED.add(path.name)
    if any("image/png" in out.get("data", {}) for out in outputs):
        FIGURES_SEEN.add(path.name)


@pytest.mark.parametrize("path", TRACK_NOTEBOOKS, ids=[p.name for p in TRACK_NOTEBOOKS])
def test_notebook_opened_for_blackwell_describes_blackwell(path, monkeypatch):
    outputs = _execute(path, monkeypatch, track="blackwell")
    shown = "\n".join(_text(out) for out in outputs)
    assert "track blackwell, arch sm_100a" in shown
    assert "UTCHMMA" in shown and "tcgen05" in shown
    # the other track's diff cells show Hopper code by design; everything else describes Blackwell
    assert _rendered(outputs) == [track_text.reference().TEXT["blackwell"][topic] for topic in _explained_topics(path)]
    described = "\n".join(_rendered(outputs))
    assert described, "no explain() cell rendered"
    assert [word for word in HOPPER_ONLY if word in described] == []


def _course_without_solutions(tmp_path):
    """A copy of what a student gets when the course is handed out without solutions/."""
    course = tmp_path / "course"
    for folder in ("grader", "kernel_helpers", "notebooks", "steps", "hints", "docs"):
        shutil.copytree(REPO / folder, course / folder, ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    assert not (course / "solutions").exists()
    return course


@pytest.mark.parametrize("track", ["hopper", "blackwell"])
def test_notebooks_run_without_solutions_and_say_so_in_one_line(tmp_path, monkeypatch, track):
    course = _course_without_solutions(tmp_path)
    windows = _design_windows()
    said = withheld = 0
    for path in sorted((course / "notebooks").glob("*.ipynb")):
        outputs = _execute(path, monkeypatch, track=track)
        for out in outputs:
            lines = _text(out).splitlines()
            needs = [line for line in lines if "this cell needs" in line]
            assert all(NO_SOLUTION.match(line) for line in needs), needs
            assert "not written yet" not in _text(out)
            said += len(needs)
            # no output shows a step's design: explain() says in one line that its text comes with the solutions
            assert _design_text_in(_text(out), windows) == [], (path.name, _text(out))
            explained = [line for line in lines if line.startswith("this text describes")]
            assert all(WITHHELD.match(line) for line in explained), explained
            withheld += len(explained)
            if needs or explained:  # each call says so in one line and the cell prints nothing else
                assert len([line for line in lines if line.strip()]) == len(needs) + len(explained), lines
        assert not _rendered(outputs), path.name
        assert _withheld_steps(outputs) == [topic.split("-")[0] for topic in _explained_topics(path)]
    assert said >= 10  # every notebook has cells that diff, build or draw a reference solution
    assert withheld >= 20  # the explain() cells of steps 4-12


def _withheld_steps(outputs) -> list[str]:
    """The step named by each one-line explain() output, in order."""
    return [WITHHELD.match(line).group(1) for out in outputs for line in _text(out).splitlines()
            if WITHHELD.match(line)]


def _files_under_notebooks(course) -> dict[str, str]:
    """The text of every file under notebooks/ (a notebook's cell sources and outputs, joined)."""
    texts = {}
    for path in sorted((course / "notebooks").rglob("*")):
        if path.is_dir() or "__pycache__" in path.parts or path.suffix in (".png", ".pyc"):
            continue
        if path.suffix == ".ipynb":
            cells = nbformat.read(path, as_version=4).cells
            texts[path.name] = "\n".join([cell.source for cell in cells]
                                         + [_text(out) for cell in cells for out in cell.get("outputs", [])])
        else:
            texts[path.name] = path.read_text()
    return texts


def test_course_without_solutions_holds_no_step_design_in_notebooks(tmp_path):
    """Negative check: putting a withheld text (or its protocol in other words) back into notebooks/ fails this."""
    course = _course_without_solutions(tmp_path)
    windows = _design_windows()
    texts = _files_under_notebooks(course)
    assert {"track_text.py", "walkthrough.py", "07_08_warp_specialization_and_deeper_pipeline.ipynb"} <= set(texts)
    found = {name: hits for name, text in texts.items() if (hits := _design_text_in(text, windows))}
    assert found == {}
    # the detector itself: it finds every withheld text, and the paraphrases it was made for
    for texts_of_track in track_text.reference().TEXT.values():
        for topic, text in texts_of_track.items():
            assert _design_text_in(text, windows), topic
    assert _design_text_in("the producer's phase starts at 1; mma2tma[s] counts 2 arrivals", set())


def test_explain_renders_the_design_text_with_solutions_and_one_line_without(tmp_path, monkeypatch, capsys):
    import IPython.display
    import walkthrough

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(obj.data))
    reference = track_text.reference()
    for track in ("hopper", "blackwell"):
        for topic, text in reference.TEXT[track].items():
            walkthrough.explain(topic, track=track)
            assert shown.pop() == text
    assert track_text.emitted("hopper", 9) == reference.EMITTED["hopper"][9]

    monkeypatch.setattr(track_text, "REFERENCE", tmp_path / "solutions" / "notebook_text.py")
    track_text.reference.cache_clear()
    try:
        walkthrough.explain("7-try", track="blackwell")
        assert track_text.emitted("hopper", 9) is None and track_text.emitted("hopper", 3)
    finally:
        track_text.reference.cache_clear()
    assert shown == []
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 1 and WITHHELD.match(printed[0]) and WITHHELD.match(printed[0]).group(1) == "7", printed


def test_every_step_has_a_heading():
    headings = {
        int(number)
        for path in NOTEBOOKS
        for cell in nbformat.read(path, as_version=4).cells
        if cell.cell_type == "markdown"
        for number in re.findall(r"^##? Steps? (\d+)", cell.source, re.MULTILINE)
    }
    assert headings >= set(range(1, 13))


def test_every_topic_is_written_for_both_tracks():
    reference = track_text.reference()
    assert reference.TEXT["hopper"].keys() == reference.TEXT["blackwell"].keys()
    assert reference.EMITTED["hopper"].keys() == reference.EMITTED["blackwell"].keys()
    assert track_text.EMITTED["hopper"].keys() == track_text.EMITTED["blackwell"].keys()
    assert not set(track_text.EMITTED["hopper"]) & set(reference.EMITTED["hopper"])
    used = {topic for path in NOTEBOOKS for topic in _explained_topics(path)}
    assert used == set(reference.TEXT["blackwell"])
    # every topic is one of steps 4-12: its step number comes first, as explain()'s one line names it
    assert {int(topic.split("-")[0]) for topic in used} == set(range(4, 13))
    blackwell = "\n".join(reference.TEXT["blackwell"].values())
    assert [word for word in HOPPER_ONLY if word in blackwell] == []


def test_at_least_four_notebooks_draw_figures():
    if len(EXECUTED) < len(NOTEBOOKS):
        pytest.skip("figures are counted while the notebooks execute: run this file whole")
    assert len(FIGURES_SEEN) >= 4, sorted(FIGURES_SEEN)
