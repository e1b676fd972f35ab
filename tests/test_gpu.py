"""GPU tests: the reference solutions pass, and deliberately broken kernels fail the way a student would see.

Broken kernels are the reference solutions with one line changed, written to a temporary tree that
the grader grades as if it were a student's steps/ folder.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from conftest import REPO, gpu_arch, without_static_checks
from grader.judge.grade import Config, grade_step
from grader.core.steps import STEPS

pytestmark = pytest.mark.gpu


def _track() -> str:
    return "hopper" if gpu_arch() == "sm_90a" else "blackwell"


def _config(impl_dir: Path, impl: str = "steps", timeout_s: float = 180.0, shapes=None) -> Config:
    import torch

    return Config(
        impl=impl,
        impl_dir=impl_dir,
        solutions_dir=REPO / "solutions",
        track=_track(),
        arch=gpu_arch(),
        gpu_name=torch.cuda.get_device_name(),
        sm_count=torch.cuda.get_device_properties(0).multi_processor_count,
        seed=1234,
        timeout_s=timeout_s,
        shapes=shapes,
    )


def _solution(step: int) -> str:
    return (REPO / "solutions" / _track() / STEPS[_track()][step].file_name).read_text()


def _write(tree: Path, step: int, source: str) -> Path:
    folder = tree / _track()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / STEPS[_track()][step].file_name).write_text(source)
    return tree


def _broken(tree: Path, step: int, pattern: str, replacement: str) -> Path:
    """Write step's reference solution with `pattern` replaced into tree/<track>/; return tree."""
    broken, count = re.subn(pattern, replacement, _solution(step))
    assert count > 0, f"the mutation {pattern!r} no longer matches step {step}'s solution"
    return _write(tree, step, broken)


def _present_solutions() -> list[int]:
    return [n for n, spec in STEPS[_track()].items() if (REPO / "solutions" / _track() / spec.file_name).exists()]


@pytest.mark.parametrize("step", _present_solutions())
def test_reference_solution_is_correct_and_fast_enough(step):
    result = grade_step(_config(REPO / "solutions", impl="solutions"), STEPS[_track()][step])
    assert (result.build, result.features, result.correctness, result.speed) == (
        "passed",
        "passed",
        "passed",
        "passed",
    ), result.problems


def test_a_kernel_that_skips_the_last_k_tile_fails(tmp_path, monkeypatch):
    # the static K-loop check rejects it on a CPU already (tests/test_integrity.py); here the comparison must
    without_static_checks(monkeypatch, _track(), 2)
    tree = _broken(tmp_path, 2, r"range\(K // BLK_K\)", "range(K // BLK_K - 1)")
    result = grade_step(_config(tree), STEPS[_track()][2])
    assert result.correctness == "failed"
    assert "wrong result at 128x128x64" in result.problems[0]


def test_tiles_a_kernel_never_writes_are_named(tmp_path, monkeypatch):
    without_static_checks(monkeypatch, _track(), 3)  # a grid one tile column short fails the grid check first
    tree = _broken(tmp_path, 3, r"T\.cta_id\(\[M // BLK_M, N // BLK_N\]\)", "T.cta_id([M // BLK_M, N // BLK_N - 1])")
    result = grade_step(_config(tree, shapes=((256, 384, 192),)), STEPS[_track()][3])
    shape = result.correctness_shapes[0]
    assert not shape["passed"]
    assert [tuple(t) for t in shape["unwritten_tiles"]] == [(0, 2), (1, 2)]
    assert "never written (still NaN): (0,2), (1,2)" in shape["message"]


def test_a_deadlocked_kernel_is_reported_and_grading_goes_on(tmp_path):
    tree = _broken(tmp_path, 4, r"(mbarrier\.init\.shared\.b64\(tma_bar[^,]*, T\.uint32\()1\)", r"\g<1>2)")
    _write(tree, 3, _solution(3))
    config = _config(tree, timeout_s=30.0, shapes=((256, 384, 192),))
    hung = grade_step(config, STEPS[_track()][4])
    assert hung.correctness == "failed"
    assert any("did not finish in 30 s" in p or "deadlock" in p for p in hung.problems), hung.problems
    after = grade_step(config, STEPS[_track()][3])
    assert after.correctness == "passed", after.problems


def test_a_correct_but_slow_kernel_fails_the_speed_rule(tmp_path, monkeypatch):
    # step 3's kernel (synchronous loads) handed in as step 5, timed against step 5's reference; the
    # static checks are set aside (it lacks step 5's stages) to reach the speed rule
    without_static_checks(monkeypatch, _track(), 5)
    tree = _write(tmp_path, 5, _solution(3).replace("def hgemm_v3(", "def hgemm_v5("))
    spec = dataclasses.replace(STEPS[_track()][5], timing_shapes=((2048, 2048, 2048),))
    result = grade_step(_config(tree, shapes=((256, 384, 192),)), spec)
    assert result.correctness == "passed", result.problems
    assert result.speed == "failed"
    assert any("the reference solution's time" in p for p in result.problems), result.problems


# Writebacks that land far past D: 512 MiB on Hopper (D stored element by element), 3 GiB on Blackwell
# (rows 2^22 past the tile). The Blackwell mutation is built and checked for sm_100a only.
PAST_THE_END = {
    "hopper": (r"n_st \+ acc_col\(lane_id, i\)\]", "n_st + (1 << 28) + acc_col(lane_id, i)]"),
    "blackwell": (r"Tx\.copy\(D\[m_thr, ", "Tx.copy(D[m_thr + (1 << 22), "),
}


def test_an_illegal_address_fails_its_step_only(tmp_path):
    tree = _broken(tmp_path, 3, *PAST_THE_END[_track()])
    config = _config(tree, shapes=((256, 384, 192),))
    crashed = grade_step(config, STEPS[_track()][3])
    assert crashed.correctness == "failed", crashed.problems
    assert any("illegal" in p and "an access past a buffer" in p for p in crashed.problems), crashed.problems
    after = grade_step(_config(REPO / "solutions", impl="solutions", shapes=((256, 384, 192),)), STEPS[_track()][3])
    assert after.correctness == "passed", after.problems
