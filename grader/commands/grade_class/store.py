"""The output folder OUT: the class (settings and roster), and per student the staged submission, the outputs of its
grade and its record, each file written whole (a new file beside it, then renamed over it), the record last.

OUT/class.json                      the settings and the roster (rewritten by every `grade`)
OUT/students/<id>/submission/       the student's files, as unpacked from the export (what the content hash covers)
OUT/students/<id>/results.json      Gradescope's results.json
OUT/students/<id>/report.json       the grader's JSON report
OUT/students/<id>/logs/             the grader's whole output (grader.txt) and each step's part of it (stepNN.txt)
OUT/students/<id>/record.json       the outcome: written last, so a student is done only once everything is there

A record is done when its key matches: the submission's content hash, the grader's version, the settings that
change a grade (track, steps, weights, seed) and the GPU model. A rerun skips the students whose record is done.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from grader.core.build import REPO_ROOT

CLASS_FILE = "class.json"
STUDENTS = "students"
RECORD = "record.json"
NO_GPU = "none"  # the GPU model of a grade without a GPU

# outcomes: the first three are the student's own and final; an infrastructure error is retried
GRADED, REFUSED, TIMED_OUT, INFRASTRUCTURE = "graded", "refused", "timed out", "infrastructure error"


def grader_version() -> str:
    """The course's version and a hash of the grader's own files: any change to how grades are made changes it."""
    version = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
    digest = hashlib.sha256()
    for path in sorted((REPO_ROOT / "grader").rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(f"{path.relative_to(REPO_ROOT)}\0".encode() + path.read_bytes())
    return f"{version}+{digest.hexdigest()[:12]}"


@dataclass(frozen=True)
class Settings:
    track: str
    steps: list[int]
    weights: list[float]  # points of steps 1 to 12 (autograder.COURSE_STEPS)
    seed: int  # GRADER_SEED of every student: the same inputs for all
    student_timeout_s: float
    expect_gpu: bool  # False: builds and static checks only, every score provisional
    grader_version: str

    def fingerprint(self) -> str:
        """What, besides the submission and the GPU model, changes a student's grade."""
        graded = [self.track, self.steps, [self.weights[n - 1] for n in self.steps], self.seed, self.grader_version]
        return hashlib.sha256(json.dumps(graded).encode()).hexdigest()

    def max_score(self) -> float:
        return sum(self.weights[n - 1] for n in self.steps)


@dataclass(frozen=True)
class Submitter:
    name: str
    sid: str
    email: str


@dataclass(frozen=True)
class Submission:
    id: str  # its folder under OUT/students
    source: str  # the zip or folder it came from
    submitters: list[Submitter]
    content_sha256: str  # of the unpacked files (of the archive's bytes when it was refused)
    refused: str = ""  # why it is not graded, in one line (a hostile archive)
    created_at: str = ""  # Gradescope's time of submission


@dataclass(frozen=True)
class ClassFile:
    settings: Settings
    submissions: list[Submission]
    run: str  # the `grade` run that wrote it

    def submission(self, student: str) -> Submission:
        """The student's submission; KeyError if the class has no such student."""
        for submission in self.submissions:
            if submission.id == student:
                return submission
        raise KeyError(student)


@dataclass
class Record:
    id: str
    key: str
    content_sha256: str
    grader_version: str
    gpu_model: str
    outcome: str  # GRADED, REFUSED, TIMED_OUT or INFRASTRUCTURE
    score: float
    max_score: float
    provisional: bool  # graded without a GPU: builds and static checks only
    cause: str = ""  # one line: why points were lost ("" when none were)
    step_scores: dict[str, float] = field(default_factory=dict)  # step number -> points
    step_causes: dict[str, str] = field(default_factory=dict)  # failed step -> its first problem, one line
    final_step_share: float | None = None  # the last step's share of cuBLAS at its largest timed shape
    arch: str = ""
    started_at: str = ""
    ended_at: str = ""
    run: str = ""
    where: str = ""  # host, and the GPU it had
    gpu_check: str = ""  # after an illegal-address fault: "passed" or why the GPU failed the check

    @property
    def final(self) -> bool:
        return self.outcome != INFRASTRUCTURE


def key(content_sha256: str, settings: Settings, gpu_model: str) -> str:
    return hashlib.sha256(f"{content_sha256}\0{settings.fingerprint()}\0{gpu_model}".encode()).hexdigest()


def student_dir(out: Path, student: str) -> Path:
    return out / STUDENTS / student


def write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    written = path.with_name(f".{path.name}.part-{os.getpid()}")
    written.write_text(text)
    os.replace(written, path)


def write_json(path: Path, data: object) -> None:
    write_atomically(path, json.dumps(data, indent=2) + "\n")


def read_record(out: Path, student: str) -> Record | None:
    try:
        return Record(**json.loads((student_dir(out, student) / RECORD).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def write_record(out: Path, record: Record) -> None:
    """The student's record, unless it is an infrastructure error and a final record of the same submission is
    there: a forced regrade that failed through no fault of the student keeps the grade it had."""
    if not record.final:
        existing = read_record(out, record.id)
        if existing is not None and existing.final and existing.content_sha256 == record.content_sha256:
            return
    write_json(student_dir(out, record.id) / RECORD, dataclasses.asdict(record))


def write_class(out: Path, class_file: ClassFile) -> None:
    write_json(out / CLASS_FILE, dataclasses.asdict(class_file))


def read_class(out: Path) -> ClassFile:
    """OUT/class.json; OSError or ValueError when there is none or it is not one."""
    data = json.loads((out / CLASS_FILE).read_text())
    submissions = [Submission(**{**s, "submitters": [Submitter(**p) for p in s["submitters"]]})
                   for s in data["submissions"]]
    return ClassFile(Settings(**data["settings"]), submissions, data["run"])


def is_done(record: Record | None, submission: Submission, settings: Settings, gpu_model: str | None) -> bool:
    """A final record for this submission and these settings; gpu_model None: on whichever GPU model (a Slurm
    class, whose nodes this machine cannot see: the manifest lists the models the records name)."""
    if record is None or not record.final or record.content_sha256 != submission.content_sha256:
        return False
    return record.key == key(submission.content_sha256, settings, gpu_model or record.gpu_model)
