"""The Slurm engine: one job array per submitting run, one array task per student (`--gres=gpu:1`, at most
--max-parallel at once: `%N`), each running the same task as a local worker and writing into the same OUT.

OUT/slurm/job-<run>.sh          the batch script as submitted (sbatch options in #SBATCH lines)
OUT/slurm/job-<run>.students    the students of its array, one per line: task i grades line i
OUT/slurm/jobs.json             the jobs submitted: id, run, students
OUT/slurm/logs/<job>_<task>.txt each task's own output

The course folder, its Python and OUT must be on a file system the nodes share, at the same paths. Slurm's own
retries cover a node that fails (--requeue); a task that ends without a final record is graded again by the next
`grade` run, which submits only the students not done and not queued.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

from grader.commands.grade_class import store
from grader.core import sandbox
from grader.core.build import REPO_ROOT

TASK_MARGIN_S = 600.0  # the task's own work besides the grade, and the node's start
QUEUED_STATES = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED")


class SlurmError(Exception):
    """sbatch or squeue failed: their message, in one line."""


@dataclass(frozen=True)
class Job:
    id: str
    run: str
    students: list[str]


def folder(out: Path) -> Path:
    return out / "slurm"


def jobs(out: Path) -> list[Job]:
    try:
        return [Job(**job) for job in json.loads((folder(out) / "jobs.json").read_text())]
    except (OSError, ValueError, TypeError):
        return []


def batch_script(out: Path, run: str, count: int, settings: store.Settings, max_parallel: int,
                 options: list[str]) -> str:
    """The sbatch script of one array: every line an instructor may want to read before it runs."""
    minutes = math.ceil((settings.student_timeout_s + TASK_MARGIN_S) / 60)
    students = folder(out) / f"job-{run}.students"
    task = sandbox.python_command("grader.commands.grade_class", "task", str(out), "--batch", str(students), run)
    lines = [
        "#!/bin/bash",
        "#SBATCH --job-name=grade-class",
        f"#SBATCH --array=0-{count - 1}%{max_parallel}",
        "#SBATCH --gres=gpu:1",
        "#SBATCH --ntasks=1",
        f"#SBATCH --time={minutes}",
        f"#SBATCH --output={folder(out) / 'logs'}/%A_%a.txt",
        "#SBATCH --requeue",
        *[f"#SBATCH {option}" for option in options],
        f"cd {shlex.quote(str(REPO_ROOT))}",
        "exec " + shlex.join(task),
        "",
    ]
    return "\n".join(lines)


def submit(out: Path, run: str, students: list[str], settings: store.Settings, max_parallel: int,
           options: list[str]) -> Job:
    slurm = folder(out)
    (slurm / "logs").mkdir(parents=True, exist_ok=True)
    store.write_atomically(slurm / f"job-{run}.students", "\n".join(students) + "\n")
    script = slurm / f"job-{run}.sh"
    store.write_atomically(script, batch_script(out, run, len(students), settings, max_parallel, options))
    done = _slurm(["sbatch", "--parsable", str(script)])
    job = Job(done.split(";")[0].strip(), run, students)
    store.write_json(slurm / "jobs.json", [job.__dict__ for job in [*jobs(out), job]])
    return job


def queued(out: Path) -> dict[str, str]:
    """The students whose array task Slurm still holds, with its state (PENDING, RUNNING, ...)."""
    known = jobs(out)
    if not known:
        return {}
    listed = _slurm(["squeue", "--noheader", "--array", "--jobs", ",".join(job.id for job in known),
                     "--format", "%i %T"], missing_jobs_ok=True)
    by_id = {job.id: job for job in known}
    states = {}
    for line in listed.splitlines():
        task_id, _, state = line.strip().partition(" ")
        job_id, _, index = task_id.partition("_")
        if job_id in by_id and state in QUEUED_STATES:
            indices = _indices(index, len(by_id[job_id].students))
            states.update({by_id[job_id].students[i]: state for i in indices})
    return states


def _indices(text: str, count: int) -> list[int]:
    """The array indices squeue names: "3", or for pending tasks shown together "[4-11%2]" or "[4,6-7]"."""
    text = text.strip("[]").split("%")[0]
    indices = []
    for part in filter(None, text.split(",")):
        first, _, last = part.partition("-")
        indices += range(int(first), int(last or first) + 1)
    return [i for i in indices if i < count]


def student_of_task(students_file: Path) -> str:
    """The student of this array task: line SLURM_ARRAY_TASK_ID of the job's students file."""
    index = int(os.environ["SLURM_ARRAY_TASK_ID"])
    return students_file.read_text().splitlines()[index]


def _slurm(command: list[str], missing_jobs_ok: bool = False) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise SlurmError(f"{command[0]} not found: the slurm engine runs where Slurm's commands are") from None
    except subprocess.TimeoutExpired:
        raise SlurmError(f"{command[0]} did not answer in 120 s") from None
    if done.returncode != 0 and not (missing_jobs_ok and "Invalid job id" in done.stderr):
        message = " ".join(done.stderr.split()) or f"exit status {done.returncode}"
        raise SlurmError(f"{command[0]} failed: {message[:300]}")
    return done.stdout
