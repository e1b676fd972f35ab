"""`python -m grader.commands.grade_class grade SUBMISSIONS --out OUT [options]` grades a class (`make grade-class`);
`python -m grader.commands.grade_class status OUT` shows how far it is. Bad options or paths: one line, exit status
2. `grade` exits with 0 when every student has a final outcome (graded, refused or timed out) or, on Slurm, when
the array is submitted or nothing is left to submit; with 1 when students are left ungraded (infrastructure errors
after the retries, every GPU taken out of the pool); with 130 when stopped by Ctrl-C or SIGTERM.

`python -m grader.commands.grade_class task OUT STUDENT RUN` (or `task OUT --batch FILE RUN` in a Slurm array) is
one student's grade: what the engines run, not a command for instructors.
"""

from __future__ import annotations

import argparse
import fcntl
import math
import os
import secrets
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from grader.commands import autograder
from grader.commands.grade_class import intake, local, similarity, slurm, store, summary, task
from grader.core.build import REPO_ROOT
from grader.core.steps import TRACKS

ENGINES = ("local", "slurm")
DEFAULT_STUDENT_TIMEOUT_S = 3600.0
COURSE_FOLDERS = ("grader", "kernel_helpers", "solutions", "steps", "hints", "tests", "docs", "notebooks", "autograder")


class UsageError(Exception):
    """Wrong options or paths: one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        raise UsageError(f"{self.prog}: {message}")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["task"]:
        return _task(args[1:])
    try:
        options = _parse(args)
        if options.command == "status":
            return status(_existing_out(options.out))
        return grade(options)
    except (UsageError, autograder.BadInput, intake.BadSubmissions, slurm.SlurmError) as err:
        print(f"grade-class: {err}", file=sys.stderr)
        return 2


def _parse(args: list[str]) -> argparse.Namespace:
    parser = _Parser(prog="python -m grader.commands.grade_class",
                     description="Grade a class: every submission, every step, in instructor mode.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    grade_parser = commands.add_parser("grade", help="grade (local) or submit and collect (slurm) a class")
    grade_parser.add_argument("submissions", help="a Gradescope export, or a folder of per-student zips or folders")
    grade_parser.add_argument("--out", required=True, help="the class's output folder (reused by a rerun)")
    grade_parser.add_argument("--engine", default="local", help="local (this machine's GPUs, default) or slurm")
    grade_parser.add_argument("--track", default="auto", help="blackwell or hopper (local: auto, the GPU's)")
    grade_parser.add_argument("--steps", default="all", help='the steps graded: all (the track\'s), or e.g. "1 2 3"')
    grade_parser.add_argument("--weights", default=str(REPO_ROOT / "autograder" / "weights"),
                              help="points per step, steps 1-12 (default: the autograder's weights)")
    grade_parser.add_argument("--seed", help="GRADER_SEED for every student (default: drawn once, kept in OUT)")
    grade_parser.add_argument("--student-timeout", default=str(DEFAULT_STUDENT_TIMEOUT_S),
                              help="seconds one student's whole grade may take (default 3600)")
    grade_parser.add_argument("--only", action="append", default=[], help="grade only this student (id or SID); "
                              "repeat for several")
    grade_parser.add_argument("--force", action="store_true", help="grade again students already graded")
    grade_parser.add_argument("--workers", default="1", help="local without a GPU: students graded at once")
    grade_parser.add_argument("--retries", default="2", help="tries again after an infrastructure error (local)")
    grade_parser.add_argument("--max-parallel", default="8", help="slurm: array tasks running at once (%%N)")
    grade_parser.add_argument("--slurm-option", action="append", default=[],
                              help="slurm: one more sbatch option, e.g. --slurm-option=--partition=gpu")
    grade_parser.add_argument("--without-gpu", action="store_true", help="grade builds and static checks only, "
                              "every score provisional (slurm: nodes without GPUs, to try the set-up)")
    status_parser = commands.add_parser("status", help="how far the class's grade is")
    status_parser.add_argument("out", help="the class's output folder")
    return parser.parse_args(args)


def _whole_number(text: str, option: str, least: int) -> int:
    if not text.isascii() or not text.isdigit() or int(text) < least:
        raise UsageError(f"{option} must be a whole number of at least {least}, not {text!r}")
    return int(text)


def _seconds(text: str, option: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"{option} must be a number of seconds above 0, not {text!r}")
    return value


def _out_folder(text: str, submissions: Path) -> Path:
    """OUT, made if missing; refused where a grade would read it as a submission or copy it into course copies."""
    out = Path(text).absolute()
    resolved = out.resolve()
    if resolved == submissions.resolve() or resolved.is_relative_to(submissions.resolve()) or \
            submissions.resolve().is_relative_to(resolved):
        raise UsageError(f"--out {out} and the submissions folder {submissions} must not hold one another")
    if any(resolved.is_relative_to((REPO_ROOT / part).resolve()) for part in COURSE_FOLDERS):
        raise UsageError(f"--out {out} is inside the course's own files: write the class elsewhere (e.g. reports/)")
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as err:
        raise UsageError(f"--out {out} cannot be written ({err.strerror or err})") from None
    return out


def _existing_out(text: str) -> Path:
    out = Path(text).absolute()
    if not (out / store.CLASS_FILE).is_file():
        raise UsageError(f"{out} holds no graded class ({store.CLASS_FILE} is missing)")
    return out


def _track(text: str, engine: str) -> str:
    if text == "auto" and engine == "slurm":
        raise UsageError("--track auto cannot see the cluster's GPUs: name the track (--track hopper or blackwell)")
    if text != "auto" and text not in TRACKS:
        raise UsageError(f"--track must be auto, blackwell or hopper, not {text!r}")
    return autograder.resolve_track(text)


def grade(options: argparse.Namespace) -> int:
    if options.engine not in ENGINES:
        raise UsageError(f"--engine must be local or slurm, not {options.engine!r}")
    if not options.submissions or not options.out:
        raise UsageError("name the submissions folder and the output folder (SUBMISSIONS=dir OUT=dir)")
    submissions_dir = Path(options.submissions).absolute()
    if not submissions_dir.is_dir():
        raise UsageError(f"the submissions folder {submissions_dir} is not a folder")
    out = _out_folder(options.out, submissions_dir)
    weights = autograder.read_weights(Path(options.weights))
    student_timeout = _seconds(options.student_timeout, "--student-timeout")
    workers = _whole_number(options.workers, "--workers", 1)
    retries = _whole_number(options.retries, "--retries", 0)
    max_parallel = _whole_number(options.max_parallel, "--max-parallel", 1)
    seed = _seed(options.seed, out)
    track = _track(options.track, options.engine)
    steps = autograder.parse_steps(options.steps.replace(",", " "), track)
    gpus = local.find_gpus() if options.engine == "local" and not options.without_gpu else []
    expect_gpu = not options.without_gpu and (options.engine == "slurm" or bool(gpus))
    found = intake.find(submissions_dir)
    only = set(options.only)
    unknown = only - {f.id for f in found} - {p.sid for f in found for p in f.submitters}
    if unknown:
        raise UsageError(f"--only {sorted(unknown)[0]}: no such student in {submissions_dir}")

    run = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + f"-{os.getpid()}"
    started = task.now()
    settings = store.Settings(track, steps, weights, seed, student_timeout, expect_gpu, store.grader_version())
    class_file = store.ClassFile(settings, [intake.take(entry, out) for entry in found], run)
    store.write_class(out, class_file)
    models = sorted({gpu.name for gpu in gpus})
    gpu_model = (models[0] if len(models) == 1 else None) if expect_gpu else store.NO_GPU
    if options.engine == "slurm":
        gpu_model = None  # the nodes' GPUs: whichever model each record names

    chosen = [s for s in class_file.submissions
              if not only or s.id in only or any(p.sid in only for p in s.submitters)]
    todo = [s for s in chosen if options.force or not store.is_done(store.read_record(out, s.id), s, settings,
                                                                       gpu_model)]
    for submission in [s for s in todo if s.refused]:
        store.write_record(out, task.make_record(submission, settings, gpu_model or store.NO_GPU, store.REFUSED,
                                                 f"refused: {submission.refused}", run=run, started=started))
        print(f"{submission.id}: refused: {submission.refused}", file=sys.stderr)
    todo = [s for s in todo if not s.refused]
    print(f"grade-class: {len(class_file.submissions)} submissions, {len(todo)} to grade "
          f"({len(chosen) - len(todo)} already graded or refused); {track} track, steps "
          f"{' '.join(map(str, steps))}, " + (f"engine {options.engine}" + (
              f" on {len(gpus)} GPU{'s' if len(gpus) != 1 else ''} ({', '.join(models)})" if gpus else "")) +
          ("" if expect_gpu else "; no GPU: builds and static checks only, every score provisional"), file=sys.stderr)

    run_info = {"run": run, "engine": options.engine, "started_at": started, "students_to_grade": len(todo),
                "command": " ".join(["python -m grader.commands.grade_class", *sys.argv[1:]])}
    if options.engine == "local":
        status_code = _grade_locally(out, class_file, todo, gpus, workers, retries, run, run_info)
    else:
        status_code = _grade_on_slurm(out, class_file, todo, max_parallel, options.slurm_option, run, run_info)
    _write_summaries(out, class_file, gpu_model, {**run_info, "ended_at": task.now()})
    return status_code


def _seed(text: str | None, out: Path) -> int:
    if text is not None:
        if not text.isascii() or not text.isdigit() or int(text) >= 2**64:
            raise UsageError(f"--seed must be a whole number from 0 to 2^64 - 1, not {text!r}")
        return int(text)
    try:
        return store.read_class(out).settings.seed  # a rerun keeps the class's inputs
    except (OSError, ValueError, KeyError, TypeError):
        return secrets.randbits(63)


def _grade_locally(out: Path, class_file: store.ClassFile, todo: list[store.Submission], gpus: list[local.Gpu],
                   workers: int, retries: int, run: str, run_info: dict) -> int:
    outcome = local.run(out, todo, gpus, workers, retries, run, class_file.settings)
    run_info["gpus"] = [f"{gpu.visible} ({gpu.name})" for gpu in gpus]
    run_info["gpus_taken_out"] = outcome.gpus_taken_out
    for line in outcome.gpus_taken_out:
        print(f"grade-class: taken out of the pool: {line}", file=sys.stderr)
    for student in outcome.busy:
        print(f"grade-class: {student}: another process is grading this student; not graded by this run",
              file=sys.stderr)
    if outcome.stopped:
        print("grade-class: stopped; what was graded is kept, a rerun grades the rest", file=sys.stderr)
        return 130
    left = [s.id for s in todo if s.id not in outcome.records or not outcome.records[s.id].final]
    if left:
        print(f"grade-class: {len(left)} not graded ({', '.join(left[:10])}{' ...' if len(left) > 10 else ''}): "
              "see failures.csv; a rerun tries them again", file=sys.stderr)
    return 1 if left else 0


def _grade_on_slurm(out: Path, class_file: store.ClassFile, todo: list[store.Submission], max_parallel: int,
                    options: list[str], run: str, run_info: dict) -> int:
    queued = slurm.queued(out)
    todo = [s for s in todo if s.id not in queued]
    if todo:
        job = slurm.submit(out, run, [s.id for s in todo], class_file.settings, max_parallel, options)
        run_info["slurm_job"] = job.id
        print(f"grade-class: submitted Slurm job {job.id}: {len(todo)} students, at most {max_parallel} at once; "
              f"`python -m grader.commands.grade_class status {out}` shows progress, and running this command again "
              "when the job is done collects the grades", file=sys.stderr)
    elif queued:
        print(f"grade-class: {len(queued)} students still queued or running on Slurm; nothing submitted",
              file=sys.stderr)
    else:
        print("grade-class: every student is graded: gradebook, leaderboard, failures and manifest written",
              file=sys.stderr)
    return 0


def _write_summaries(out: Path, class_file: store.ClassFile, gpu_model: str | None, run_info: dict) -> None:
    records = summary.current_records(out, class_file, gpu_model)
    summary.write(out, class_file, records, run_info)
    store.write_atomically(out / "similarity.md", similarity.report(out, class_file))
    graded = sum(1 for record in records.values() if record and record.final)
    print(f"grade-class: {graded} of {len(records)} students graded; {out}/gradebook.csv, leaderboard.csv, "
          "failures.csv, manifest.json, similarity.md", file=sys.stderr)


def status(out: Path) -> int:
    """Students done, failed, running and queued, and an ETA, from the records on disk and Slurm's queue."""
    class_file = store.read_class(out)
    records = summary.current_records(out, class_file, None)
    queued: dict[str, str] = {}
    if slurm.jobs(out):
        try:
            queued = slurm.queued(out)
        except slurm.SlurmError as err:  # the records on disk still tell what is done
            print(f"grade-class: Slurm's queue not read ({err}): queued and running tasks not counted",
                  file=sys.stderr)
    done = [r for r in records.values() if r and r.final]
    failed = [r for r in done if r.outcome != store.GRADED or r.score < r.max_score]
    running = {s.id for s in class_file.submissions if _being_graded(out, s.id)} | {
        student for student, state in queued.items() if state == "RUNNING"}
    waiting = {student for student, state in queued.items() if state != "RUNNING"}
    left = len(records) - len(done)
    durations = [_seconds_between(r.started_at, r.ended_at) for r in done if r.run == class_file.run]
    eta = ""
    if left and durations and running:
        eta = f"; ETA {_clock(sum(durations) / len(durations) * left / len(running))}"
    print(f"{out}: {len(records)} students: {len(done)} done ({len(failed)} lost points or were not graded), "
          f"{len(running)} running, {len(waiting)} queued, {left - len(running) - len(waiting)} waiting for a run"
          f"{eta}")
    return 0


def _being_graded(out: Path, student: str) -> bool:
    """A task holds the student's lock (on this machine, or on a file system that shares locks)."""
    lock_path = store.student_dir(out, student) / ".lock"
    if not lock_path.exists():
        return False
    with open(lock_path) as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
    return False


def _seconds_between(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _task(args: list[str]) -> int:
    """task OUT STUDENT RUN, or task OUT --batch FILE RUN (the student of this Slurm array task)."""
    if len(args) == 4 and args[1] == "--batch":
        return task.main(Path(args[0]), slurm.student_of_task(Path(args[2])), args[3])
    if len(args) == 3:
        return task.main(Path(args[0]), args[1], args[2])
    print("usage: python -m grader.commands.grade_class task OUT (STUDENT | --batch FILE) RUN", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
