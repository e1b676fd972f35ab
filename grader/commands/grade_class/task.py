"""One student's grade, in a process of its own: what a local worker starts for each student and what each task of
a Slurm job array runs.

It finds the student's step files in the staged submission and puts them into a fresh copy of the course, as the
Gradescope autograder does (grader/commands/autograder.py: the same code), runs the one-student grade in
instructor mode (`python -m grader --instructor`, with whatever isolation that grade gives each step) under the
per-student time limit, and writes the student's results.json, the grader's report, a log per step and, last, the
record. Before the grade it checks that this process sees exactly one GPU (or none, for a class graded without
GPUs); after a kernel faulted with an illegal address it runs a known kernel on that GPU (gpu_probe --check) and
says in the record whether the GPU may be used again.

Exit status: 0 a record was written (whatever the student's outcome), 3 an infrastructure error (recorded as
such, not final: retried), 4 another process is grading this student now.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from grader.commands import autograder
from grader.commands.grade_class import store
from grader.core import sandbox
from grader.core.steps import STEPS

INFRASTRUCTURE_EXIT = 3
BUSY_EXIT = 4
PROBE_TIMEOUT_S = 120.0
PR_SET_PDEATHSIG = 1
ENGINE_PID = "GRADE_CLASS_ENGINE_PID"  # set by the local engine for its tasks
ILLEGAL_ADDRESS = re.compile(r"illegal (memory access|address|instruction)", re.IGNORECASE)
STEP_MARKER = re.compile(r"^grading (?:blackwell|hopper) step (\d+) \.\.\.$", re.MULTILINE)
REPORT_HEADER = re.compile(r"^grading \w+/\w+ for ", re.MULTILINE)  # the terminal report after the last step


class Interrupted(Exception):
    """SIGTERM: the engine is stopping (Ctrl-C, scancel, or the local engine's process died)."""


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def main(out: Path, student: str, run: str) -> int:
    """Grade `student` of the class in OUT; the run names the `grade` invocation that asked for it."""
    if not _die_with_parent():
        return 128 + signal.SIGTERM
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        class_file = store.read_class(out)
        class_file.submission(student)
    except (OSError, ValueError, KeyError) as err:
        print(f"grade-class task: no student {student!r} in the class of {out} ({err})", file=sys.stderr)
        return INFRASTRUCTURE_EXIT
    folder = store.student_dir(out, student)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"{student}: another process is grading this student now", file=sys.stderr)
            return BUSY_EXIT
        sandbox.become_subreaper()  # what the grade detaches comes back here, where sweep() finds it
        try:
            record = grade(out, class_file, class_file.submission(student), run)
        except Interrupted:
            sandbox.sweep()
            return 128 + signal.SIGTERM
        store.write_record(out, record)
    return INFRASTRUCTURE_EXIT if not record.final else 0


def _die_with_parent() -> bool:
    """A local worker's task gets SIGTERM when the engine dies, however it dies (a kill -9 too). False when the
    engine that started it died before this was set (its pid, in ENGINE_PID, is no longer the parent's)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    engine = os.environ.get(ENGINE_PID)
    return engine is None or os.getppid() == int(engine)


def _interrupt(signum: int, frame: object) -> None:
    raise Interrupted()


def grade(out: Path, class_file: store.ClassFile, submission: store.Submission, run: str) -> store.Record:
    settings = class_file.settings
    started = now()
    slurm_task = (f" Slurm task {os.environ['SLURM_ARRAY_JOB_ID']}_{os.environ['SLURM_ARRAY_TASK_ID']}"
                  if "SLURM_ARRAY_TASK_ID" in os.environ else "")
    where = (f"{socket.gethostname()}{slurm_task} "
             f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '(unset)')}")
    env = {**os.environ, "GRADER_SEED": str(settings.seed)}

    def record(outcome: str, gpu_model: str, cause: str, **fields) -> store.Record:
        return make_record(submission, settings, gpu_model, outcome, cause, run=run, started=started, where=where,
                           **fields)

    if settings.expect_gpu:
        probe = gpu_probe(env)
        if "error" in probe or probe["count"] != 1:
            seen = probe.get("error") or f"it sees {probe['count']} CUDA devices, not one"
            return record(store.INFRASTRUCTURE, store.NO_GPU, f"the GPU check before grading failed: {seen}")
        gpu_model = probe["names"][0]
    else:
        env["CUDA_VISIBLE_DEVICES"] = ""  # the class is graded without GPUs: builds and static checks
        gpu_model = store.NO_GPU

    folder = store.student_dir(out, submission.id)
    staged = folder / "submission"
    try:
        files = autograder.read_step_files(staged, autograder.find_step_files(staged, settings.track))
    except autograder.BadInput as err:
        autograder.write_results(folder, {"score": 0, "output": f"grade-class: {err}", "tests": []})
        return record(store.REFUSED, gpu_model, str(err))

    work = Path(tempfile.mkdtemp(prefix="grade-class-course-"))
    try:
        report_path = autograder.prepare_course(work, settings.track, settings.steps, files)
        finished = sandbox.run_limited(autograder.grade_command(settings.track, report_path), cwd=work, env=env,
                                       timeout_s=settings.student_timeout_s)
        report = autograder.read_report(report_path)
    except OSError as err:
        return record(store.INFRASTRUCTURE, gpu_model, f"the course copy failed: {err}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log = finished.output.strip()
    if finished.returncode is None:
        log += f"\ngrade-class: the grade did not finish in {settings.student_timeout_s:.0f} s (the per-student limit)"
    results = autograder.results(settings.track, settings.steps, settings.weights, files, report, log)
    _write_outputs(folder, settings.track, files, results, report, log)

    if finished.returncode is None:
        return record(store.TIMED_OUT, gpu_model, f"did not finish in {settings.student_timeout_s:.0f} s "
                                                  "(the per-student time limit)")
    if not report:
        return record(store.INFRASTRUCTURE, gpu_model, "the grader stopped without a report (exit status "
                                                       f"{finished.returncode}): {autograder.last_line(log)}")
    steps = {entry["step"]: entry for entry in report["steps"]}
    step_scores = {str(test_step(test)): test["score"] for test in results["tests"]}
    step_causes = {str(n): first_problem(steps.get(n)) for n in settings.steps if not steps.get(n, {}).get("passed")}
    faulted = any(ILLEGAL_ADDRESS.search(problem) for entry in report["steps"] for problem in entry["problems"])
    cause = "; ".join(f"step {n}: {text}" for n, text in step_causes.items())
    return record(store.GRADED, gpu_model, cause, score=results["score"], step_scores=step_scores,
                  step_causes=step_causes, final_step_share=final_step_share(steps.get(max(settings.steps))),
                  arch=report["config"]["arch"], gpu_check=_gpu_check(env) if faulted and settings.expect_gpu else "")


def make_record(submission: store.Submission, settings: store.Settings, gpu_model: str, outcome: str, cause: str, *,
                run: str, started: str, where: str = "", **fields) -> store.Record:
    return store.Record(
        id=submission.id, key=store.key(submission.content_sha256, settings, gpu_model),
        content_sha256=submission.content_sha256, grader_version=settings.grader_version, gpu_model=gpu_model,
        outcome=outcome, score=fields.pop("score", 0.0), max_score=settings.max_score(),
        provisional=not settings.expect_gpu, cause=cause, started_at=started, ended_at=now(), run=run, where=where,
        **fields)


def test_step(test: dict) -> int:
    """The step number of one of results.json's tests ("step 3: spatial tiling")."""
    return int(test["name"].split(":")[0].removeprefix("step "))


def first_problem(entry: dict | None) -> str:
    """The step's first problem in one line: its first line, and the line after when the first only introduces it
    ("build failed for sm_90a:")."""
    if entry is None:
        return "not graded: the grade stopped before this step"
    lines = [line.strip() for line in next((p for p in entry["problems"] if p.strip()), "").splitlines() if line.strip()]
    if not lines:
        return (f"build {entry['build']}, static checks {entry['features']}, correctness {entry['correctness']}, "
                f"speed {entry['speed']}")
    return " ".join(lines[:2] if lines[0].endswith(":") else lines[:1])[:300]


def final_step_share(entry: dict | None) -> float | None:
    """The step's share of cuBLAS at its largest timed shape, as the grader's table shows it; None if not timed."""
    timings = entry["timings"] if entry else []
    if not timings:
        return None
    largest = max(timings, key=lambda t: t["shape"][0] * t["shape"][1] * t["shape"][2])
    return largest["share_of_cublas"]


def gpu_probe(env: dict[str, str], *args: str) -> dict:
    """gpu_probe's answer in that environment, or {"error": why} when it gave none."""
    try:
        done = subprocess.run(sandbox.python_command("grader.commands.grade_class.gpu_probe", *args), env=env,
                              capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"error": f"the probe did not finish in {PROBE_TIMEOUT_S:.0f} s"}
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return {"error": f"the probe failed: {autograder.last_line(done.stderr)}"}


def _gpu_check(env: dict[str, str]) -> str:
    answer = gpu_probe(env, "--check")
    return answer.get("check") or f"failed: {answer.get('error')}"


def _write_outputs(folder: Path, track: str, files: dict[int, autograder.StepFile], results: dict, report: dict,
                   log: str) -> None:
    """The student's files, each whole: the grader's output split per step, its report, results.json."""
    logs = folder / "logs"
    store.write_atomically(logs / "grader.txt", log + "\n")
    steps = {entry["step"]: entry for entry in report.get("steps", [])}
    for number, part in split_by_step(log).items():
        verdict = ""
        if number in steps:
            origin = files[number].origin if number in files else None
            verdict = "\n\n--- verdict ---\n" + "\n".join(autograder.step_lines(steps[number], origin, report["config"]))
        store.write_atomically(logs / f"step{number:02d}.txt", f"{STEPS[track][number].file_name}\n{part}{verdict}\n")
    if report:
        store.write_json(folder / "report.json", report)
    autograder.write_results(folder, results)


def split_by_step(log: str) -> dict[int, str]:
    """Each step's part of the grader's output: from its "grading <track> step N ..." line to the next step's, the
    last one to the terminal report (which stays in grader.txt)."""
    marks = list(STEP_MARKER.finditer(log))
    report = REPORT_HEADER.search(log)
    ends = [mark.start() for mark in marks[1:]] + [report.start() if report else len(log)]
    return {int(mark.group(1)): log[mark.start():end].strip() for mark, end in zip(marks, ends)}

