"""`make autograder` and the autograder it builds: the course graded on Gradescope.

`python -m grader.commands.autograder package --out build/autograder.zip` writes the package Gradescope takes:
setup.sh, run_autograder and weights (from autograder/) at its root, and course/: the grader, the
kernel helpers, the skeletons, the hints, the reference solutions (the speed reference on a GPU) and
what `make setup` reads.

`python -m grader.commands.autograder run` (what run_autograder starts, in course/) finds the student's step
files in the submission, puts them into a fresh copy of the course, grades the steps in instructor
mode (`python -m grader --instructor`: each build process gets a copy of the course without
solutions/, the seed is hidden, correctness is checked again after timing) and writes Gradescope's
results.json. Its settings come from the environment, so a test can run it on a sample submission:
  AUTOGRADER_SUBMISSION  the student's files, nested or flat (default /autograder/submission)
  AUTOGRADER_RESULTS     where results.json goes (default /autograder/results)
  AUTOGRADER_WEIGHTS     points per step, steps 1-12 (default: weights beside course/)
  TRACK                  auto (the GPU's, else blackwell), blackwell or hopper
  STEPS                  the steps to grade, e.g. "1 3 4" (default: all, every step the track has)
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from grader.core import outputs
from grader.core.build import REPO_ROOT
from grader.core.steps import STEPS, TRACKS, format_shape

PACKAGE_FILES = ("setup.sh", "run_autograder", "weights")  # from autograder/, at the package's root
COURSE_PARTS = ("grader", "kernel_helpers", "solutions", "steps", "hints", "Makefile", "requirements.txt",
                "pyproject.toml")
# the steps the weights file gives points to: every step of either track (a track without one never grades it)
COURSE_STEPS = tuple(range(1, max(max(specs) for specs in STEPS.values()) + 1))


class BadInput(Exception):
    """The submission or the autograder's settings cannot be graded: one line for the student's page."""


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["package"] and args[1:2] == ["--out"] and len(args) == 3:
        try:
            out = outputs.writable_file(args[2], "--out")
        except outputs.UnwritableOutput as err:
            print(f"autograder: {err}", file=sys.stderr)
            return 2
        print(f"written: {package(out)}")
        return 0
    if args == ["run"]:
        return run(Settings.from_environment())
    print("usage: python -m grader.commands.autograder package --out FILE.zip | run", file=sys.stderr)
    return 2


def package(out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in PACKAGE_FILES:
            archive.write(REPO_ROOT / "autograder" / name, name)  # keeps the files' modes: the scripts run
        for part in COURSE_PARTS:
            root = REPO_ROOT / part
            files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
            for file in files:
                if "__pycache__" not in file.parts:
                    archive.write(file, f"course/{file.relative_to(REPO_ROOT)}")
    return out


@dataclass(frozen=True)
class Settings:
    submission: Path
    results: Path
    weights: Path
    track: str
    steps: str

    @classmethod
    def from_environment(cls) -> Settings:
        env = os.environ
        return cls(
            Path(env.get("AUTOGRADER_SUBMISSION", "/autograder/submission")),
            Path(env.get("AUTOGRADER_RESULTS", "/autograder/results")),
            Path(env.get("AUTOGRADER_WEIGHTS", REPO_ROOT.parent / "weights")),
            env.get("TRACK", "auto"),
            env.get("STEPS", "all"),
        )


def run(settings: Settings) -> int:
    """Grade the submission and write results.json; 0 graded, 1 the grader stopped, 2 bad input."""
    try:
        weights = read_weights(settings.weights)
        track = resolve_track(settings.track)
        numbers = parse_steps(settings.steps, track)
        files = read_step_files(settings.submission, find_step_files(settings.submission, track))
    except BadInput as err:
        print(f"autograder: {err}", file=sys.stderr)
        write_results(settings.results, {"score": 0, "output": f"autograder: {err}", "tests": []})
        return 2

    hide_solutions()
    work = Path(tempfile.mkdtemp(prefix="autograder-course-"))  # readable by this user only
    try:
        report, log = grade(work, track, numbers, files)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(log)
    write_results(settings.results, results(track, numbers, weights, files, report, log))
    return 0 if report else 1


def results(track: str, numbers: list[int], weights: list[float], files: dict[int, StepFile], report: dict,
            log: str) -> dict:
    """Gradescope's results.json for a grade: one test per step, from the grader's JSON report ({} if it
    wrote none) and its output."""
    steps = {entry["step"]: entry for entry in report.get("steps", [])}
    tests = [step_test(number, track, weights[number - 1], steps.get(number), files.get(number), report)
             for number in numbers]
    stopped = "" if report else f"\nthe grader stopped without a report: {last_line(log)}"
    return {"score": sum(test["score"] for test in tests), "output": summary(track, report) + stopped, "tests": tests}


def hide_solutions() -> None:
    """As root, the package's solutions/ becomes readable by root only: where bubblewrap cannot start, the
    sandbox runs student code as an unprivileged user, who then cannot read them by their absolute path."""
    solutions = REPO_ROOT / "solutions"
    if os.geteuid() == 0 and solutions.is_dir():
        solutions.chmod(0o700)


def read_weights(path: Path) -> list[float]:
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise BadInput(f"cannot read the weights file {path} ({err.strerror if isinstance(err, OSError) else err})")
    words = [word for line in text.splitlines() for word in line.split("#")[0].split()]
    try:
        weights = [float(word) for word in words]
    except ValueError:
        weights = []
    if len(weights) != len(COURSE_STEPS) or not all(math.isfinite(w) and w >= 0 for w in weights):
        raise BadInput(f"the weights file {path} must hold {len(COURSE_STEPS)} numbers of points (steps 1 to "
                       f"{COURSE_STEPS[-1]}, each 0 or more), not {' '.join(words)[:80]!r}")
    return weights


def parse_steps(text: str, track: str) -> list[int]:
    """The steps to grade: "all" (every step the track has) or numbers separated by spaces."""
    if text.strip() == "all":
        return sorted(STEPS[track])
    words = text.split()
    if not words or not all(word.isascii() and word.isdigit() and int(word) in STEPS[track] for word in words):
        raise BadInput(f"STEPS must be all, or step numbers from 1 to {max(STEPS[track])} ({track} track) "
                       f"separated by spaces, not {text!r}")
    return sorted(set(map(int, words)))


def resolve_track(text: str) -> str:
    if text in TRACKS:
        return text
    if text != "auto":
        raise BadInput(f"TRACK must be auto, blackwell or hopper, not {text!r}")
    from grader.judge.cli import detect_gpu, resolve_arch_and_track

    gpu_name, gpu_arch, _ = detect_gpu()
    return resolve_arch_and_track("auto", "auto", gpu_name, gpu_arch)[1]


def find_step_files(submission: Path, track: str) -> dict[int, Path]:
    """The student's file for each step, found by name anywhere in the submission, one in steps/<track>/
    preferred. Not taken: files in a folder of another track or in a solutions/ folder (a submission
    of the whole course holds the reference solutions under the same names), and links, which could
    name a file of the grader's."""
    names = {spec.file_name: number for number, spec in STEPS[track].items()}
    skipped_folders = (set(TRACKS) - {track}) | {"solutions"}
    found: dict[int, list[Path]] = {}
    for folder, subfolders, files in os.walk(submission):  # does not enter linked folders
        subfolders[:] = sorted(name for name in subfolders if name not in skipped_folders)
        for name in files:
            path = Path(folder) / name
            if name in names and path.is_file() and not path.is_symlink():
                found.setdefault(names[name], []).append(path)
    if not found:
        raise BadInput(f"no {track} step files in the submission ({submission}): upload your "
                       f"steps/{track}/stepNN_*.py files, e.g. steps/{track}/{STEPS[track][1].file_name}")
    return {number: min(paths, key=lambda p: (p.parent.name != track, p.parent.parent.name != "steps",
                                              len(p.parts), str(p)))
            for number, paths in found.items()}


@dataclass(frozen=True)
class StepFile:
    origin: str  # where it was in the submission
    source: bytes


def read_step_files(submission: Path, paths: dict[int, Path]) -> dict[int, StepFile]:
    files = {}
    for number, path in paths.items():
        origin = str(path.relative_to(submission))
        try:
            files[number] = StepFile(origin, path.read_bytes())
        except OSError as err:
            raise BadInput(f"cannot read {origin} in the submission ({err.strerror})")
    return files


def grade(work: Path, track: str, numbers: list[int], files: dict[int, StepFile]) -> tuple[dict, str]:
    """Grade the steps `numbers` in a copy of the course at `work`: the student's files where given,
    the skeleton elsewhere. Returns the grader's JSON report ({} if it wrote none) and its output."""
    report_path = prepare_course(work, track, numbers, files)
    done = subprocess.run(grade_command(track, report_path), cwd=work, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    return read_report(report_path), done.stdout.strip()


def prepare_course(work: Path, track: str, numbers: list[int], files: dict[int, StepFile]) -> Path:
    """Copy the course to `work` with the student's files in steps/<track>/ (the skeleton for a step not
    submitted, no file for a step not graded); return where the grade's JSON report will be."""
    for part in COURSE_PARTS:
        source = REPO_ROOT / part
        if source.is_file():
            shutil.copy(source, work / part)
        else:
            shutil.copytree(source, work / part, ignore=shutil.ignore_patterns("__pycache__"))
    track_dir = work / "steps" / track
    for number, spec in STEPS[track].items():
        if number not in numbers:  # `--step all` grades the step files present
            (track_dir / spec.file_name).unlink(missing_ok=True)  # not graded: the skeleton goes too
        elif number in files:
            (track_dir / spec.file_name).write_bytes(files[number].source)
    return work / "reports" / "grade.json"


def grade_command(track: str, report_path: Path) -> list[str]:
    """The one-student grade in instructor mode, run in the course copy that prepare_course made."""
    return [sys.executable, "-s", "-m", "grader", "--instructor", "--step", "all", "--track", track,
            "--json", str(report_path)]


def read_report(path: Path) -> dict:
    """The grader's JSON report; {} if it wrote none (it stopped, or was stopped, before the end)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def step_test(number: int, track: str, weight: float, entry: dict | None, file: StepFile | None,
              report: dict) -> dict:
    """One step as a Gradescope test: its full weight only if it passed everything checked."""
    name = f"step {number}: {STEPS[track][number].topic.replace('_', ' ')}"
    if entry is None:
        lines = ["not graded: " + ("grading stopped before this step (see the steps before it)" if report
                                   else "the grader stopped without a report")]
    else:
        lines = step_lines(entry, file.origin if file else None, report["config"])
    passed = entry is not None and entry["passed"]
    return {"name": name, "score": weight if passed else 0.0, "max_score": weight, "output": "\n".join(lines),
            "visibility": "visible"}


def step_lines(entry: dict, origin: str | None, config: dict) -> list[str]:
    """The grader's report for one step: what was graded, each stage's verdict, speed, problems, and
    what was not checked without a GPU."""
    graded = f"graded {entry['file']}: " + (f"your {origin}" if origin else
                                              "not in your submission, so the course's skeleton")
    lines = [graded, f"build: {entry['build']}, static checks: {entry['features']}, "
                     f"correctness: {entry['correctness']}, speed: {entry['speed']}"]
    for timing in entry["timings"]:
        reference = (f", {timing['kernel_ms'] / timing['reference_ms']:.2f}x the reference solution's time"
                     if timing["reference_ms"] else "")
        lines.append(f"speed at {format_shape(timing['shape'])}: {timing['kernel_ms']:.3f} ms, "
                     f"{timing['tflops']:.1f} TFLOP/s, {timing['share_of_cublas']:.1%} of cuBLAS{reference}")
    lines += entry["problems"]
    if config["gpu_name"] is None:
        lines.append(f"not checked here (no GPU that runs {config['arch']}): correctness and speed")
    return lines


def summary(track: str, report: dict) -> str:
    if not report:
        return f"{track} track"
    config = report["config"]
    where = config["gpu_name"] or "no GPU: build and static checks only, correctness and speed not checked"
    return (f"{track} track for {config['arch']} on {where}; instructor mode: hidden seed, your code built in a "
            "copy of the course without the reference solutions")


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def write_results(folder: Path, results: dict) -> None:
    """results.json, whole or not at all (a new file beside it, then renamed over it)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        written = folder / ".results.json.part"
        written.write_text(json.dumps(results, indent=2) + "\n")
        os.replace(written, folder / "results.json")
    except OSError as err:
        print(f"autograder: cannot write {folder / 'results.json'} ({err.strerror})", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
