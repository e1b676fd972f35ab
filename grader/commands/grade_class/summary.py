"""The class's files, written from the students' records after each run (the records are the truth; these are
rewritten whole every time):

gradebook.csv    one row per student (per submitter of a group submission): sid, name, email, submission,
                 outcome, provisional, then one column per graded step (`step1`, ...: the points it earned),
                 total and max_total. outcome is graded, refused, timed out, infrastructure error (retried by
                 a rerun) or not graded (not yet, or changed since); steps and total are empty when not graded.
leaderboard.csv  rank, submission, sids, share_of_cublas: the last graded step's speed as a share of cuBLAS at its
                 largest timed shape, measured in the same run (GPU grades only), fastest first.
failures.csv     submission, sids, outcome, step, cause: one row per step that lost points and one per student not
                 graded, each cause in one line.
manifest.json    grader version, track, arch, GPU models, seed, steps and weights, each run (engine, start and
                 end, GPUs taken out of the pool), the GPU checks after illegal-address faults, and per student the
                 content hash, outcome, start and end.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from grader.commands.grade_class import store

NOT_GRADED = "not graded"


def current_records(out: Path, class_file: store.ClassFile,
                    gpu_model: str | None) -> dict[str, store.Record | None]:
    """Each student's record if it is done for the current submission and settings, or an infrastructure error of
    it (to be retried); else None."""
    records = {}
    for submission in class_file.submissions:
        record = store.read_record(out, submission.id)
        retried = record is not None and not record.final and record.content_sha256 == submission.content_sha256
        done = store.is_done(record, submission, class_file.settings, gpu_model)
        records[submission.id] = record if done or retried else None
    return records


def write(out: Path, class_file: store.ClassFile, records: dict[str, store.Record | None], run: dict) -> None:
    """The gradebook, leaderboard, failures and manifest; `run` describes this run for the manifest."""
    settings = class_file.settings
    store.write_atomically(out / "gradebook.csv", gradebook(class_file, records))
    store.write_atomically(out / "leaderboard.csv", leaderboard(class_file, records))
    store.write_atomically(out / "failures.csv", failures(class_file, records))
    manifest_path = out / "manifest.json"
    try:
        runs = json.loads(manifest_path.read_text())["runs"]
    except (OSError, ValueError, KeyError):
        runs = []
    graded = [record for record in records.values() if record]
    store.write_json(manifest_path, {
        "grader_version": settings.grader_version,
        "track": settings.track,
        "arch": sorted({record.arch for record in graded if record.arch}),
        "gpu_models": sorted({record.gpu_model for record in graded if record.outcome == store.GRADED}),
        "provisional": not settings.expect_gpu,
        "seed": settings.seed,
        "steps": settings.steps,
        "weights": {str(n): settings.weights[n - 1] for n in settings.steps},
        "runs": [*runs, run],
        "gpus_taken_out": [gpu for past in [*runs, run] for gpu in past.get("gpus_taken_out", [])],
        # after each illegal-address fault: the GPU's check (on Slurm, a failed one names the node to drain)
        "gpu_checks": [{"student": r.id, "where": r.where, "result": r.gpu_check} for r in graded if r.gpu_check],
        "students": [{
            "id": submission.id,
            "source": submission.source,
            "content_sha256": submission.content_sha256,
            "outcome": records[submission.id].outcome if records[submission.id] else NOT_GRADED,
            "started_at": records[submission.id].started_at if records[submission.id] else "",
            "ended_at": records[submission.id].ended_at if records[submission.id] else "",
            "gpu_model": records[submission.id].gpu_model if records[submission.id] else "",
            "where": records[submission.id].where if records[submission.id] else "",
        } for submission in class_file.submissions],
    })


def _csv(rows: list[list]) -> str:
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerows(rows)
    return text.getvalue()


def _sids(submission: store.Submission) -> str:
    return " ".join(person.sid for person in submission.submitters if person.sid) or submission.id


def _points(value: float) -> str:
    return f"{value:g}"


def gradebook(class_file: store.ClassFile, records: dict[str, store.Record | None]) -> str:
    steps = class_file.settings.steps
    rows: list[list] = [["sid", "name", "email", "submission", "outcome", "provisional",
                         *[f"step{n}" for n in steps], "total", "max_total"]]
    for submission in class_file.submissions:
        record = records[submission.id]
        if record is None or record.outcome == store.INFRASTRUCTURE:
            outcome, points, total = record.outcome if record else NOT_GRADED, ["" for _ in steps], ""
        else:
            outcome = record.outcome
            points = [_points(record.step_scores.get(str(n), 0.0)) for n in steps]
            total = _points(record.score)
        provisional = "no" if class_file.settings.expect_gpu else "yes"
        for person in submission.submitters or [store.Submitter("", submission.id, "")]:
            rows.append([person.sid or submission.id, person.name, person.email, submission.id, outcome, provisional,
                         *points, total, _points(class_file.settings.max_score())])
    return _csv(rows)


def leaderboard(class_file: store.ClassFile, records: dict[str, store.Record | None]) -> str:
    timed = sorted(((record.final_step_share, submission) for submission in class_file.submissions
                    if (record := records[submission.id]) and record.final_step_share is not None),
                   key=lambda item: -item[0])
    rows: list[list] = [["rank", "submission", "sids", "share_of_cublas"]]
    rows += [[rank, submission.id, _sids(submission), f"{share:.4f}"]
             for rank, (share, submission) in enumerate(timed, start=1)]
    return _csv(rows)


def failures(class_file: store.ClassFile, records: dict[str, store.Record | None]) -> str:
    rows: list[list] = [["submission", "sids", "outcome", "step", "cause"]]
    for submission in class_file.submissions:
        record = records[submission.id]
        if record is None:
            rows.append([submission.id, _sids(submission), NOT_GRADED, "", "not graded yet (rerun to grade it)"])
        elif record.outcome != store.GRADED:
            rows.append([submission.id, _sids(submission), record.outcome, "", record.cause])
        else:
            rows += [[submission.id, _sids(submission), record.outcome, step, cause]
                     for step, cause in record.step_causes.items()]
    return _csv(rows)
