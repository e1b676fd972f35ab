"""Every reference solution builds and shows its step's features; kernels that skip a feature fail."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
from tvm.script.parser.core.parser import ScriptMacro

from conftest import REPO, TRACK_ARCH, build_step, present_steps
from grader.core import build
from grader.analysis import features
from grader.core.steps import DEFAULT_SM_COUNT, STEPS, static_check_shape


def _failed(track: str, step: int, artifacts, shape, arch) -> set[str]:
    launch = features.Launch(shape, DEFAULT_SM_COUNT[arch])
    return {check.name for check in features.run_checks(track, step, artifacts, launch) if not check.passed}


def _largest(track: str, step: int):
    return static_check_shape(STEPS[track][step].correctness_shapes)


def test_a_macro_expansion_finds_the_parser_without_reading_the_stack(monkeypatch):
    """kernel_factory's lookup of the TIRx parser at each macro expansion walks the frames: TVM's own read the source
    line of every frame on the stack (inspect.getouterframes), three quarters of step 12's parse."""
    reads = []
    real = inspect.getouterframes
    monkeypatch.setattr(inspect, "getouterframes", lambda *args, **kwargs: reads.append(1) or real(*args, **kwargs))
    spec = STEPS["hopper"][12]
    factory = build.kernel_factory(REPO / "solutions", "hopper", spec)
    reads_per_lookup = []
    lookup = ScriptMacro._find_parser_def

    def counted(macro):
        before = len(reads)
        parser = lookup(macro)
        reads_per_lookup.append(len(reads) - before)
        return parser

    monkeypatch.setattr(ScriptMacro, "_find_parser_def", counted)
    build.make_prim_func(factory, spec, (257, 264, 4104), DEFAULT_SM_COUNT["sm_90a"])
    assert len(reads_per_lookup) > 10  # step 12 expands its macros
    assert sum(reads_per_lookup) == 0, f"{sum(reads_per_lookup)} of {len(reads_per_lookup)} lookups read the stack"


@pytest.mark.parametrize("track,step", present_steps("solutions"))
def test_solution_builds_and_shows_its_features(track, step):
    arch = TRACK_ARCH[track]
    artifacts = build_step(REPO / "solutions", track, step)
    assert _failed(track, step, artifacts, _largest(track, step), arch) == set()


@pytest.mark.parametrize("track,step", present_steps("steps"))
def test_untouched_skeleton_is_not_implemented(track, step):
    with pytest.raises(build.StepNotImplemented):
        build_step(REPO / "steps", track, step)


def _need(track: str, *steps: int) -> None:
    missing = [s for s in steps if not (REPO / "solutions" / track / STEPS[track][s].file_name).exists()]
    if missing:
        pytest.skip(f"solutions/{track} lacks steps {missing}")


@pytest.mark.parametrize("step", [1, 3])
def test_blackwell_mma_checks_reject_a_hopper_kernel(step):
    _need("hopper", step)
    artifacts = build_step(REPO / "solutions", "hopper", step)
    failed = _failed("blackwell", step, artifacts, _largest("blackwell", step), "sm_100a")
    assert {features.TCGEN05_MMA.name, features.TCGEN05_COMMIT.name, features.TMEM_LOAD.name} <= failed


def test_wgmma_check_rejects_a_blackwell_kernel():
    _need("blackwell", 1)
    artifacts = build_step(REPO / "solutions", "blackwell", 1)
    assert features.WGMMA.name in _failed("hopper", 1, artifacts, _largest("hopper", 1), "sm_90a")


# Submitting step N-1's kernel as step N must fail exactly the features step N adds.
NEW_FEATURES = {
    # step 3's kernel also reads A and B through plain pointers, no K tile by TMA: the protocol checks name that too
    4: {features.TMA_LOAD.name, features.EXPECT_TX.name, features.TMA_STORE.name, features.TMA_EVERY_OPERAND.name,
        features.EVERY_K_TILE_LOADED.name},
    5: {features.TWO_STAGES.name},
    6: {features.TILE_LOOP.name},  # and the track's persistent grid (GRID_CHECK)
}
# Hopper's step 6 keeps the two CTAs an SM holds; every Blackwell CTA takes all of TMEM, so there it is one per SM
GRID_CHECK = {"hopper": features.GRID_RESIDENT.name, "blackwell": features.GRID_SMS.name}


@pytest.mark.parametrize("track", list(TRACK_ARCH))
@pytest.mark.parametrize("step", sorted(NEW_FEATURES))
def test_previous_step_kernel_lacks_this_steps_features(track, step):
    _need(track, step - 1, step)
    shape = _largest(track, step)
    artifacts = build_step(REPO / "solutions", track, step - 1, shape=shape)
    expected = NEW_FEATURES[step] | ({GRID_CHECK[track]} if step == 6 else set())
    assert _failed(track, step, artifacts, shape, TRACK_ARCH[track]) == expected


# Blackwell steps 7-10 differ from their Hopper twins, so their new features are listed per track.
BLACKWELL_NEW_FEATURES = {
    7: {features.WARP_ROLES.name, features.THREADS_256.name, features.FOUR_STAGES.name},
    8: {features.FULL_RING.name},
    9: {features.CLUSTER_PAIR.name, features.PAIR_MMA.name},
    10: {features.THREADS_384.name, features.TWO_MMA_ISSUERS.name},
    # step 10's kernel at step 11's ragged static-check shape (K = 568) walks K // 64 K tiles: one short
    11: {features.K_COVERED.name},
}


@pytest.mark.parametrize("step", sorted(BLACKWELL_NEW_FEATURES))
def test_previous_blackwell_kernel_lacks_this_steps_features(step):
    _need("blackwell", step - 1, step)
    shape = _largest("blackwell", step)
    artifacts = build_step(REPO / "solutions", "blackwell", step - 1, shape=shape)
    assert _failed("blackwell", step, artifacts, shape, "sm_100a") == BLACKWELL_NEW_FEATURES[step]


HOPPER_NEW_FEATURES = {
    7: {features.SETMAXREG.name, features.PRODUCER_CONSUMER.name, features.THREADS_256.name, features.FOUR_STAGES.name},
    8: {features.FULL_RING.name},
    9: {features.CLUSTER_PAIR.name, features.MULTICAST_TMA.name},
    10: {features.WGMMA_256.name, features.THREADS_384.name, features.TWO_CONSUMERS.name},
}


@pytest.mark.parametrize("step", sorted(HOPPER_NEW_FEATURES))
def test_previous_hopper_kernel_lacks_this_steps_features(step):
    _need("hopper", step - 1, step)
    shape = _largest("hopper", step)
    artifacts = build_step(REPO / "solutions", "hopper", step - 1, shape=shape)
    assert _failed("hopper", step, artifacts, shape, "sm_90a") == HOPPER_NEW_FEATURES[step]


def test_setmaxnreg_check_fails_without_a_register_cap_at_entry(tmp_path):
    """Without launch_bounds_min_blocks_per_sm, ptxas ignores setmaxnreg (C7508): the check must see it."""
    _need("hopper", 7)
    source = (REPO / "solutions" / "hopper" / "step07_warp_specialization.py").read_text()
    uncapped = source.replace('        T.attr({"tirx.launch_bounds_min_blocks_per_sm": 1})\n', "")
    assert uncapped != source
    (tmp_path / "hopper").mkdir()
    (tmp_path / "hopper" / "step07_warp_specialization.py").write_text(uncapped)
    artifacts = build_step(tmp_path, "hopper", 7)
    assert _failed("hopper", 7, artifacts, _largest("hopper", 7), "sm_90a") == {features.SETMAXNREG_APPLIED.name}


def test_role_check_rejects_mma_and_writeback_in_one_warp():
    """Step 7's kernel with the writeback moved into the MMA warp fails only the role check."""
    _need("blackwell", 7)
    artifacts = build_step(REPO / "solutions", "blackwell", 7)
    source = artifacts.cuda_source.replace("if ((warp_id_in_cta >> 2) == 0)", "if (warp_id_in_cta == 4)", 1)
    assert source != artifacts.cuda_source
    merged = dataclasses.replace(artifacts, cuda_source=source)
    assert _failed("blackwell", 7, merged, _largest("blackwell", 7), "sm_100a") == {features.WARP_ROLES.name}

@pytest.mark.parametrize("track", list(TRACK_ARCH))
def test_grid_check_rejects_a_persistent_kernel_as_one_cta_per_tile(track):
    _need(track, 6)
    shape = _largest(track, 6)
    artifacts = build_step(REPO / "solutions", track, 6, shape=shape)
    assert features.GRID_TILES.name in _failed(track, 3, artifacts, shape, TRACK_ARCH[track])
