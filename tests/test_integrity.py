"""Known-bad submissions that need no GPU: each is graded as failing, with a line a student can act on.

Each case is a student file written to a temporary steps/ tree. Cases that write outside their
tree run against a private copy of the course (a `python -m grader` there), never this checkout.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO
from grader.core import build, sandbox
from grader.judge import cli
from grader.runs import build_child
from grader.judge.grade import Config, grade_step
from grader.core.steps import STEPS

TRACK, ARCH = "hopper", "sm_90a"


def _solution(step: int) -> str:
    return (REPO / "solutions" / TRACK / STEPS[TRACK][step].file_name).read_text()


def _tree(root: Path, step: int, source: str) -> Path:
    folder = root / "steps" / TRACK
    folder.mkdir(parents=True, exist_ok=True)
    (folder / STEPS[TRACK][step].file_name).write_text(source)
    return root / "steps"


def _as_step(step_from: int, step_to: int) -> str:
    return _solution(step_from).replace(f"def hgemm_v{step_from}(", f"def hgemm_v{step_to}(")


def _config(impl_dir: Path, instructor: bool = False) -> Config:
    return Config("steps", impl_dir, REPO / "solutions", TRACK, ARCH, None, 132, 5, 60.0, None, instructor)


def _grade(impl_dir: Path, step: int, instructor: bool = False):
    return grade_step(_config(impl_dir, instructor), STEPS[TRACK][step])


def compute_only_into_poison(step3_source: str) -> str:
    """Hopper step 3 with its K loop and writeback run only while the tile's first output is NaN, the
    poison the grader fills outputs with: right on a fresh output, nothing to do on one already written
    (issue 15, class 1: a grader that timed calls into a reused output would time no work)."""
    lines = step3_source.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "mma_tile()")
    end = next(i for i, line in enumerate(lines) if line.strip() == "return kernel")
    indent = lines[start][: len(lines[start]) - len(lines[start].lstrip())]
    guarded = [f"{indent}if T.isnan(D[m_st, n_st]):"] + [("    " + line) if line.strip() else line
                                                          for line in lines[start:end]]
    return "\n".join(lines[:start] + guarded + lines[end:]) + "\n"


def test_a_kernel_that_works_only_into_a_poisoned_output_passes_the_cpu_grade(tmp_path):
    # only the GPU can judge it (tests/test_integrity_gpu.py): the CPU grade sees a proper step 3
    result = _grade(_tree(tmp_path, 3, compute_only_into_poison(_solution(3))), 3)
    assert (result.build, result.features) == ("passed", "passed"), result.problems
    assert any("did not simulate this kernel: it uses control flow that depends on data" in n for n in result.notes)


@pytest.mark.parametrize("k_loop", ["range(K // BLK_K - 1)", "range(min(K // BLK_K, 2048 // BLK_K))"],
                         ids=["one-tile-short", "ignores-k-beyond-2048"])
def test_a_k_loop_that_stops_early_fails_the_static_checks(tmp_path, k_loop):
    # the same kernels reach the GPU with the static checks set aside in tests/test_integrity_gpu.py
    result = _grade(_tree(tmp_path, 3, _solution(3).replace("range(K // BLK_K)", k_loop)), 3)
    assert result.features == "failed", result.problems
    assert any("K tile" in p for p in result.problems), result.problems


_TMA_LOADS_AND_WAIT = re.compile(r"( +)if warp_id == 0:\n +if T\.cuda\.elect_sync\(\):\n +T\.ptx\.mbarrier\.arrive\."
                                 r"expect_tx(?:.*\n)*? +phase_tma = phase_tma \^ 1\n")
_STEP3_LOADS = """Tx.cta.copy(Asmem[:, :], A[m_st:m_st + BLK_M, k_st:k_st + BLK_K])
Tx.cta.copy(Bsmem[:, :], B[n_st:n_st + BLK_N, k_st:k_st + BLK_K])
T.ptx.fence.proxy.async_.shared__cta()
T.cuda.cta_sync()"""


def tma_in_dead_code(step4_source: str) -> str:
    """Hopper step 4 whose K loop copies A and B the step-3 way and keeps its TMA loads and wait in a
    branch no input takes (the inputs are small): the SASS holds UTMALDG, the kernel never runs it."""
    def rewrite(found: re.Match) -> str:
        indent = found.group(1)
        dead = "".join(f"    {line}\n" if line.strip() else "\n" for line in found.group(0).splitlines())
        live = "".join(f"{indent}    {line}\n" for line in _STEP3_LOADS.splitlines())
        return f"{indent}if A[0, 0] > T.float16(60000.0):\n{dead}{indent}else:\n{live}"

    rewritten, count = _TMA_LOADS_AND_WAIT.subn(rewrite, step4_source, count=1)
    assert count == 1, "step 4's TMA block no longer matches"
    return rewritten


def test_the_checked_instruction_in_dead_code_does_not_pass(tmp_path):
    result = _grade(_tree(tmp_path, 4, tma_in_dead_code(_solution(4))), 4)
    assert result.build == "passed", result.problems
    failed = {check.name for check in result.checks if not check.passed}
    assert "TMA loads (UTMALDG)" not in failed  # the instruction is there...
    assert "A and B both loaded by TMA" in failed, result.problems  # ...but not the loads


PATCH_CHECKS = """
import grader.analysis.features as _f
_f.run_checks = lambda *a, **k: [_f.CheckResult(c.name, True, c.hint) for c in _f.CHECKS["hopper"][4]]
"""

PATCH_SASS = """
import grader.core.build as _b
_real_compile, _real_disassemble = _b.compile_cuda, _b.disassemble
_b.compile_cuda = lambda source, arch: (lambda cubin, ptx: (cubin, ptx + " mbarrier.arrive.expect_tx "))(*_real_compile(source, arch))
_b.disassemble = lambda cubin: _real_disassemble(cubin) + " UTMALDG UTMASTG "
"""

FAKE_TOOLS = """
import os, stat, tempfile
_bin = tempfile.mkdtemp()
for _tool in ("nvcc", "cuobjdump", "ptxas", "nvdisasm"):
    _path = os.path.join(_bin, _tool)
    open(_path, "w").write("#!/bin/sh\\necho UTMALDG UTMASTG HGMMA.64x128x16.F32 mbarrier.arrive.expect_tx\\n")
    os.chmod(_path, 0o755)
os.environ["PATH"] = _bin + os.pathsep + os.environ["PATH"]
"""


@pytest.mark.parametrize("attack", [PATCH_CHECKS, PATCH_SASS, FAKE_TOOLS], ids=["run_checks", "sass", "fake-tools"])
def test_a_step3_kernel_that_changes_the_grader_or_its_tools_fails_step4(tmp_path, attack):
    result = _grade(_tree(tmp_path, 4, _as_step(3, 4) + attack), 4)
    assert not result.passed
    assert result.build == "failed" or result.features == "failed", result.problems
    if result.build == "failed":
        assert "tried to change the grader" in result.problems[0]
    else:
        assert any("missing feature: TMA loads" in p for p in result.problems), result.problems


@pytest.mark.parametrize(
    "ending", ["import sys\nsys.exit(0)\n", "raise KeyboardInterrupt\n", "raise SystemExit(3)\n", "import os\nos._exit(0)\n"]
)
def test_a_file_that_ends_the_interpreter_at_import_fails_its_step_only(tmp_path, ending):
    tree = _tree(tmp_path, 2, _as_step(1, 2) + ending)
    result = _grade(tree, 2)
    assert result.build == "failed"
    assert "the build process ended early" in result.problems[0]
    _tree(tmp_path, 1, _solution(1))
    assert _grade(tree, 1).passed


@pytest.mark.parametrize("where", ["at import", "in hgemm_v1"])
def test_an_endless_loop_is_reported_as_a_build_that_did_not_finish(tmp_path, where):
    source = _solution(1) + "\nwhile True:\n    pass\n" if where == "at import" else _solution(1).replace(
        "def hgemm_v1(M, N, K):", "def hgemm_v1(M, N, K):\n    while True:\n        pass")
    tree = _tree(tmp_path, 1, source)
    start = time.monotonic()
    with pytest.raises(build.BuildFailed, match="building step 1 did not finish in 3 s"):
        build_child.build_isolated(tree, TRACK, STEPS[TRACK][1], [(128, 128, 64)], ARCH, 132, with_solutions=True,
                                   export=False, out_dir=tmp_path, timeout_s=3)
    assert time.monotonic() - start < 30


def test_instructor_mode_keeps_the_solutions_out_of_the_build(tmp_path):
    source = "from solutions.hopper.step01_single_tile import hgemm_v1  # noqa\n"
    tree = _tree(tmp_path, 1, source)
    assert _grade(tree, 1, instructor=False).passed  # a local grade cannot stop this: the solutions ship
    result = _grade(tree, 1, instructor=True)
    assert result.build == "failed"
    assert "No module named 'solutions" in result.problems[0]


def test_a_technique_used_only_at_the_largest_shape_fails(tmp_path):
    # step 5's kernel at 2048^3 (the largest checked shape), step 4's everywhere else
    folder = tmp_path / "steps" / TRACK
    folder.mkdir(parents=True)
    (folder / "_step4.py").write_text(_solution(4))
    (folder / "_step5.py").write_text(_solution(5))
    switch = """
import importlib.util, pathlib
def _load(name):
    spec = importlib.util.spec_from_file_location(name, pathlib.Path(__file__).with_name(name + ".py"))
    module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module); return module
def hgemm_v5(M, N, K):
    if (M, N, K) == (2048, 2048, 2048):
        return _load("_step5").hgemm_v5(M, N, K)
    return _load("_step4").hgemm_v4(M, N, K)
"""
    result = _grade(_tree(tmp_path, 5, switch), 5)
    assert result.features == "failed"
    assert any("A and B staged" in p and "absent at" in p for p in result.problems), result.problems


def _course_copy(tmp_path: Path) -> Path:
    course = tmp_path / "course"
    for part in ("grader", "kernel_helpers", "solutions", "steps", "hints"):
        shutil.copytree(REPO / part, course / part, ignore=shutil.ignore_patterns("__pycache__"))
    for part in ("Makefile", "pyproject.toml"):
        shutil.copy(REPO / part, course / part)
    return course


def _grade_copy(course: Path, step: int, *extra: str) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key != "CUDA_VISIBLE_DEVICES"}
    env["CUDA_VISIBLE_DEVICES"] = ""  # a CPU grade wherever the tests run
    return subprocess.run(
        [sys.executable, "-m", "grader", "--step", str(step), "--track", TRACK, "--json", str(course.parent / "r.json"),
         *extra], cwd=course, env=env, capture_output=True, text=True, timeout=600,
    )


def test_a_file_that_rewrites_the_grader_or_a_solution_on_disk_fails_and_leaves_nothing_running(tmp_path):
    course = _course_copy(tmp_path)
    marker = f"{300 + os.getpid() % 1000}.25"  # the detached sleep's argument, found in /proc after the grade
    attack = f"""
import os, subprocess
if os.fork() == 0:
    os.setsid()
    subprocess.Popen(["sleep", "{marker}"], start_new_session=True)
    os._exit(0)
open({str(course / "grader" / "analysis" / "features.py")!r}, "a").write("\\n# changed by the student\\n")
"""
    (course / "steps" / TRACK / STEPS[TRACK][2].file_name).write_text(_as_step(1, 2) + attack)
    started = time.monotonic()
    done = _grade_copy(course, 2)
    # the detached sleep holds whatever its parent's output went to: grading must not wait for it
    assert time.monotonic() - started < 150, "the grade waited for a process the student's file detached"
    assert done.returncode == 1, done.stdout + done.stderr
    if sandbox.confinement().mode == "none":  # only the fingerprints stand in its way
        assert "changed files the grader relies on (grader/analysis/features.py)" in done.stdout
        assert "tried to change the grader" in done.stdout
    else:  # the sandbox refuses the write: the import fails, the grader is untouched
        assert re.search(r"importing step02_\w+\.py failed: (FileNotFoundError|PermissionError|OSError)", done.stdout)
        assert "# changed by the student" not in (course / "grader" / "analysis" / "features.py").read_text()
    time.sleep(0.5)
    running = [Path(f"/proc/{pid}/cmdline").read_bytes() for pid in os.listdir("/proc") if pid.isdigit()
               and Path(f"/proc/{pid}/cmdline").exists()]
    assert not any(marker.encode() in cmdline for cmdline in running)


# a submission that makes the reference slower on disk when imported (on a GPU, a slow step would then pass the
# speed rule against it): directly, or from a process it leaves behind, which may land at any time
SLOWER_REFERENCE = {
    "at import": "open({solution!r}, 'w').write({slower!r})\n",
    "from a detached process": (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    time.sleep(0.3)\n"
        "    open({solution!r}, 'w').write({slower!r})\n"
        "    os._exit(0)\n"
    ),
}


@pytest.mark.parametrize("how", SLOWER_REFERENCE)
def test_the_report_and_the_exit_status_agree_on_a_file_that_rewrites_a_solution(tmp_path, how):
    course = _course_copy(tmp_path)
    solution = course / "solutions" / TRACK / STEPS[TRACK][3].file_name
    original = solution.read_text()
    attack = SLOWER_REFERENCE[how].format(solution=str(solution), slower=_as_step(1, 3))
    (course / "steps" / TRACK / STEPS[TRACK][3].file_name).write_text(_solution(3) + attack)
    done = _grade_copy(course, 3)
    time.sleep(0.5)  # a writer that escaped the grade would have written by now
    (entry,) = json.loads((course.parent / "r.json").read_text())["steps"]
    assert done.returncode in (0, 1), done.stdout + done.stderr
    assert entry["passed"] == (done.returncode == 0), (entry, done.stdout)
    assert ("0 passed, 1 failed" in done.stdout) == (done.returncode == 1)
    if sandbox.confinement().mode != "none":  # the write is refused: at import it fails the build
        assert solution.read_text() == original
        assert (how != "at import") or "importing step03_spatial_tiling.py failed" in entry["problems"][0], entry
    elif how == "at import" or solution.read_text() != original:
        assert (done.returncode, entry["build"]) == (1, "failed"), done.stdout
        assert "changed files the grader relies on (solutions/hopper/" in entry["problems"][0]


class _ChangedAfterTheLastStep:
    """A file check that sees a change only once the steps are graded: a late write of a process the
    student's file left behind."""

    def __init__(self, toolchain):
        self.checks = 0

    def changed(self) -> list[str]:
        self.checks += 1
        return ["solutions/hopper/step03.py"] if self.checks > 1 else []


def test_a_change_found_after_the_last_step_fails_it_in_the_report_and_the_exit_status(tmp_path, monkeypatch):
    from grader.judge.grade import StepResult

    passed = StepResult(step=3, file="steps/hopper/step03.py", build="passed")
    monkeypatch.setattr(cli, "detect_gpu", lambda: (None, None, 0))
    monkeypatch.setattr(cli.sandbox, "Watch", _ChangedAfterTheLastStep)
    monkeypatch.setattr(cli, "grade_step", lambda config, spec, watch: watch.changed() or passed)
    status = cli.main(["--step", "3", "--track", TRACK, "--json", str(tmp_path / "r.json")])
    (entry,) = json.loads((tmp_path / "r.json").read_text())["steps"]
    assert status == 1
    assert (entry["build"], entry["passed"]) == ("failed", False)
    assert "changed files the grader relies on (solutions/hopper/step03.py)" in entry["problems"][0]


def test_make_passes_each_variable_as_one_argument():
    done = subprocess.run(
        ["make", "-s", "grade", "STEP=3", "TRACK=hopper --impl solutions", f"PYTHON={sys.executable}"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2
    assert "unknown track 'hopper --impl solutions'" in done.stderr


@pytest.mark.parametrize(
    "args,message",
    [
        (["--step", "¹"], f"--step must be a number from 1 to {max(STEPS['blackwell'])} or"),  # no GPU: Blackwell
        (["--step", "3", "--shape", "²x128x64"], "--shape must look like"),
        (["--timeout", "nan"], "--timeout must be a number of seconds"),
        (["--timeout", "-5"], "--timeout must be a number of seconds"),
        (["--timeout", "0"], "--timeout must be a number of seconds"),
        (["--timeout", "inf"], "--timeout must be a number of seconds"),
        (["--seed", str(2**64)], "--seed must be a whole number from 0 to 2^64 - 1"),
        (["--seed", "-1"], "--seed must be a whole number"),
        (["--step", "3", "--shape", "65536x65536x64"], "too large: a matrix of it has more than 2^31 - 1 elements"),
        (["--json", "/"], "is a folder"),
        (["--json", str(REPO / "Makefile" / "r.json")], "is a file, not a folder"),
        (["--json", str(REPO / "grader" / "analysis" / "features.py")], "inside the course's own files"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(capsys, monkeypatch, args, message):
    monkeypatch.setattr(cli, "detect_gpu", lambda: (None, None, 0))
    status = cli.main(args)
    out, err = capsys.readouterr()
    assert status == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1 and out == ""


def test_a_shape_larger_than_the_gpu_is_refused_before_any_work(capsys, monkeypatch):
    monkeypatch.setattr(cli, "detect_gpu", lambda: ("NVIDIA H100 80GB HBM3", "sm_90a", 132))
    monkeypatch.setattr(cli, "gpu_memory_bytes", lambda: 16 * 2**30)
    status = cli.main(["--step", "3", "--shape", "32768x32768x32768"])
    assert status == 2
    assert "too large: needs" in capsys.readouterr().err
