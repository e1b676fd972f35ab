"""Static checks: the hardware features each step exists to teach, read off its PTX, SASS and launch.

This table is the whole grade on a machine without a GPU, and an anti-cheat everywhere: a kernel
that skips the step's technique fails here even when its numbers are right.
"""

from __future__ import annotations

import math

import re
from dataclasses import dataclass
from typing import Callable

from grader.analysis import protocol_lint as lint
from grader.core.build import Artifacts
from grader.core.steps import TILE_128, Shape


@dataclass(frozen=True)
class Launch:
    shape: Shape
    sm_count: int


@dataclass(frozen=True)
class Check:
    name: str
    passes: Callable[[Artifacts, Launch], bool]
    hint: str
    kind: str = "feature"  # "feature": the step's technique is absent; "protocol": it is used wrongly


def _sass(pattern: str) -> Callable[[Artifacts, Launch], bool]:
    return lambda art, _: re.search(pattern, art.sass) is not None


def _ptx(pattern: str) -> Callable[[Artifacts, Launch], bool]:
    return lambda art, _: re.search(pattern, art.ptx) is not None


def _ctas(art: Artifacts) -> int:
    return art.grid[0] * art.grid[1] * art.grid[2]


def _one_cta_per_tile(art: Artifacts, launch: Launch) -> bool:
    m, n, _ = launch.shape
    return _ctas(art) == (m // 128) * (n // 128)


def _one_cta_per_sm(art: Artifacts, launch: Launch) -> bool:
    return _ctas(art) == launch.sm_count


SMEM_PER_SM = 228 * 1024  # what an SM of sm_90 / sm_100 shares among its CTAs
SMEM_RESERVED_PER_CTA = 1024  # the runtime keeps 1 KiB of each CTA's share for itself


def _resident_grid(art: Artifacts, launch: Launch) -> bool:
    """As many CTAs as the GPU holds at once: sm_count times the CTAs whose shared memory fits an SM.
    A CTA too large for an SM is the shared-memory check's finding, not this one's: it counts as one per SM."""
    fit = max(1, SMEM_PER_SM // (art.shared_bytes + SMEM_RESERVED_PER_CTA))
    return _ctas(art) == launch.sm_count * fit


def _staged_operands(art: Artifacts, _: Launch) -> bool:
    """A and B each live in a shared buffer of shape (stages >= 2, 128, 64)."""
    staged = [shape for shape in art.shared_fp16_buffers if len(shape) == 3 and shape[0] >= 2 and shape[1:] == (128, 64)]
    return len(staged) >= 2

TCGEN05_MMA = Check("tcgen05 MMA (UTCHMMA)", _sass(r"\bUTCHMMA\b"), "issue Tx.gemm_async(..., dispatch=\"tcgen05\")")
TCGEN05_COMMIT = Check(
    "tcgen05.commit onto an mbarrier (UTCBAR)", _sass(r"\bUTCBAR\b"), "commit the MMA onto mma_bar"
)
TMEM_LOAD = Check("TMEM -> registers (LDTM)", _sass(r"\bLDTM\b"), "read the accumulator with Tx.wg.copy_async from TMEM")
WGMMA = Check(
    "wgmma m64n128k16 (HGMMA.64x128x16)", _sass(r"\bHGMMA\.64x128x16\.F32"), "issue wgmma.mma_async m64n128k16"
)
GRID_TILES = Check(
    "grid = one CTA per 128x128 output tile", _one_cta_per_tile, "launch T.cta_id([M // 128, N // 128])"
)
TMA_LOAD = Check(
    "TMA loads (UTMALDG)", _sass(r"\bUTMALDG\b"), "load A and B with Tx.copy_async(..., dispatch=\"tma_auto\")"
)
EXPECT_TX = Check(
    "mbarrier expect-tx byte count",
    _ptx(r"mbarrier\.arrive\.expect_tx"),
    "arm the TMA barrier with mbarrier.arrive.expect_tx(bytes) (TMABar.arrive(stage, bytes); a plain MBarrier's "
    "arrive takes no byte count: its second argument is a remote CTA rank)",
)
TMA_STORE = Check(
    "TMA store of D (UTMASTG)", _sass(r"\bUTMASTG\b"), "store D from shared memory with a TMA copy_async"
)
TWO_STAGES = Check(
    "A and B staged in >= 2 shared-memory buffers",
    _staged_operands,
    "allocate A and B as (PIPE_DEPTH=2, 128, 64) buffers",
)
GRID_SMS = Check("grid = one CTA per SM", _one_cta_per_sm, "launch T.cta_id([sm_count])")
GRID_RESIDENT = Check(
    "grid = the CTAs the GPU holds at once",
    _resident_grid,
    "launch sm_count times the CTAs one SM holds at once (228 KiB of shared memory per SM, "
    "1 KiB of it reserved per CTA) and give the scheduler the same number",
)
TILE_LOOP = Check(
    "a loop over output tiles in each CTA",
    lambda art, _: art.has_tile_loop,
    "loop `while scheduler.valid(): ... scheduler.next_tile()`",
)

_BLACKWELL_MMA = [TCGEN05_MMA, TCGEN05_COMMIT, TMEM_LOAD]
_TMA = [TMA_LOAD, EXPECT_TX, TMA_STORE]

CHECKS: dict[str, dict[int, list[Check]]] = {
    "blackwell": {
        1: _BLACKWELL_MMA,
        2: _BLACKWELL_MMA,
        3: _BLACKWELL_MMA + [GRID_TILES],
        4: _BLACKWELL_MMA + [GRID_TILES] + _TMA,
        5: _BLACKWELL_MMA + [GRID_TILES] + _TMA + [TWO_STAGES],
        6: _BLACKWELL_MMA + _TMA + [TWO_STAGES, GRID_SMS, TILE_LOOP],
    },
    "hopper": {
        1: [WGMMA],
        2: [WGMMA],
        3: [WGMMA, GRID_TILES],
        4: [WGMMA, GRID_TILES] + _TMA,
        5: [WGMMA, GRID_TILES] + _TMA + [TWO_STAGES],
        6: [WGMMA] + _TMA + [TWO_STAGES, GRID_RESIDENT, TILE_LOOP],
    },
}



# ---- Blackwell steps 7-10: warp roles, deeper pipeline, CTA pair, two consumers ----
# Which warps issue an operation is read off the generated CUDA: the `if` conditions around each
# call, evaluated for every thread of the CTA (grader/analysis/protocol_lint.py). Conditions that do not
# depend on the thread (the cluster rank, loop bounds) count as true: they narrow CTAs, not warps.

def issuing_warps(art: Artifacts, call: re.Pattern) -> set[int]:
    """The warps of the CTA that can reach a line matching `call` inside the kernel body."""
    return {
        warp
        for statement in lint.statements(art.cuda_source) if call.search(statement.text)
        for warp, _ in lint.threads_running(statement, art.threads_per_cta)
    }


def _separate_roles(art: Artifacts, _: Launch) -> bool:
    """TMA loads, MMAs and TMEM loads are issued by three disjoint, non-empty sets of warps."""
    roles = [issuing_warps(art, call) for call in (lint.TMA_LOAD, lint.TCGEN05_MMA, lint.TMEM_LOAD)]
    return all(roles) and all(not (a & b) for i, a in enumerate(roles) for b in roles[i + 1 :])


def _stages_at_least(stages: int) -> Callable[[Artifacts, Launch], bool]:
    """A and B each live in a shared buffer of (stages, ..., 128 or 256 rows, 64) with at least `stages` stages."""

    def passes(art: Artifacts, _: Launch) -> bool:
        staged = [
            s for s in art.shared_fp16_buffers if len(s) >= 3 and s[0] >= stages and s[-2] in (128, 256) and s[-1] == 64
        ]
        return len(staged) >= 2

    return passes


def _threads(count: int) -> Callable[[Artifacts, Launch], bool]:
    return lambda art, _: art.threads_per_cta == count


THREADS_256 = Check("256 threads per CTA (two warpgroups)", _threads(256), "declare T.warpgroup_id([2])")
THREADS_384 = Check("384 threads per CTA (three warpgroups)", _threads(384), "declare T.warpgroup_id([3])")
WARP_ROLES = Check(
    "TMA loads, MMAs and TMEM loads issued by different warps",
    _separate_roles,
    "give each role its own branch on the warpgroup / warp id (producer, MMA, writeback)",
)
# the name states the goal, not the depth: check names stand in every report, hints only in a failed check's
FOUR_STAGES = Check("the ring leaves the producer stages to load ahead", _stages_at_least(4),
                    "four stages of A and B: beside the stages the MMA side still reads or waits on, the producer "
                    "needs free ones to load ahead into")


def _full_ring(art: Artifacts, _: Launch) -> bool:
    """A and B in as many stages as fit: one more stage would not fit the 227 KiB a CTA may take."""
    staged = [s for s in art.shared_fp16_buffers if len(s) == 3 and s[-2] in (128, 256) and s[-1] == 64]
    if len(staged) < 2:
        return False
    stage_bytes = sum(2 * math.prod(s[1:]) for s in staged)
    return art.shared_bytes + stage_bytes > lint.SMEM_PER_CTA


FULL_RING = Check(
    "A and B staged in as many stages as shared memory holds",
    _full_ring,
    "derive PIPE_DEPTH from the 227 KiB a CTA may use, less Dsmem and the barriers' KiB",
)
CLUSTER_PAIR = Check(
    "clusters of 2 CTAs", lambda art, _: art.cluster == (2, 1, 1), "declare T.cta_id_in_cluster([2, 1])"
)
PAIR_MMA = Check(
    "tcgen05.mma.cta_group::2 (one MMA for the CTA pair)",
    _ptx(r"tcgen05\.mma\.cta_group::2"),
    "Tx.gemm_async(..., cta_group=2), issued by CTA 0 of the pair",
)
TWO_MMA_ISSUERS = Check(
    "MMAs issued by two warps",
    lambda art, _: len(issuing_warps(art, lint.TCGEN05_MMA)) >= 2,
    "one MMA warp per consumer, each into its own TMEM columns",
)

_WARP_SPECIALIZED = _BLACKWELL_MMA + _TMA + [GRID_SMS, TILE_LOOP, WARP_ROLES]
CHECKS["blackwell"].update(
    {
        7: _WARP_SPECIALIZED + [FOUR_STAGES, THREADS_256],
        8: _WARP_SPECIALIZED + [FULL_RING, THREADS_256],
        9: _WARP_SPECIALIZED + [FULL_RING, THREADS_256, CLUSTER_PAIR, PAIR_MMA],
    }
)
# steps 11 and 12 keep step 10's cluster tile: 11 changes the edges, 12 only the K ranges of the units
CHECKS["blackwell"].update({step: _WARP_SPECIALIZED + [FULL_RING, THREADS_384, CLUSTER_PAIR, PAIR_MMA, TWO_MMA_ISSUERS]
                            for step in (10, 11, 12)})


# ---- Hopper steps 7-10: producer/consumer warpgroups, setmaxnreg, deeper pipeline, multicast, two consumers ----
def _producer_and_consumers(art: Artifacts, _: Launch) -> bool:
    """TMA loads and wgmmas are issued by disjoint, non-empty sets of warps."""
    loaders, multipliers = issuing_warps(art, lint.TMA_LOAD), issuing_warps(art, lint.WGMMA)
    return bool(loaders) and bool(multipliers) and not (loaders & multipliers)


def _two_consumer_warpgroups(art: Artifacts, _: Launch) -> bool:
    return len({warp // 4 for warp in issuing_warps(art, lint.WGMMA)}) >= 2


SETMAXREG = Check(
    "setmaxnreg: the producer gives registers to the consumer(s)",
    lambda art, _: all(re.search(rf"setmaxnreg\.{form}\b", art.ptx) for form in ("dec", "inc")),
    "setmaxnreg.dec (T.ptx.setmaxnreg.dec.sync.aligned.u32) in the producer, .inc in the consumer(s)",
)
PRODUCER_CONSUMER = Check(
    "TMA loads and wgmmas issued by different warpgroups",
    _producer_and_consumers,
    "a producer branch (one elected thread issues the TMA) and a consumer branch (issues wgmma) on the warpgroup id",
)
MULTICAST_TMA = Check(
    "multicast TMA load (UTMALDG...MULTICAST)",
    _sass(r"\bUTMALDG\.\w+\.MULTICAST\b"),
    "load this CTA's part of the shared operand with Tx.copy_async(..., cta_mask=0b11)",
)
WGMMA_256 = Check(
    "wgmma m64n256k16 (HGMMA.64x256x16)", _sass(r"\bHGMMA\.64x256x16\.F32"), "issue wgmma_64x256x16 per consumer"
)
WGMMA_PER_SHAPE = Check(
    "wgmma m64nNk16, N a multiple of 8 from 16 to 256 (HGMMA.64xNx16)",
    _sass(rf"\bHGMMA\.64x({'|'.join(str(n) for n in range(16, 257, 8))})x16\.F32"),
    "issue wgmma_64xNx16 per consumer, N its columns of the tile the host chose for the shape",
)
TWO_CONSUMERS = Check(
    "wgmmas issued by two consumer warpgroups",
    _two_consumer_warpgroups,
    "two consumer warpgroups (T.warpgroup_id([3])), each multiplying its own rows",
)

_HOPPER_SPECIALIZED = _TMA + [GRID_RESIDENT, TILE_LOOP, SETMAXREG, PRODUCER_CONSUMER]
CHECKS["hopper"].update(
    {
        7: [WGMMA] + _HOPPER_SPECIALIZED + [FOUR_STAGES, THREADS_256],
        8: [WGMMA] + _HOPPER_SPECIALIZED + [FULL_RING, THREADS_256],
        9: [WGMMA] + _HOPPER_SPECIALIZED + [FULL_RING, THREADS_256, CLUSTER_PAIR, MULTICAST_TMA],
        **{step: [WGMMA_256] + _HOPPER_SPECIALIZED + [FULL_RING, THREADS_384, CLUSTER_PAIR, MULTICAST_TMA, TWO_CONSUMERS]
           for step in (10, 11)},  # step 11 changes only the edges
        # step 12 picks per shape the tile's rows and width (its wgmma is m64nNk16, N a consumer's columns) and
        # whether CTAs pair
        12: [WGMMA_PER_SHAPE] + _HOPPER_SPECIALIZED + [THREADS_384, TWO_CONSUMERS],
    }
)


# ---- protocol checks (grader/analysis/protocol_lint.py): the technique is there, but used so that the kernel
# would hang, compute wrong or run slow; read off the CUDA source's guards, loops and statement order ----

def _lint(rule: Callable[[Artifacts, int], bool]) -> Callable[[Artifacts, Launch], bool]:
    """A lint rule, given the number of K tiles of the shape it was built at (rounded up: a step that takes any K
    loads its last, partial K tile too)."""
    return lambda art, launch: rule(art, -(-launch.shape[2] // TILE_128[2]))


def _protocol(name: str, rule: Callable[[Artifacts, int], bool], hint: str) -> Check:
    return Check(name, _lint(rule), hint, kind="protocol")


K_LOOP = _protocol(
    "the MMA runs once per K tile, over all K tiles", lint.mma_over_all_k_tiles,
    "loop over every K tile (`for k in range(K // 64)`; K / 64 rounded up where K need not be a multiple of 64) "
    "around load, MMA and commit; one commit per K tile",
)
K_COVERED = _protocol(
    "the MMAs cover every K tile, the last partial one too", lint.mma_covers_every_k_tile,
    "loop over ceil(K / 64) K tiles (`-(-K // BLK_K)`): with K a multiple of 8, K // 64 leaves the last K % 64 "
    "columns out of the product; the last K tile's columns past K load as zeros and add nothing",
)
ACCUMULATE_FLAG = _protocol(
    "accumulate flag false only on the first K tile", lint.accumulate_after_first_k_tile,
    "accumulate on every K tile but the first: Blackwell accum=(k != 0), Hopper scale_d = k * 4 + kk != 0 "
    "(a flag false on every K tile, as in step 1, keeps only the last K tile's product)",
)
WGMMA_FENCES = _protocol(
    "fences before the wgmma", lint.fences_before_mma,
    "T.ptx.wgmma.fence.sync.aligned() before each K tile's wgmmas; tiles written by threads (Tx.cta.copy) need "
    "T.ptx.fence.proxy.async_.shared__cta() and then T.cuda.cta_sync() before the wgmma reads them",
)
TCGEN05_FENCES = _protocol(
    "fences before the tcgen05 MMA", lint.fences_before_mma,
    "T.ptx.tcgen05.fence__after_thread_sync() after each mbarrier wait / cta_sync and before the MMA; tiles written "
    "by threads (Tx.cta.copy) need T.ptx.fence.proxy.async_.shared__cta() and then T.cuda.cta_sync() first",
)
TMEM_HANDBACK_FENCE = _protocol(
    "tcgen05.fence::before_thread_sync between the TMEM reads and the arrive that hands TMEM back",
    lint.tmem_reads_fenced_before_handback,
    "T.ptx.tcgen05.fence__before_thread_sync() after the last tcgen05.ld (and its wait::ld) of the tile and before "
    "the mbarrier arrive that tells the MMA issuer the accumulator is free: the arrive alone does not order the "
    "TMEM reads before the next MMA's writes",
)
STORE_FENCE = _protocol(
    "fence.proxy.async and a barrier before the TMA store", lint.fence_before_tma_store,
    "after the threads write Dsmem: T.ptx.fence.proxy.async_.shared__cta(), then T.cuda.cta_sync() "
    "(T.cuda.warpgroup_sync in a warpgroup role), then one thread issues the TMA store",
)
STAGING_REUSE = _protocol(
    "the previous tile's TMA store has read Dsmem before it is rewritten", lint.staging_waited_before_reuse,
    "in a tile loop, before the threads write the next tile into Dsmem: the thread that issued the previous "
    "store waits with T.ptx.cp.async_.bulk.wait_group.read(0), then a barrier (T.cuda.cta_sync(), or the "
    "epilogue's warpgroup barrier); the store was only committed and may still be reading Dsmem",
)
STORE_WAITED = _protocol(
    "the last TMA store is waited for (bulk wait_group) before the CTA exits", lint.store_waited_before_exit,
    "after the last TMA store's commit_group, the thread that committed it waits with "
    "T.ptx.cp.async_.bulk.wait_group(0) before the kernel ends (wait_group waits for the calling thread's own "
    "groups, so the committing warp waits): the store reads Dsmem until then, and an exiting CTA frees it",
)
TILE_STRIDE = _protocol(
    "the tile loop starts at the CTA's own tile and steps by the number of CTAs", lint.tiles_strided_by_the_grid,
    "tile_scheduler.init(bx) with this CTA's index, num_clusters = the CTAs of the grid (the clusters, "
    "with clusters) and tile_scheduler.next_tile() once per tile: another start or stride computes some tiles "
    "twice and others never, and a loop that never steps never ends",
)
TILE_FOLLOWED = _protocol(
    "the TMA loads and the TMA store address the tile loop's current tile", lint.tma_follows_the_tile,
    "take the tile origin (m_st, n_st) from the scheduler (tile_scheduler.m_idx, n_idx), not from the CTA id, and "
    "call tile_scheduler.next_tile() after the tile's store: the store writes the tile its K loop loaded",
)
SHARED_MEMORY_FITS = _protocol(
    "shared memory fits one CTA (227 KiB)", lint.shared_memory_fits,
    "PIPE_DEPTH stages of the A and B tiles (in bytes: 2 per fp16), the Dsmem staging tile(s) and the barriers below "
    "the 1024-aligned tiles must fit in the 232448 bytes one CTA may use; a kernel that asks for more never launches",
)
PHASES_FLIP = _protocol(
    "every mbarrier wait in a loop waits on a flipping phase", lint.phases_flip,
    "flip the phase bit after each wait (phase = phase ^ 1, or advance the PipelineState): a wait on a fixed "
    "phase passes once and then hangs or stops waiting",
)
TMA_EVERY_OPERAND = _protocol(
    "A and B both loaded by TMA", lint.every_operand_by_tma,
    'give every Tx.copy_async of A and B dispatch="tma_auto" and mbar=...: without dispatch= it silently '
    "becomes cp.async, which never arrives on the mbarrier (the wait hangs or reads a stale tile)",
)
EVERY_K_TILE_LOADED = _protocol(
    "every K tile of A and B loaded, once per output tile", lint.every_k_tile_loaded,
    "each output tile needs ceil(K / 64) K tiles of A and of B (K // 64 where K is a multiple of 64): with stages, "
    "the prologue loads the first K tile of every stage (PRE_NUM of them) and the ring refills stage s with K tile "
    "k + PIPE_DEPTH while that K tile exists; a K tile that is never loaded leaves its wait hanging",
)
CTA_WIDE_COPIES = _protocol(
    "each thread copies its share of a tile, not all of it", lint.cta_wide_copies,
    "copy a tile with Tx.cta.copy (the CTA's threads split it); a bare Tx.copy makes every thread copy the "
    "whole tile: right, but 128x the traffic",
)
SETMAXNREG_APPLIED = _protocol(
    "setmaxnreg in effect (USETMAXREG): a register cap at kernel entry",
    lambda art, _: "setmaxnreg" not in art.ptx or re.search(r"\bUSETMAXREG\b", art.sass) is not None,
    "T.attr({\"tirx.launch_bounds_min_blocks_per_sm\": 1}) after T.device_entry() (launch bounds: one CTA per SM): "
    "without a register cap at kernel entry ptxas drops every setmaxnreg (warning C7508)",
)
SETMAXNREG_BY_WARPGROUPS = _protocol(
    "setmaxnreg run by whole warpgroups", lint.whole_warpgroups(lint.SETMAXNREG),
    "setmaxnreg is .sync.aligned over a warpgroup: all 128 threads of the producer (and of each consumer) run it, "
    "before any branch on the warp or elect_sync, or the warpgroup hangs or its cap is undefined",
)
REGISTERS_FIT = _protocol(
    "the setmaxnreg caps fit the register file", lint.registers_fit_the_file,
    "128 threads x (PRODUCER_REGS + CONSUMER_REGS for each consumer warpgroup) must be at most 65536 registers: "
    "setmaxnreg.inc waits until its registers are free, so a split over the file hangs the consumer",
)
NO_SPILLS = _protocol(
    "no register spills to local memory (LDL/STL)", lint.no_register_spills,
    "CONSUMER_REGS must hold the consumer's accumulator (128 fp32 registers a thread) plus its addresses and "
    "loop state: under a lower setmaxnreg cap ptxas spills to local memory, and every K tile pays for it",
)
WGMMA_BY_WARPGROUPS = _protocol(
    "wgmma issued by whole warpgroups", lint.whole_warpgroups(lint.WGMMA),
    "issue wgmma from all 128 threads of a warpgroup (no warp test or elect_sync around it): "
    "unlike tcgen05.mma it is a warpgroup-wide instruction",
)
_ELECTED = ("guard it with both `if warp_id == 0:` and `if T.cuda.elect_sync():` (elect_sync alone runs it once "
            "per warp, the warp test alone on all 32 lanes)")
_ELECTED_PER_MMA_WARP = ("guard it with the MMA warps' test (`if warp_id < NUM_CONSUMER:`) and `if T.cuda.elect_sync():` "
                         "(elect_sync alone runs it once per warp, the warp test alone on all 32 lanes)")
ONE_TMA_ISSUER = _protocol("one thread issues the TMA loads", lint.one_thread(lint.TMA_LOAD), _ELECTED)
ONE_EXPECT_TX = _protocol(
    "one thread arms the TMA barrier (expect_tx)", lint.one_thread(lint.EXPECT_TX),
    f"{_ELECTED}: each extra arrival completes the phase early",
)
ONE_TMA_STORER = _protocol("one thread per warpgroup role issues the TMA store", lint.one_thread(lint.TMA_STORE), _ELECTED)
ONE_MMA_ISSUER = _protocol("one thread issues the tcgen05 MMA", lint.one_thread(lint.TCGEN05_MMA), _ELECTED)
ONE_COMMITTER = _protocol(
    "one thread commits the MMA onto its mbarrier", lint.one_thread(lint.TCGEN05_COMMIT),
    f"commit from the thread that issued the MMA; {_ELECTED}",
)
TWO_MMA_ISSUERS_ELECTED = _protocol(
    "one thread per MMA warp issues the tcgen05 MMA", lint.one_thread(lint.TCGEN05_MMA, per_warpgroup=2),
    _ELECTED_PER_MMA_WARP,
)
TWO_COMMITTERS_ELECTED = _protocol(
    "one thread per MMA warp commits the MMA", lint.one_thread(lint.TCGEN05_COMMIT, per_warpgroup=2),
    _ELECTED_PER_MMA_WARP,
)


# step 12's fixup through global memory (both tracks): the order of the code around the lock
FIXUP_RELEASE = _protocol(
    "the lock's count is released after the partial sums", lint.fixup_count_released,
    "every thread stores its partial sum, the consumer's named barrier (T.cuda.warpgroup_sync), then one thread: "
    "T.cuda.thread_fence(), then the lock's T.cuda.atomic_add: a count seen before the stores it covers lets the "
    "final range add stale sums",
)
FIXUP_ACQUIRE = _protocol(
    "the lock is waited on with ld.acquire, then a barrier before the partial sums are read", lint.fixup_wait_acquires,
    "spin on the lock with T.ptx.ld.acquire.gpu.global_.b32 (a plain load can be hoisted out of the loop and "
    "orders nothing), then the consumer's named barrier before any thread reads the workspace",
)
LOCKS_RESET = _protocol(
    "every lock is back at 0 when the launch ends", lint.fixup_locks_reset,
    "after the wait, the waiting thread stores 0 into the lock: the host zeroes the locks once, and the next "
    "launch's wait would never see its count",
)


def _protocol_checks(track: str, step: int) -> list[Check]:
    """The protocol checks a step's design must pass: the K loop from step 2, TMA from step 4."""
    checks = [SHARED_MEMORY_FITS, ACCUMULATE_FLAG, WGMMA_FENCES if track == "hopper" else TCGEN05_FENCES,
              CTA_WIDE_COPIES, PHASES_FLIP]
    if step >= 2:
        checks.append(K_LOOP)
    if step >= 11:  # any K: the K loop rounds up
        checks.append(K_COVERED)
    if step >= 4:
        checks += [TMA_EVERY_OPERAND, EVERY_K_TILE_LOADED, STORE_FENCE, ONE_TMA_ISSUER, ONE_EXPECT_TX, ONE_TMA_STORER,
                   STORE_WAITED]
    if step >= 6:  # step 12 walks its own work units: (tile, K range), not tiles strided by the grid
        checks += [STAGING_REUSE] + ([TILE_STRIDE] if step != 12 else []) + [TILE_FOLLOWED]
    if step == 12:  # the fixup through global memory
        checks += [FIXUP_RELEASE, FIXUP_ACQUIRE, LOCKS_RESET]
    if track == "blackwell" and step >= 7:
        checks.append(TMEM_HANDBACK_FENCE)
    if track == "blackwell":
        checks += [TWO_MMA_ISSUERS_ELECTED, TWO_COMMITTERS_ELECTED] if step >= 10 else [ONE_MMA_ISSUER, ONE_COMMITTER]
    else:
        checks.append(WGMMA_BY_WARPGROUPS)
        if step >= 7:  # the producer / consumer register split
            checks += [SETMAXNREG_APPLIED, SETMAXNREG_BY_WARPGROUPS, REGISTERS_FIT, NO_SPILLS]
    return checks


for _track, _steps in CHECKS.items():
    for _step in _steps:
        _steps[_step] = _steps[_step] + _protocol_checks(_track, _step)


@dataclass
class CheckResult:
    name: str
    passed: bool
    hint: str
    kind: str = "feature"


def run_checks(track: str, step: int, artifacts: Artifacts, launch: Launch) -> list[CheckResult]:
    return [
        CheckResult(check.name, bool(check.passes(artifacts, launch)), check.hint, check.kind)
        for check in CHECKS[track][step]
    ]
