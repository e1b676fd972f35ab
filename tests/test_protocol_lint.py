"""grader/analysis/protocol_lint.py on small hand-written kernel bodies (no build): the reasoning the known-bad
suite relies on, one fact per test."""

from __future__ import annotations

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
