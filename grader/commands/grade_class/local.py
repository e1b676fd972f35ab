"""The local engine: one worker per GPU of this machine (or --workers of them without a GPU), each student graded by a
task process of its own pinned to that worker's GPU (CUDA_VISIBLE_DEVICES names it alone; the task checks that it
sees exactly one device).

A task that ends without a final record (an infrastructure error: the GPU check before grading failed, the grader
stopped without a report, the task itself ran past its limit) is retried, on whichever GPU is free, up to
--retries times; a student's own outcome is final. A GPU that fails the known-kernel check after an
illegal-address fault is taken out of the pool and said so in the manifest. Ctrl-C, a kill or the end of this
process stops the running tasks (they get SIGTERM, and end the grades they started); what was graded stays.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from grader.commands.grade_class import store, task
from grader.core import sandbox

TASK_MARGIN_S = 300.0  # the task's own work besides the grade: GPU checks, the course copy, the outputs
STOP_GRACE_S = 10.0


@dataclass(frozen=True)
class Gpu:
    visible: str  # what CUDA_VISIBLE_DEVICES names it by
    name: str


def find_gpus() -> list[Gpu]:
    """This machine's GPUs (nvidia-smi), only those CUDA_VISIBLE_DEVICES names when it is set, each named as CUDA
    names it (gpu_probe: the name each student's record keys its grade by)."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        listed = subprocess.run(["nvidia-smi", "--query-gpu=index,uuid,name", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return []
    if listed.returncode != 0:
        return []
    gpus = [[part.strip() for part in line.split(",", 2)] for line in listed.stdout.splitlines() if line.count(",") >= 2]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        wanted = [item.strip() for item in visible.split(",") if item.strip()]
        gpus = [gpu for gpu in gpus if gpu[0] in wanted or gpu[1] in wanted]
    if not gpus:
        return []
    seen = task.gpu_probe({**os.environ, "CUDA_VISIBLE_DEVICES": ",".join(index for index, _, _ in gpus)}).get("names")
    # CUDA's names, in CUDA_VISIBLE_DEVICES order; nvidia-smi's if CUDA sees other devices (each task's check says why)
    names = seen if seen and len(seen) == len(gpus) else [name for _, _, name in gpus]
    return [Gpu(index, name) for (index, _, _), name in zip(gpus, names)]


@dataclass
class Outcome:
    """What the local run did: each graded student's record, and what it could not do."""

    records: dict[str, store.Record] = field(default_factory=dict)
    gpus_taken_out: list[str] = field(default_factory=list)  # "GPU 1 (NVIDIA H100): after student x: why"
    busy: list[str] = field(default_factory=list)  # students another process was grading
    stopped: bool = False


Launch = Callable[[store.Submission, Gpu | None], store.Record]


def task_launcher(out: Path, run: str, settings: store.Settings, running: dict[str, subprocess.Popen]) -> Launch:
    """Start the task of one student on one GPU (None: no GPU), wait for it, return its record; an infrastructure
    error's record when it wrote none."""

    def launch(submission: store.Submission, gpu: Gpu | None) -> store.Record:
        folder = store.student_dir(out, submission.id)
        folder.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": gpu.visible if gpu else "", task.ENGINE_PID: str(os.getpid())}
        started = task.now()
        with open(folder / "task.txt", "w") as log:
            child = subprocess.Popen(sandbox.python_command("grader.commands.grade_class", "task", str(out),
                                                            submission.id, run),
                                     env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
            running[submission.id] = child
            try:
                returncode = child.wait(timeout=settings.student_timeout_s + TASK_MARGIN_S)
            except subprocess.TimeoutExpired:
                stop(child)
                returncode = None
            finally:
                running.pop(submission.id, None)
        record = store.read_record(out, submission.id)
        if returncode == task.BUSY_EXIT:
            raise Busy(submission.id)
        if record is None or record.run != run or record.started_at < started:
            what = "did not finish in time" if returncode is None else f"ended with exit status {returncode}"
            record = task.make_record(submission, settings, store.NO_GPU, store.INFRASTRUCTURE,
                                      f"the grading task {what} without a record (see {folder / 'task.txt'})",
                                      run=run, started=started)
            store.write_record(out, record)  # for failures.csv; a rerun tries again
        return record

    return launch


class Busy(Exception):
    """Another process is grading this student (a second `grade` of the same OUT)."""


def stop(child: subprocess.Popen) -> None:
    """SIGTERM the task (it ends the grade it started), then SIGKILL its group if it is still there."""
    try:
        os.killpg(child.pid, signal.SIGTERM)
        child.wait(timeout=STOP_GRACE_S)
    except ProcessLookupError:
        return
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()


def grade_all(todo: list[store.Submission], gpus: list[Gpu], workers: int, retries: int, launch: Launch,
              outcome: Outcome, on_done: Callable[[store.Record], None] = lambda record: None,
              should_stop: Callable[[], bool] = lambda: False) -> None:
    """Grade `todo` into `outcome`, one worker per GPU (or `workers` without GPUs), each taking the next student
    when free."""
    pending = deque((submission, 0) for submission in todo)
    lock = threading.Lock()

    def worker(gpu: Gpu | None) -> None:
        while not should_stop():
            with lock:
                if not pending:
                    return
                submission, attempts = pending.popleft()
            try:
                record = launch(submission, gpu)
            except Busy:
                outcome.busy.append(submission.id)
                continue
            if should_stop():
                return
            with lock:
                if record.final or attempts >= retries:
                    outcome.records[submission.id] = record
                    on_done(record)
                else:
                    pending.append((submission, attempts + 1))
                if record.gpu_check and record.gpu_check != "passed" and gpu is not None:
                    outcome.gpus_taken_out.append(f"GPU {gpu.visible} ({gpu.name}): after {submission.id}: "
                                                  f"{record.gpu_check}")
                    return

    threads = [threading.Thread(target=worker, args=(gpu,), daemon=True) for gpu in (gpus or [None] * workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def run(out: Path, todo: list[store.Submission], gpus: list[Gpu], workers: int, retries: int, run_id: str,
        settings: store.Settings) -> Outcome:
    """grade_all with the task processes, a progress display on stderr, and Ctrl-C or SIGTERM stopping the tasks."""
    running: dict[str, subprocess.Popen] = {}
    stopping = threading.Event()
    console = Console(stderr=True)
    columns = (TextColumn("grading"), BarColumn(), TextColumn("{task.completed}/{task.total} done"),
               TextColumn("{task.fields[failed]} failed"), TextColumn("{task.fields[running]} running"),
               TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn())
    failed = 0

    def on_done(record: store.Record) -> None:
        nonlocal failed
        failed += record.outcome != store.GRADED or record.score < record.max_score
        progress.update(bar, advance=1, failed=failed)
        points = f"{record.score:g}/{record.max_score:g}" if record.outcome == store.GRADED else record.outcome
        progress.console.print(f"{record.id}: {points}" + (f" ({record.cause[:160]})" if record.cause else ""))

    outcome = Outcome()
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: stopping.set())
    with Progress(*columns, console=console) as progress:
        bar = progress.add_task("grading", total=len(todo), failed=0, running=0)
        launch = task_launcher(out, run_id, settings, running)
        grader = threading.Thread(target=grade_all, args=(todo, gpus, workers, retries, launch, outcome, on_done,
                                                          stopping.is_set), daemon=True)
        grader.start()
        try:
            while grader.is_alive():
                progress.update(bar, running=len(running))
                grader.join(timeout=0.5)
                if stopping.is_set():
                    break
        except KeyboardInterrupt:
            stopping.set()
        progress.update(bar, running=len(running))
        if stopping.is_set():
            for child in list(running.values()):
                stop(child)
            grader.join(timeout=STOP_GRACE_S)
    signal.signal(signal.SIGTERM, previous)
    outcome.stopped = stopping.is_set()
    return outcome
