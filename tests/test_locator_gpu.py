"""GPU tests of the deadlock locator: a hang is reported as who waited on which barrier, for which
phase, and grading goes on. The mutations are of the Hopper solutions; the hand-written hung kernel
runs on either track."""

from __future__ import annotations

import re
import shutil
import time

import pytest

from conftest import REPO, gpu_arch, without_static_checks
from grader.runs import debug_child
from grader.judge.grade import grade_step
from grader.core.steps import STEPS
from test_gpu import _broken, _config, _solution, _track, _write

pytestmark = pytest.mark.gpu
GRADER_TIMEOUT_S = 30.0
hopper_only = pytest.mark.skipif("gpu_arch() != 'sm_90a'", reason="mutations of the Hopper solutions")


def test_a_hung_kernel_of_known_geometry_is_located_exactly(tmp_path):
    import torch

    folder = tmp_path / _track()
    folder.mkdir()
    shutil.copy(REPO / "tests" / "kernels" / "hung_step.py", folder / STEPS[_track()][4].file_name)
    sm_count = torch.cuda.get_device_properties(0).multi_processor_count
    request = debug_child.LocateRequest(str(tmp_path), _track(), 4, gpu_arch(), sm_count, (128, 128, 64), 0)
    started = time.monotonic()
    located = debug_child.locate(request)
    assert (located.error, located.finished, located.overflowed) == ("", True, False)
    assert time.monotonic() - started < 45

    labels = {b["offset"]: f"{b['name']}[{b['index']}]" for b in located.barriers}
    got = sorted((r["cta"][0], r["thread"] // 32, r["thread"] % 32, labels[r["barrier_offset"]]) for r in located.records)
    expected = sorted(
        (cta, warp, lane, barrier) for (cta, warp), (barrier, *_) in _hung_module_geometry().items() for lane in range(32)
    )
    assert got == expected  # every stuck thread once, none other, each on its own barrier
    for r in located.records:
        barrier, phase, pending, _ = _hung_module_geometry()[(r["cta"][0], r["thread"] // 32)]
        assert (r["phase"], r["current_parity"]) == (phase, phase), r

    text = "\n".join(debug_child.explain(located))
    assert "CTA 2, warp 1 (all lanes): waited on ready[0] for phase 0 to complete" in text
    # the raw barrier word does not decode to a pending count on an H100: the report must not invent one
    assert "it is still in phase 0" in text and "1 of 32 pending" in text or "could not be read" in text
    assert "CTA 5, warp 3 (all lanes): waited on never[1] for phase 0 to complete" in text


def _hung_module_geometry() -> dict:
    from test_locator import _hung_module

    return _hung_module().HUNG


# (step, pattern, replacement, shape, text the report must contain)
MUTATIONS = {
    "init_count_2": (
        4,
        r"(mbarrier\.init\.shared\.b64\(tma_bar[^,]*, T\.uint32\()1\)",
        r"\g<1>2)",
        (256, 384, 192),
        [
            "CTA 0-5, warps 0-3 (all lanes): waited on tma_bar[0] for phase 0 to complete",
            "it is still in phase 0",
        ],
    ),
    "tma_loop_one_trip_short": (
        5,
        r"if k \+ PIPE_DEPTH < K_TILES:",
        "if k + PIPE_DEPTH < K_TILES - 1:",
        (256, 384, 192),  # 3 K tiles: K tile 2 (stage 0, its second use: phase 1) is never loaded
        [
            "CTA 0-5, warps 0-3 (all lanes): waited on tma_bar[0] for phase 1 to complete",
            "it is still in phase 1",
        ],
    ),
}


@hopper_only
@pytest.mark.parametrize("name", MUTATIONS)
def test_a_hang_is_located_in_the_grade_and_grading_goes_on(tmp_path, monkeypatch, name):
    step, pattern, replacement, shape, expected = MUTATIONS[name]
    without_static_checks(monkeypatch, "hopper", step)  # a K loop one trip short fails them on the CPU first
    tree = _broken(tmp_path, step, pattern, replacement)
    _write(tree, 3, _solution(3))
    config = _config(tree, timeout_s=GRADER_TIMEOUT_S, shapes=(shape,))
    started = time.monotonic()
    hung = grade_step(config, STEPS["hopper"][step])
    assert time.monotonic() - started < GRADER_TIMEOUT_S + debug_child.CHILD_TIMEOUT_S + 30
    assert hung.correctness == "failed"
    report = "\n".join(hung.problems)
    print(f"\n[{name}]\n{report}")  # the real report, for the README (pytest -s)
    assert "where it hangs (debug build at " in report, report
    for text in expected:
        assert text in report, report
    after = grade_step(config, STEPS["hopper"][3])
    assert after.correctness == "passed", after.problems


SAME_STARTING_PHASE = (7, r"produce = PipelineState\(PIPE_DEPTH, 1\)", "produce = PipelineState(PIPE_DEPTH, 0)",
                       (256, 384, 192))


@hopper_only
def test_producer_and_consumer_starting_on_the_same_phase_are_located(tmp_path, monkeypatch):
    # Step 7's producer starting on phase 0, the consumer's: its first wait on mma2tma[0] needs a release
    # that needs a load that needs that wait, so every CTA stops at its first stage, both sides at once.
    step, pattern, replacement, shape = SAME_STARTING_PHASE
    without_static_checks(monkeypatch, "hopper", step)
    tree = _broken(tmp_path, step, pattern, replacement)
    _write(tree, 3, _solution(3))
    config = _config(tree, timeout_s=GRADER_TIMEOUT_S, shapes=(shape,))
    started = time.monotonic()
    hung = grade_step(config, STEPS["hopper"][7])
    assert time.monotonic() - started < GRADER_TIMEOUT_S + debug_child.CHILD_TIMEOUT_S + 30
    report = "\n".join(hung.problems)
    print(f"\n[same starting phase]\n{report}")
    assert hung.correctness == "failed"
    assert "where it hangs" in report, f"expected a hang, got: {report}"
    # the barriers by the kernel's own names (the TIR calls them buffer and mma2tma_buf)
    for who, barrier in (("warp 0 \\(lane \\d+\\)", "mma2tma"), ("warps 4-7 \\(all lanes\\)", "tma2mma")):
        assert re.search(rf"CTA [0-9,-]+, {who}: waited on {barrier}\[0\] for phase 0 to complete .*; "
                         r"it is still in phase 0", report), report
    after = grade_step(config, STEPS["hopper"][3])
    assert after.correctness == "passed", after.problems


@hopper_only
def test_no_wait_of_a_correct_kernel_gives_up_in_the_debug_build():
    import torch

    sm_count = torch.cuda.get_device_properties(0).multi_processor_count
    request = debug_child.LocateRequest(str(REPO / "solutions"), "hopper", 5, "sm_90a", sm_count, (640, 384, 1088), 3)
    located = debug_child.locate(request)
    assert (located.records, located.finished, located.error) == ([], True, "")
