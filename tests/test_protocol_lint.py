"""grader/analysis/protocol_lint.py on small hand-written kernel bodies (no build): the reasoning the known-bad
suite relies on, one fact per test."""

from __future__ import annotations

import dataclasses

import pytest

from grader.analysis import protocol_lint as lint
from grader.core.build import Artifacts

TMA = "tvm_builtin_ptx_cp_async_bulk_tensor_g2s_cluster(dst, map, bar);"


def _kernel(*body: str, threads: int = 128, params: str = "const __grid_constant__ CUtensorMap A_tensormap, "
            "const __grid_constant__ CUtensorMap B_tensormap") -> Artifacts:
    source = "\n".join([f'extern "C" __global__ void __launch_bounds__({threads}) kernel_kernel({params}) {{',
                        *body, "}"])
    return Artifacts(source, "", "", (1, 1, 1), threads, (1, 1, 1), [(128, 64), (128, 64)], False, 0.0)


@pytest.mark.parametrize("guards,threads", [
    (["if ((warp_id_in_cta % 4) == 0) {", "if (tvm_builtin_elect_one_sync_op()) {"], 1),
    (["if (tvm_builtin_elect_one_sync_op()) {"], 4),  # elect_sync alone: one lane of every warp
    (["if ((warp_id_in_cta % 4) == 0) {"], 32),  # the warp test alone: the whole warp
    (["if ((((int)threadIdx.x) % 32) == 0) {"], 4),
    (["if (((int)threadIdx.x) == 0) {"], 1),
])
def test_who_runs_a_call(guards, threads):
    art = _kernel(*guards, TMA, *["}"] * len(guards))
    (site,) = [s for s in lint.statements(art.cuda_source) if lint.TMA_LOAD.search(s.text)]
    assert len(lint.threads_running(site, 128)) == threads
    assert lint.one_thread(lint.TMA_LOAD)(art, 1) == (threads == 1)


def test_one_elected_thread_per_warpgroup_role_is_one_thread():
    art = _kernel("if ((warp_id_in_cta >> 2) != 0) {", "if ((warp_id_in_cta % 4) == 0) {",
                  "if (tvm_builtin_elect_one_sync_op()) {", TMA, "}", "}", "}", threads=384)
    assert lint.one_thread(lint.TMA_LOAD)(art, 1)  # warps 4 and 8: one thread in each consumer warpgroup


def test_runs_per_tile_applies_guards_on_loop_variables():
    art = _kernel("while (1) {", "for (int ring = 0; ring < 5; ++ring) {", "if (ring < 4) {", TMA, "}", "}", "}")
    (site,) = [s for s in lint.statements(art.cuda_source) if lint.TMA_LOAD.search(s.text)]
    assert lint.runs_per_tile(site) == 4


def test_a_phase_assigned_in_the_loop_flips_and_a_fixed_one_does_not():
    wait = "tvm_builtin_cuda_mbarrier_wait((&(((uint64_t*)pool_buf_ptr)[0])), phase_ptr[0]);"
    flips = _kernel("for (int k = 0; k < 8; ++k) {", wait, "phase_ptr[0] = (phase_ptr[0] ^ 1);", "}")
    fixed = _kernel("for (int k = 0; k < 8; ++k) {", wait, "}")
    assert lint.phases_flip(flips, 8) and not lint.phases_flip(fixed, 8)


def test_an_operand_passed_as_a_pointer_is_not_loaded_by_tma():
    art = _kernel("for (int k = 0; k < 2; ++k) {", TMA, TMA, "}")
    assert lint.every_operand_by_tma(art, 2)
    pointer = _kernel("for (int k = 0; k < 2; ++k) {", TMA, "}",
                      params="const __grid_constant__ CUtensorMap A_tensormap, half* __restrict__ B_ptr")
    assert not lint.every_operand_by_tma(pointer, 2)


@pytest.mark.parametrize("shared_bytes,fits", [(232448, True), (232449, False)])
def test_shared_memory_fits_the_227_kib_of_one_cta(shared_bytes, fits):
    art = dataclasses.replace(_kernel(TMA), shared_bytes=shared_bytes)
    assert lint.shared_memory_fits(art, 1) == fits


def _setmaxnreg(form: str, cap: int) -> str:
    return f"tvm_builtin_ptx_setmaxnreg_{form}_sync_aligned_u32_{cap}();"


@pytest.mark.parametrize("consumer_cap,fits", [(232, True), (240, False)])
def test_the_setmaxnreg_caps_of_every_warpgroup_fit_the_register_file(consumer_cap, fits):
    # a producer warpgroup and two consumers: 128 x (40 + 2 x 232) = 64512 fit, 128 x (40 + 2 x 240) = 66560 do not
    art = _kernel("if ((warp_id_in_cta >> 2) == 0) {", _setmaxnreg("dec", 40), "} else {",
                  _setmaxnreg("inc", consumer_cap), "}", threads=384)
    assert lint.registers_fit_the_file(art, 1) == fits


def test_setmaxnreg_under_a_warp_test_is_not_run_by_the_whole_warpgroup():
    art = _kernel("if ((warp_id_in_cta % 4) == 0) {", _setmaxnreg("dec", 40), "}", threads=256)
    assert not lint.whole_warpgroups(lint.SETMAXNREG)(art, 1)


@pytest.mark.parametrize("sass,spills", [("        /*0170*/                   STL [R1+0x100], R2 ;", True),
                                         ("        /*02e0*/                   LDL.64 R4, [R1+0x8] ;", True),
                                         ("        /*0290*/                   LDS R0, [R1+0x100] ;", False)])
def test_local_memory_in_the_sass_is_a_spill(sass, spills):
    art = dataclasses.replace(_kernel(), sass=sass)
    assert lint.no_register_spills(art, 1) == (not spills)
