"""The correctness verdict: right answers pass, each kind of wrong answer is named."""

from __future__ import annotations

import torch

from grader.analysis import diagnosis


def _problem(m=256, n=384, k=1024, seed=0):
    generator = torch.Generator().manual_seed(seed)
    a = torch.randn((m, k), generator=generator).half()
    b = torch.randn((n, k), generator=generator).half()
    return a, b, diagnosis.reference(a, b)


def test_fp16_rounded_exact_result_passes():
    _, _, ref = _problem()
    verdict = diagnosis.compare(ref.half(), ref)
    assert verdict.passed and verdict.message == "ok"
    assert verdict.max_error < diagnosis.RTOL


def test_a_different_summation_order_passes():
    a, b, ref = _problem(k=4096)
    halves = a[:, :2048].float() @ b[:, :2048].float().T + a[:, 2048:].float() @ b[:, 2048:].float().T
    assert diagnosis.compare(halves.half(), ref).passed


def test_skipping_one_k_tile_fails_everywhere():
    a, b, ref = _problem(k=192)
    partial = (a[:, 64:].float() @ b[:, 64:].float().T).half()
    verdict = diagnosis.compare(partial, ref)
    assert not verdict.passed
    assert len(verdict.wrong_tiles) == 2 * 3
    assert verdict.unwritten_tiles == []
    assert "written with wrong values" in verdict.message


def test_a_tile_left_unwritten_is_named():
    _, _, ref = _problem()
    out = ref.half()
    out[128:256, 256:384] = float("nan")
    verdict = diagnosis.compare(out, ref)
    assert not verdict.passed
    assert verdict.unwritten_tiles == [(1, 2)]
    assert verdict.wrong_tiles == [(1, 2)]
    assert "never written (still NaN): (1,2)" in verdict.message
    assert abs(verdict.wrong_fraction - 1 / 6) < 1e-6


def test_one_wrong_element_fails_its_tile_only():
    _, _, ref = _problem()
    out = ref.half()
    out[5, 300] += 1.0
    verdict = diagnosis.compare(out, ref)
    assert verdict.wrong_tiles == [(0, 2)]
    assert verdict.unwritten_tiles == []


def test_a_row_stripe_error_lists_tiles_and_counts_the_rest():
    _, _, ref = _problem(m=1280, n=1280, k=64)
    out = ref.half()
    out[:, :] *= 1.01
    verdict = diagnosis.compare(out, ref)
    assert len(verdict.wrong_tiles) == 100
    assert "and 92 more" in verdict.message
