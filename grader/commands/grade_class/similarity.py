"""similarity.md: which submissions share code, per step, for the instructor to read; it never changes a score.

Each student's step file is tokenized (names and strings made generic) and fingerprinted by winnowing, as MOSS
does, with copydetect at its defaults (matches shorter than NOISE_THRESHOLD tokens ignored, those of
GUARANTEE_THRESHOLD tokens or more always found); the
fingerprints of the step's skeleton are removed first, so the lines every student was given do not count. A pair
is listed when either shares at least THRESHOLD of its remaining fingerprints with the other. The course's
reference solution takes part as one more "submission": a student who copied it is listed beside it.
"""

from __future__ import annotations

import io
from itertools import combinations
from pathlib import Path

from copydetect import CodeFingerprint
from copydetect.defaults import GUARANTEE_THRESHOLD, NOISE_THRESHOLD

from grader.commands import autograder
from grader.commands.grade_class import store
from grader.core.build import REPO_ROOT
from grader.core.steps import STEPS

THRESHOLD = 0.5
REFERENCE = "(reference solution)"


def fingerprints(source: str, name: str, skeleton: set[int]) -> set[int]:
    winnow_window = GUARANTEE_THRESHOLD - NOISE_THRESHOLD + 1
    found = CodeFingerprint(name, NOISE_THRESHOLD, winnow_window, boilerplate=sorted(skeleton), fp=io.StringIO(source))
    return {int(h) for h in found.hashes}


def report(out: Path, class_file: store.ClassFile) -> str:
    """The markdown table of similar pairs, step by step."""
    track = class_file.settings.track
    lines = ["# Similar submissions", "",
             f"Per step, the pairs of which one shares at least {THRESHOLD:.0%} of its code's fingerprints with the "
             "other (winnowing, copydetect; the skeleton's own lines excluded). It changes no score.", ""]
    for number in class_file.settings.steps:
        spec = STEPS[track][number]
        skeleton_path = REPO_ROOT / "steps" / track / spec.file_name
        skeleton = fingerprints(skeleton_path.read_text(), spec.file_name, set()) if skeleton_path.is_file() else set()
        sources = _step_sources(out, class_file, number)
        reference = REPO_ROOT / "solutions" / track / spec.file_name
        if reference.is_file():
            sources[REFERENCE] = reference.read_text()
        prints = {who: fingerprints(text, spec.file_name, skeleton) for who, text in sources.items()}
        pairs = []
        for a, b in combinations(sorted(prints), 2):
            shared = len(prints[a] & prints[b])
            share_a = shared / len(prints[a]) if prints[a] else 0.0
            share_b = shared / len(prints[b]) if prints[b] else 0.0
            if max(share_a, share_b) >= THRESHOLD:
                pairs.append((max(share_a, share_b), a, b, share_a, share_b))
        lines += [f"## Step {number} ({spec.file_name}): {len(pairs)} pair{'s' if len(pairs) != 1 else ''} "
                  f"among {len(prints)} files", ""]
        if pairs:
            lines += ["| submission A | submission B | A's code shared | B's code shared |", "|---|---|---|---|"]
            lines += [f"| {a} | {b} | {share_a:.0%} | {share_b:.0%} |"
                      for _, a, b, share_a, share_b in sorted(pairs, key=lambda pair: (-pair[0], pair[1], pair[2]))]
            lines.append("")
    return "\n".join(lines) + "\n"


def _step_sources(out: Path, class_file: store.ClassFile, number: int) -> dict[str, str]:
    """The step file each student submitted, as the grade found it."""
    sources = {}
    for submission in class_file.submissions:
        if submission.refused:
            continue
        staged = store.student_dir(out, submission.id) / "submission"
        try:
            found = autograder.find_step_files(staged, class_file.settings.track)
        except autograder.BadInput:
            continue
        if number in found:
            sources[submission.id] = found[number].read_text(errors="replace")
    return sources
