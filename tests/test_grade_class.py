"""`make grade-class`: a generated class (a Gradescope export and a folder of zips and folders: reference solutions,
a wrong kernel, a faulting kernel, a hang, a crash at import, a tampering file, hostile archives, a group) graded by
the local engine, killed halfway and run again, and by the Slurm engine against a single-node Slurm the test starts
(tests/slurm_cluster.py); the verdicts, the gradebook and each results.json checked. CPU grades: builds and static
checks of steps 1 and 2, every score provisional."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import pytest

import slurm_cluster
from conftest import REPO
from grader.analysis import features
from grader.commands.grade_class import __main__ as grade_class
from grader.commands.grade_class import intake, local, similarity, store, summary
from sample_class import STEP_FILES, TRACK, solution, variant, write_export, write_zip, write_zips

# a hang costs its student this long; the other students' grades (about 20 s each alone, three times that on a busy
# machine) stay well under it
STUDENT_TIMEOUT_S = 120
GRADE_OPTIONS = ["--track", TRACK, "--steps", "1 2", "--without-gpu", "--student-timeout", str(STUDENT_TIMEOUT_S)]


@dataclass(frozen=True)
class Expected:
    outcome: str
    steps: dict[int, float] | None = None  # points of the steps named; None: no points at all
    cause: str = ""  # a regular expression the record's one-line cause must match


EXPORT_EXPECTED = {
    "bob": Expected(store.GRADED, {1: 5, 2: 5}),
    "carl": Expected(store.GRADED, {1: 5, 2: 0}, rf"step 2: .*{re.escape(features.K_LOOP.name)}"),
    "dana": Expected(store.TIMED_OUT, None, rf"did not finish in {STUDENT_TIMEOUT_S} s"),
    # the grade stops at a tampering step (step 2 not graded); a sandbox that refuses the write fails its build
    "eve": Expected(store.GRADED, {1: 0}, r"step 1: .*(tried to change the grader|Permission denied|Read-only)"),
    "fay": Expected(store.REFUSED, None, r"refused: the submission holds a link: grader_link"),
}

ZIPS_EXPECTED = {
    "gus": Expected(store.GRADED, {1: 5, 2: 5}),
    "hal": Expected(store.GRADED, {1: 0, 2: 5}, r"step 1: build failed.*the student file crashed at import"),
    "ivy": Expected(store.REFUSED, None, r"refused: the archive holds a path out of its folder: \.\./\.\./evil\.py"),
    "jon": Expected(store.REFUSED, None, r"refused: the archive holds a link: step01_single_tile\.py"),
    "kim": Expected(store.REFUSED, None, r"refused: the archive holds an absolute path: /etc/cron\.d/evil"),
    "lea": Expected(store.REFUSED, None, r"refused: the archive holds a huge file: big\.bin"),
    "max": Expected(store.GRADED, {1: 0, 2: 5}, rf"step 1: .*{re.escape(features.WGMMA_BY_WARPGROUPS.name)}"),
    "ned": Expected(store.REFUSED, None, r"no hopper step files in the submission"),
    "oli": Expected(store.GRADED, {1: 5, 2: 0}, r"step 2: not implemented yet"),
}


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "grader.commands.grade_class", *args]


def _grade(submissions: Path, out: Path, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(_command("grade", str(submissions), "--out", str(out), *GRADE_OPTIONS, *extra), cwd=REPO,
                          capture_output=True, text=True, timeout=900, env=env)


def _records(out: Path) -> dict[str, store.Record]:
    return {path.parent.name: store.read_record(out, path.parent.name)
            for path in sorted((out / store.STUDENTS).glob(f"*/{store.RECORD}"))}


def check_verdicts(out: Path, expected: dict[str, Expected]) -> None:
    records = _records(out)
    assert sorted(records) == sorted(expected)
    for student, want in expected.items():
        record = records[student]
        assert record.outcome == want.outcome, (student, record)
        assert record.provisional
        points = {int(n): p for n, p in record.step_scores.items()}
        if want.steps is None:
            assert record.score == 0 and set(points.values()) <= {0.0}, (student, record)
        else:
            assert {n: points[n] for n in want.steps} == want.steps, (student, record)
            if len(want.steps) == len(STEP_FILES):
                assert record.score == sum(want.steps.values())
        if want.cause:
            assert re.search(want.cause, record.cause), (student, record.cause)
        else:
            assert record.cause == "", (student, record.cause)


# Gradescope's results.json (https://gradescope-autograders.readthedocs.io/en/latest/specs/)
RESULTS_SCHEMA = {
    "type": "object",
    "required": ["score", "tests"],
    "properties": {
        "score": {"type": "number", "minimum": 0},
        "output": {"type": "string"},
        "tests": {"type": "array", "items": {
            "type": "object",
            "required": ["name", "score", "max_score"],
            "properties": {
                "name": {"type": "string"}, "score": {"type": "number"}, "max_score": {"type": "number"},
                "output": {"type": "string"}, "status": {"enum": ["passed", "failed"]},
                "visibility": {"enum": ["hidden", "after_due_date", "after_published", "visible"]},
            },
        }},
    },
}


def check_outputs(out: Path, expected: dict[str, Expected], people: dict[str, list[str]]) -> None:
    """The gradebook (one row per submitter, points per step adding up to the total), each graded student's
    results.json against Gradescope's format and the record, the logs, failures, leaderboard and manifest."""
    records = _records(out)
    rows = list(csv.DictReader(io.StringIO((out / "gradebook.csv").read_text())))
    assert list(rows[0]) == ["sid", "name", "email", "submission", "outcome", "provisional", "step1", "step2",
                             "total", "max_total"]
    assert sorted(row["sid"] for row in rows) == sorted(sid for sids in people.values() for sid in sids)
    for row in rows:
        record = records[row["submission"]]
        assert row["sid"] in people[row["submission"]]
        assert (row["outcome"], row["provisional"], row["max_total"]) == (record.outcome, "yes", "10")
        assert float(row["step1"]) + float(row["step2"]) == float(row["total"]) == record.score
    for student, record in records.items():
        folder = store.student_dir(out, student)
        if record.outcome == store.REFUSED and expected[student].cause.startswith("refused"):
            assert not (folder / "results.json").exists() and not (folder / "submission").exists()
            continue
        results = json.loads((folder / "results.json").read_text())
        jsonschema.validate(results, RESULTS_SCHEMA)
        assert results["score"] == record.score
        if record.outcome == store.GRADED:
            assert [t["score"] for t in results["tests"]] == [record.step_scores[str(n)] for n in (1, 2)]
            assert json.loads((folder / "report.json").read_text())["config"]["instructor"] is True
        if record.outcome in (store.GRADED, store.TIMED_OUT):
            assert (folder / "logs" / "step01.txt").read_text().startswith(STEP_FILES[1])
    failures = list(csv.DictReader(io.StringIO((out / "failures.csv").read_text())))
    assert {row["submission"] for row in failures} == {s for s, r in records.items() if r.score < r.max_score}
    assert all("\n" not in row["cause"] and row["cause"] for row in failures)
    assert (out / "leaderboard.csv").read_text() == "rank,submission,sids,share_of_cublas\n"  # no GPU: no speeds
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["track"] == TRACK and manifest["provisional"] and manifest["gpu_models"] == [store.NO_GPU]
    assert manifest["grader_version"] == store.grader_version() and manifest["arch"] == ["sm_90a"]
    assert isinstance(manifest["seed"], int) and manifest["runs"][-1]["ended_at"]
    by_id = {entry["id"]: entry for entry in manifest["students"]}
    assert {s: e["content_sha256"] for s, e in by_id.items()} == {s: r.content_sha256 for s, r in records.items()}
    assert all(by_id[s]["started_at"] == r.started_at and by_id[s]["ended_at"] == r.ended_at
               for s, r in records.items())


EXPORT_PEOPLE = {"bob": ["bob", "bea"], "carl": ["carl"], "dana": ["dana"], "eve": ["eve"],
                 "fay": ["fay"]}
ZIPS_PEOPLE = {student: [student] for student in ZIPS_EXPECTED}


@pytest.fixture(scope="module")
def classes(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("class")
    write_export(root)
    write_zips(root)
    return root


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in command:
                found.append(f"{entry.name}: {command}")
    return found


@pytest.fixture(scope="module")
def local_export_started(classes) -> tuple[Path, subprocess.Popen]:
    """The export's local grade, started in the background: its hang holds one worker for STUDENT_TIMEOUT_S, during
    which the zips class is graded (the machine's cores stay busy)."""
    out = classes / "out-local-export"
    grading = subprocess.Popen(_command("grade", str(classes / "export"), "--out", str(out), *GRADE_OPTIONS,
                                        "--workers", "2"), cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    yield out, grading
    if grading.poll() is None:
        grading.kill()
        grading.wait()


@pytest.fixture(scope="module")
def local_zips(classes, local_export_started) -> tuple[Path, dict[str, store.Record], subprocess.CompletedProcess]:
    """The zips class graded locally, the engine killed (SIGKILL) once two students are graded by their tasks, then
    run again. Returns OUT, the records there at the kill, and the rerun."""
    out = classes / "out-local-zips"
    first = subprocess.Popen(_command("grade", str(classes / "zips"), "--out", str(out), *GRADE_OPTIONS),
                             cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 600
    while first.poll() is None and time.monotonic() < deadline:
        graded_by_tasks = [r for r in _records(out).values() if r and r.outcome != store.REFUSED]
        if len(graded_by_tasks) >= 2:
            break
        time.sleep(0.2)
    assert first.poll() is None, "the class was graded before the test could stop it halfway"
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    at_kill = _records(out)
    # its running task gets SIGTERM and ends the grade it started: nothing of the first run keeps working on OUT
    deadline = time.monotonic() + 30
    while _processes_mentioning(str(out)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _processes_mentioning(str(out)) == []
    rerun = _grade(classes / "zips", out, "--workers", "2")
    return out, at_kill, rerun


def test_a_class_killed_halfway_and_rerun_grades_only_what_was_left(local_zips):
    out, at_kill, rerun = local_zips
    assert rerun.returncode == 0, rerun.stderr
    assert len(at_kill) < len(ZIPS_EXPECTED)
    records = _records(out)
    for student, record in at_kill.items():  # what the first run had graded is kept as it was
        assert records[student] == record
    second_run = {student for student, record in records.items() if record.run != next(iter(at_kill.values())).run}
    assert second_run == set(ZIPS_EXPECTED) - set(at_kill)
    assert f"{len(ZIPS_EXPECTED) - len(at_kill)} to grade ({len(at_kill)} already graded or refused)" in rerun.stderr
    check_verdicts(out, ZIPS_EXPECTED)
    check_outputs(out, ZIPS_EXPECTED, ZIPS_PEOPLE)


def test_a_gradescope_export_graded_locally(local_export_started):
    out, grading = local_export_started
    _, errors = grading.communicate(timeout=600)
    assert grading.returncode == 0, errors
    assert "Traceback" not in errors
    check_verdicts(out, EXPORT_EXPECTED)
    check_outputs(out, EXPORT_EXPECTED, EXPORT_PEOPLE)
    rows = {row["sid"]: row for row in csv.DictReader(io.StringIO((out / "gradebook.csv").read_text()))}
    assert (rows["bea"]["name"], rows["bea"]["email"], rows["bea"]["total"]) == ("Bea Bell", "bea@uni.edu", "10")
    similar = (out / "similarity.md").read_text()
    for step in (1, 2):  # bob handed in the reference solution as it is
        section = similar.split(f"## Step {step} ")[1].split("## Step")[0]
        assert "| (reference solution) | bob | 100% | 100% |" in section


def test_the_similarity_of_a_file_leaves_out_the_skeletons_lines():
    skeleton_path = REPO / "steps" / TRACK / STEP_FILES[2]
    skeleton = similarity.fingerprints(skeleton_path.read_text(), STEP_FILES[2], set())
    assert similarity.fingerprints(skeleton_path.read_text(), STEP_FILES[2], skeleton) == set()
    reference = similarity.fingerprints(solution(2), STEP_FILES[2], skeleton)
    wrong = similarity.fingerprints(variant("hopper-2-one-k-tile"), STEP_FILES[2], skeleton)
    assert reference and len(reference & wrong) / len(reference) > 0.5  # one line changed of the student's own code


def test_a_rerun_skips_the_graded_and_regrades_what_changed_or_what_only_and_force_name(classes, local_zips):
    out, _, _ = local_zips
    before = _records(out)
    zips = classes / "zips"
    original = (zips / "lea.zip").read_bytes()
    write_zip(zips / "lea.zip", {"step01_single_tile.py": b"", "../x": b""})  # lea uploads another archive
    try:
        done = _grade(zips, out, "--only", "ned", "--force", "--only", "kim")
        assert done.returncode == 0, done.stderr
        after = _records(out)
        assert {s for s in after if after[s].run != before[s].run} == {"ned", "kim"}  # lea is not among --only
        done = _grade(zips, out)
        assert done.returncode == 0, done.stderr
        last = _records(out)
        assert {s for s in last if last[s].run != after[s].run} == {"lea"}
        assert last["lea"].cause == "refused: the archive holds a path out of its folder: ../x"
    finally:
        (zips / "lea.zip").write_bytes(original)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    try:
        cluster = slurm_cluster.start(tmp_path_factory.mktemp("slurm"))
    except slurm_cluster.Unavailable as err:
        pytest.skip(f"no single-node Slurm here: {err}")
    yield cluster
    cluster.stop()


def test_both_layouts_graded_as_a_slurm_job_array(classes, cluster):
    outs = {"export": classes / "out-slurm-export", "zips": classes / "out-slurm-zips"}
    options = ["--engine", "slurm", "--max-parallel", "2"]
    for layout, out in outs.items():
        done = _grade(classes / layout, out, *options, env=cluster.env)
        assert done.returncode == 0, done.stderr
        assert "submitted Slurm job" in done.stderr
        script = next((out / "slurm").glob("job-*.sh")).read_text()
        assert "#SBATCH --gres=gpu:1" in script and re.search(r"#SBATCH --array=0-\d+%2", script)
    deadline = time.monotonic() + 900
    statuses = []
    while time.monotonic() < deadline:
        statuses = [subprocess.run(_command("status", str(out)), cwd=REPO, capture_output=True, text=True,
                                   env=cluster.env).stdout for out in outs.values()]
        if all(" 0 running, 0 queued, 0 waiting" in line for line in statuses):
            break
        time.sleep(2)
    assert all(" 0 running, 0 queued, 0 waiting" in line for line in statuses), statuses
    for (layout, out), expected, people in zip(outs.items(), (EXPORT_EXPECTED, ZIPS_EXPECTED),
                                               (EXPORT_PEOPLE, ZIPS_PEOPLE)):
        collected = _grade(classes / layout, out, *options, env=cluster.env)  # a rerun collects; submits nothing
        assert collected.returncode == 0 and "every student is graded" in collected.stderr, collected.stderr
        check_verdicts(out, expected)
        check_outputs(out, expected, people)
        by_tasks = [r for r in _records(out).values() if "Slurm task" in r.where]
        assert len(by_tasks) == sum(not e.cause.startswith("refused") for e in expected.values())
        assert all(re.search(r"Slurm task \d+_\d+ CUDA_VISIBLE_DEVICES=[012]$", r.where) for r in by_tasks)
        assert max(_at_once(r, by_tasks) for r in by_tasks) <= 2  # the array's %2


def _at_once(record: store.Record, records: list[store.Record]) -> int:
    """How many of `records` ran while `record` started (itself included)."""
    return sum(other.started_at <= record.started_at < other.ended_at for other in records)


# ---- without grading: intake, options, the local pool ----------------------------------------------------------


@pytest.mark.parametrize("args,message", [
    (["grade", "/nonexistent", "--out", "{tmp}/out"], "is not a folder"),
    (["grade", "{tmp}/subs", "--out", "{tmp}/subs/out"], "must not hold one another"),
    (["grade", "{tmp}/subs", "--out", str(REPO / "steps" / "out")], "inside the course's own files"),
    (["grade", "{tmp}/subs", "--out", "{tmp}/out", "--engine", "ray"], "--engine must be local or slurm"),
    (["grade", "{tmp}/subs", "--out", "{tmp}/out", "--engine", "slurm"], "--track auto cannot see"),
    (["grade", "{tmp}/subs", "--out", "{tmp}/out", "--steps", "0 2"], "STEPS must be all, or step numbers"),
    (["grade", "{tmp}/subs", "--out", "{tmp}/out", "--student-timeout", "-1"], "--student-timeout must be"),
    (["grade", "{tmp}/subs", "--out", "{tmp}/out", "--track", TRACK, "--only", "zed"], "--only zed: no such student"),
    (["grade", "{tmp}/empty", "--out", "{tmp}/out"], "no submissions in"),
    (["grade", "{tmp}/subs", "--out", "{tmp}/out", "--bogus"], "unrecognized arguments: --bogus"),
    (["status", "{tmp}/subs"], "holds no graded class"),
])
def test_bad_options_and_paths_are_one_line_and_exit_2(tmp_path, capsys, args, message):
    (tmp_path / "subs" / "amy").mkdir(parents=True)
    (tmp_path / "empty").mkdir()
    assert grade_class.main([arg.replace("{tmp}", str(tmp_path)) for arg in args]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1 and message in captured.err


def test_an_unreadable_gradescope_metadata_file_is_one_line(tmp_path):
    (tmp_path / intake.GRADESCOPE_METADATA).write_text("submission_1: [unclosed\n")
    with pytest.raises(intake.BadSubmissions, match=f"cannot read {tmp_path / intake.GRADESCOPE_METADATA}"):
        intake.find(tmp_path)


@pytest.mark.parametrize("files,refusal", [
    ({"a.py": bytes(999), "b.py": bytes(1001)}, "the archive holds a huge file: b.py (1001 bytes unpacked, at most "
                                                "1000 taken)"),
    ({f"{n}.py": bytes(1000) for n in range(5)}, "the archive unpacks to more than 4000 bytes"),
    ({"a.py": b"", "C:/x.py": b""}, "the archive holds an absolute path: C:/x.py"),
])
def test_an_archive_past_the_limits_is_refused_and_nothing_of_it_unpacked(tmp_path, monkeypatch, files, refusal):
    monkeypatch.setattr(intake, "MAX_FILE_BYTES", 1000)
    monkeypatch.setattr(intake, "MAX_TOTAL_BYTES", 4000)
    write_zip(tmp_path / "amy.zip", files)
    taken = intake.take(intake.find(tmp_path)[0], tmp_path / "out")
    assert taken.refused == refusal
    assert not (tmp_path / "out").exists()


def test_a_corrupt_zip_is_refused(tmp_path):
    write_zip(tmp_path / "amy.zip", {"step01_single_tile.py": bytes(5000)})
    data = bytearray((tmp_path / "amy.zip").read_bytes())
    data[40:60] = bytes(20)  # inside the file's compressed bytes
    (tmp_path / "amy.zip").write_bytes(bytes(data))
    assert intake.take(intake.find(tmp_path)[0], tmp_path / "out").refused.startswith("not a readable zip archive")


def _submission(student: str) -> store.Submission:
    return store.Submission(student, "", [], student)


def test_a_gpu_that_fails_the_check_after_a_fault_is_taken_out_and_infrastructure_errors_are_retried():
    gpus = [local.Gpu("0", "H100"), local.Gpu("1", "H100")]
    attempts: dict[str, int] = {}
    on_gpu: dict[str, list[str]] = {"0": [], "1": []}

    def launch(submission: store.Submission, gpu: local.Gpu | None) -> store.Record:
        attempts[submission.id] = attempts.get(submission.id, 0) + 1
        on_gpu[gpu.visible].append(submission.id)
        time.sleep(0.01)
        outcome = store.INFRASTRUCTURE if submission.id == "flaky" and attempts["flaky"] < 2 else store.GRADED
        check = "failed: an illegal memory access was encountered" if submission.id == "faulty" else ""
        return store.Record(submission.id, "", "", "", "H100", outcome, 0.0, 10.0, False, gpu_check=check)

    todo = [_submission(name) for name in ["faulty", "flaky", *[f"s{i}" for i in range(8)]]]
    outcome = local.Outcome()
    local.grade_all(todo, gpus, 1, 2, launch, outcome)
    assert sorted(outcome.records) == sorted(s.id for s in todo)
    assert attempts["flaky"] == 2 and outcome.records["flaky"].outcome == store.GRADED
    faulty_gpu = next(gpu for gpu, students in on_gpu.items() if "faulty" in students)
    assert on_gpu[faulty_gpu][-1] == "faulty"  # nothing more ran on it
    assert outcome.gpus_taken_out == [f"GPU {faulty_gpu} (H100): after faulty: failed: an illegal memory access "
                                      "was encountered"]


def test_an_infrastructure_error_is_given_up_after_the_retries():
    def launch(submission: store.Submission, gpu: local.Gpu | None) -> store.Record:
        return store.Record(submission.id, "", "", "", "none", store.INFRASTRUCTURE, 0.0, 10.0, True, "node lost")

    outcome = local.Outcome()
    calls = []
    local.grade_all([_submission("amy")], [], 1, 2, lambda s, g: calls.append(s) or launch(s, g), outcome)
    assert len(calls) == 3 and not outcome.records["amy"].final


def test_the_gradebook_has_a_row_per_submitter_and_empty_points_when_not_graded():
    settings = store.Settings(TRACK, [1, 2], [5.0] * 10, 1, 60.0, False, "v")
    people = [store.Submitter("Bob", "bob", "b@x"), store.Submitter("Bea", "bea", "e@x")]
    class_file = store.ClassFile(settings, [store.Submission("bob", "", people, "h"), _submission("amy")], "run")
    record = store.Record("bob", "", "h", "v", "none", store.GRADED, 5.0, 10.0, True, step_scores={"1": 5.0, "2": 0.0})
    text = summary.gradebook(class_file, {"bob": record, "amy": None})
    assert text.splitlines() == [
        "sid,name,email,submission,outcome,provisional,step1,step2,total,max_total",
        "bob,Bob,b@x,bob,graded,yes,5,0,5,10",
        "bea,Bea,e@x,bob,graded,yes,5,0,5,10",
        "amy,,,amy,not graded,yes,,,,10",
    ]


def test_an_infrastructure_error_does_not_replace_a_grade_of_the_same_submission(tmp_path):
    graded = store.Record("amy", "k", "h", "v", "none", store.GRADED, 5.0, 10.0, True)
    store.write_record(tmp_path, graded)
    store.write_record(tmp_path, store.Record("amy", "k", "h", "v", "none", store.INFRASTRUCTURE, 0.0, 10.0, True))
    assert store.read_record(tmp_path, "amy") == graded
    changed = store.Record("amy", "k2", "h2", "v", "none", store.INFRASTRUCTURE, 0.0, 10.0, True, "node lost")
    store.write_record(tmp_path, changed)  # a new submission: the old grade is not its grade
    assert store.read_record(tmp_path, "amy") == changed


def test_the_local_pool_is_the_gpus_cuda_visible_devices_names(tmp_path, monkeypatch):
    """nvidia-smi lists the machine's GPUs; CUDA_VISIBLE_DEVICES (by index or UUID) picks the pool. Here CUDA sees
    none of them (no driver), so they keep nvidia-smi's names."""
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho '0, GPU-aaa, NVIDIA H100 80GB HBM3'\necho '1, GPU-bbb, NVIDIA H100 80GB HBM3'\n"
                    "echo '2, GPU-ccc, NVIDIA H100 80GB HBM3'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,GPU-aaa")
    assert local.find_gpus() == [local.Gpu("0", "NVIDIA H100 80GB HBM3"), local.Gpu("2", "NVIDIA H100 80GB HBM3")]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert local.find_gpus() == []
