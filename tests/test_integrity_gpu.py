"""Known-bad submissions that need a GPU: each is graded as failing, with the message a student reads.

Each is a reference solution with a few lines changed or appended, graded as a student's step.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import gpu_arch, without_static_checks
from test_gpu import _config, _solution, _track, _write
from test_integrity import compute_only_into_poison
from grader.judge.grade import grade_step
from grader.core.steps import STEPS

pytestmark = pytest.mark.gpu

SLOW_MATMUL = """
import torch, time
_matmul = torch.matmul
def _slow(*args, **kwargs):
    time.sleep(0.05)
    return _matmul(*args, **kwargs)
torch.matmul = _slow
"""
PASS_COMPARE = """
import grader.analysis.diagnosis as _d
_d.compare = lambda out, ref: _d.Verdict(True, 0.0, 0.0, [], [], "ok")
"""
FAST_TIMER = """
import grader.analysis.timing as _t
_t.median_ms_interleaved = lambda calls, *a, **k: {name: 1e-3 if name == "kernel" else 1.0 for name in calls}
"""


@pytest.mark.parametrize("attack", [SLOW_MATMUL, PASS_COMPARE, FAST_TIMER], ids=["torch.matmul", "compare", "timer"])
def test_patching_the_judge_from_the_student_file_changes_nothing(tmp_path, attack):
    # step 3's kernel as step 5 is correct and slow: a patched judge would pass it
    source = _solution(3).replace("def hgemm_v3(", "def hgemm_v5(") + attack
    result = grade_step(_config(_write(tmp_path, 5, source)), STEPS[_track()][5])
    assert not result.passed
    assert result.features == "failed", result.problems


def test_a_wrong_kernel_with_a_patched_comparison_is_still_wrong(tmp_path, monkeypatch):
    broken = re.sub(r"range\(K // BLK_K\)", "range(K // BLK_K - 1)", _solution(3)) + PASS_COMPARE
    without_static_checks(monkeypatch, _track(), 3)
    result = grade_step(_config(_write(tmp_path, 3, broken), shapes=((256, 384, 192),)), STEPS[_track()][3])
    assert result.correctness == "failed"
    assert any("wrong result at 256x384x192" in p for p in result.problems), result.problems


def test_an_honest_kernel_with_a_slowed_matmul_keeps_its_share(tmp_path):
    result = grade_step(_config(_write(tmp_path, 3, _solution(3) + SLOW_MATMUL)), STEPS[_track()][3])
    assert result.passed, result.problems
    assert all(t.share_of_cublas < 1.0 for t in result.timings), [t.share_of_cublas for t in result.timings]


def test_a_kernel_that_ignores_k_beyond_2048_fails_at_the_timed_shape(tmp_path, monkeypatch):
    broken = re.sub(r"range\(K // BLK_K\)", "range(min(K // BLK_K, 2048 // BLK_K))", _solution(3))
    without_static_checks(monkeypatch, _track(), 3)
    result = grade_step(_config(_write(tmp_path, 3, broken)), STEPS[_track()][3])
    assert result.correctness == "failed" or result.speed == "failed"
    assert any("wrong" in p for p in result.problems), result.problems


def test_a_kernel_right_only_at_the_listed_shapes_fails_at_the_drawn_shape(tmp_path):
    listed = sorted({*STEPS[_track()][3].correctness_shapes, *STEPS[_track()][3].timing_shapes})
    source = _solution(3).replace(
        "def hgemm_v3(M, N, K):", f"def hgemm_v3(M, N, K):\n    K = K if (M, N, K) in {listed!r} else K - 64"
    )
    result = grade_step(_config(_write(tmp_path, 3, source)), STEPS[_track()][3])
    assert not result.passed
    # at the drawn shape its K loop is one tile short: the static K-loop check sees it before the GPU does
    assert "failed" in (result.build, result.features, result.correctness), result.problems


def test_the_report_names_the_cubin_that_was_checked_and_run(tmp_path):
    result = grade_step(_config(_write(tmp_path, 3, _solution(3)), shapes=((256, 384, 192),)), STEPS[_track()][3])
    assert result.passed, result.problems
    assert all(len(digest) == 64 for digest in result.cubin_sha256.values())
    assert "256x384x192" in result.cubin_sha256


@pytest.mark.skipif("gpu_arch() != 'sm_90a'", reason="a mutation of the Hopper step 3 solution")
def test_a_kernel_that_works_only_into_a_poisoned_output_is_timed_doing_its_work(tmp_path):
    # every timed call writes into a fresh NaN-filled output: the kernel must compute each time, so
    # it is right and no faster than the reference (into a reused output it would time no work at all)
    result = grade_step(_config(_write(tmp_path, 3, compute_only_into_poison(_solution(3)))), STEPS["hopper"][3])
    assert result.correctness == "passed", result.problems
    assert result.timings and all(t.kernel_ms > 0.8 * t.reference_ms for t in result.timings), [
        (t.kernel_ms, t.reference_ms) for t in result.timings]
