"""Known-bad kernels: the reference solutions with one plausible mistake each.

Every variant builds and shows its step's features, yet would hang, compute wrong or run slow on a
GPU (except where the TODO's decision is a feature itself, e.g. the step's warpgroups or its cluster: then
that feature's check names it; and BUILD, where only the build rejects it). The CPU grade must fail each one
with a message that names the fix (tests/test_known_bad_cpu.py);
tests/test_known_bad_gpu.py runs the Hopper ones on a GPU and records what they really do there.
`gpu` is what the mistake is expected to do on the GPU, not a measurement.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from grader.analysis import features
from grader.core.steps import STEPS

REPO = Path(__file__).resolve().parent.parent


# `check` of a variant whose mistake the barrier-protocol simulation finds (grader/analysis/protocol.py),
# not a static check
SIMULATED = "simulated protocol"
# `check` of a variant no CPU check catches: its mistake is in the values a kernel computes (which K tiles, which
# slot, which tile), which the static checks do not read and the protocol checker does not model; it is in
# GPU_ONLY_VARIANTS, which only tests/test_known_bad_gpu.py runs
GPU_ONLY = "gpu only"
# `check` of a variant that the build itself rejects (ptxas, TIRx) with a message naming the cause: for a TODO
# whose plausible mistakes do not build (the test asserts the build fails and its first problem names them)
BUILD = "build"


@dataclass(frozen=True)
class Variant:
    name: str
    track: str
    step: int
    pattern: str  # a regular expression over the step's reference solution
    replacement: str  # re.sub replacement (group references allowed)
    # Hopper: what it did on an H100 (2026-11-24, docs/measurements.md, one-off runner column; the wrong, slow
    # and fault variants of steps 6-10 re-run 2026-11-25 through tests/test_known_bad_gpu.py); steps 11 and 12: on an
    # H200 (2026-12-02, experiments/every_shape/h200-known-bad-11-12) unless its comment says otherwise; Blackwell:
    # expected.
    # hang | wrong | slow | fault (the run stops with an error: a CUDA error, or a launch the driver refuses) |
    # build (TIRx or ptxas rejects it for sm_90a: no GPU run) | race (breaks the memory model, yet came out
    # right there: rejected for what the PTX ISA allows, not for what one run showed) | redundant (right and no
    # slower at the timed shape: the same work issued by 32 threads, or a setmaxnreg that ptxas ignores)
    gpu: str
    check: str  # the name of the static check that must fail on the CPU, or SIMULATED
    # Steps 4-10: the TODO whose block the mistake is made in ("9.2"); every TODO of steps 4-10 has a variant.
    todo: str = ""
    # Words the first finding of the CPU grade must contain: the barrier or decision at fault, in the step's
    # own names (e.g. ("mma2tma", "init count")), so that the cause comes before its consequences.
    names: tuple[str, ...] = ()
    # True when a skeleton or a hint names this mistake as a "Trap:" of its TODO (a trap must bite).
    trap: bool = False
    # The shape the CPU grade runs it at where its mistake shows only at some shapes (a ragged step's); by default
    # the step's static-check shape.
    shape: tuple[int, int, int] | None = None

    def source(self) -> str:
        """The reference solution with the mistake made (every match replaced)."""
        original = (REPO / "solutions" / self.track / STEPS[self.track][self.step].file_name).read_text()
        broken, count = re.subn(self.pattern, self.replacement, original)
        if count == 0:
            raise ValueError(f"variant {self.name}: {self.pattern!r} no longer matches the solution")
        return broken

    def write(self, tree: Path) -> Path:
        """Write the broken step file into tree/<track>/ (a tree the grader grades like steps/)."""
        folder = tree / self.track
        folder.mkdir(parents=True, exist_ok=True)
        (folder / STEPS[self.track][self.step].file_name).write_text(self.source())
        return tree


# Lines removed keep the line before them: "(\n<indent>)call()" -> "" drops one statement.
_ELECT_THEN_ARRIVE = r"if T\.cuda\.elect_sync\(\):\n(\s+T\.ptx\.mbarrier\.arrive\.expect_tx)"
_WARP_THEN_ELECT_THEN_ARRIVE = r"if warp_id == 0:\n(\s+if T\.cuda\.elect_sync\(\):\n\s+T\.ptx\.mbarrier\.arrive\.expect_tx)"
_HOPPER_FLAG = r"k \* \(BLK_K // MMA_K\) \+ kk != 0"
# the wait before the threads rewrite the staging tile of the TMA store (step 6: then a CTA barrier)
_STAGING_WAIT = r"\n\s+if warp_id == 0:\n\s+T\.ptx\.cp\.async_\.bulk\.wait_group\.read\(0\)"
_STAGING_WAIT_THEN_CTA_SYNC = _STAGING_WAIT + r"\n\s+T\.cuda\.cta_sync\(\)"
# Hopper step 9's release of a stage on the empty barrier of every CTA of the cluster
_RELEASE_ON_EVERY_PEER = r"for peer in T\.unroll\(CLUSTER\):\n\s+mma2tma\.arrive\(release\.stage, remote=peer\)"
# steps 4-6: the blocks the variants of one TODO each change
_TMA_BYTES = r"(TMA_BYTES = \(BLK_M \* BLK_K \+ BLK_N \* BLK_K\)) \* 2"
_TILE_BYTES = r"(TILE_BYTES = \(BLK_M \* BLK_K \+ BLK_N \* BLK_K\)) \* 2"
_INIT_TMA_BAR_0 = r"(mbarrier\.init\.shared\.b64\(tma_bar\.ptr_to\(\[0\]\), T\.uint32\()1\)"
_FINAL_BULK_WAIT = r"\n\s+if warp_id == 0:\n\s+T\.ptx\.cp\.async_\.bulk\.wait_group\(0\)"
_MMA_BAR_WAIT_LINES = r"T\.cuda\.mbarrier_wait\(mma_bar\.ptr_to\(\[0\]\), phase_mma\)\n\s+phase_mma = phase_mma \^ 1"
_A_LAYOUT_128B = r"(A_layout = mma_shared_layout\(a_type, SwizzleMode\.)SWIZZLE_128B_ATOM"
_TMA_BAR_PER_STAGE = r"(tma_bar = pool\.alloc\(\()PIPE_DEPTH,\)"
_ASMEM_LAYOUT = r"(?<=Asmem = pool\.alloc\(\(PIPE_DEPTH, BLK_M, BLK_K\), a_type), layout=A_layout"
_INIT_STAGE_S = r"(mbarrier\.init\.shared\.b64\(tma_bar\.ptr_to\(\[)s\]"
_A_COPY_MBAR_STAGE = (r"(Tx\.copy_async\(Asmem\[stage, :, :\], [^\n]*\n\s+dispatch=\"tma_auto\", "
                      r"mbar=tma_bar\.ptr_to\(\[)stage(\]\)\))")
_PROLOGUE = r"for s in T\.unroll\(PRE_NUM\):"
_ONE_CTA_PER_SM, _ONE_CTA_PER_TILE = r"bx = T\.cta_id\(\[sm_count\]\)", "bx = T.cta_id([(M // BLK_M) * (N // BLK_N)])"
_NEXT_TILE_AFTER_STORE = r"mma_tile\(\)\n(\s+)store_tile\(\)\n\s+tile_scheduler\.next_tile\(\)"

VARIANTS: tuple[Variant, ...] = (
    # ---- Hopper, steps 1-6 ----
    Variant("hopper-1-no-proxy-fence", "hopper", 1,
            r"(B\[n_st:n_st \+ BLK_N, k_st:k_st \+ BLK_K\]\)\n\s+#[^\n]*)\n\s+T\.ptx\.fence\.proxy\.async_\.shared__cta\(\)", r"\1",
            "wrong", features.WGMMA_FENCES.name),
    Variant("hopper-1-no-wgmma-fence", "hopper", 1, r"\n\s+T\.ptx\.wgmma\.fence\.sync\.aligned\(\)", "",
            "race", features.WGMMA_FENCES.name),
    Variant("hopper-1-wgmma-on-one-warp", "hopper", 1,
            r"for kk in T\.unroll\(BLK_K // MMA_K\):\n(\s+)(wgmma_128x128x16\(acc, desc_a\[stage\], desc_b\[stage\], kk, [^\n]*\))",
            r"if warp_id == 0:\n\1for kk in T.unroll(BLK_K // MMA_K):\n\1    \2",
            "fault", features.WGMMA_BY_WARPGROUPS.name),
    Variant("hopper-2-one-k-tile", "hopper", 2, r"for k in range\(K // BLK_K\):", "for k in range(1):",
            "wrong", features.K_LOOP.name),
    Variant("hopper-2-accumulator-reset-every-k-tile", "hopper", 2, _HOPPER_FLAG, "kk != 0",
            "wrong", features.ACCUMULATE_FLAG.name),
    Variant("hopper-3-thread-copy", "hopper", 3, r"Tx\.cta\.copy\(Bsmem", "Tx.copy(Bsmem",
            "slow", features.CTA_WIDE_COPIES.name),
    Variant("hopper-4-b-by-cp-async", "hopper", 4,
            r"(Tx\.copy_async\(Bsmem\[:, :\], B\[n_st:n_st \+ BLK_N, k_st:k_st \+ BLK_K\],\n\s+)dispatch=\"tma_auto\", ",
            r"\1", "hang", features.TMA_EVERY_OPERAND.name, todo="4.4", names=("loaded by TMA", "dispatch")),
    Variant("hopper-4-tma-on-4-threads", "hopper", 4, _WARP_THEN_ELECT_THEN_ARRIVE, r"if True:\n\1",
            "fault", features.ONE_TMA_ISSUER.name, todo="4.4", names=("one thread", "elect_sync")),
    Variant("hopper-4-tma-on-32-threads", "hopper", 4, _ELECT_THEN_ARRIVE, r"if True:\n\1",
            "fault", features.ONE_EXPECT_TX.name, todo="4.4", names=("one thread", "elect_sync")),
    Variant("hopper-4-phase-never-flipped", "hopper", 4, r"\n\s+phase_tma = phase_tma \^ 1", "",
            "wrong", features.PHASES_FLIP.name, todo="4.5", names=("flipping phase",)),
    Variant("hopper-4-no-fence-before-tma-store", "hopper", 4,
            r"(acc\[h \* 64 \+ i\], d_type\)\n\s+#[^\n]*)\n\s+T\.ptx\.fence\.proxy\.async_\.shared__cta\(\)", r"\1",
            "race", features.STORE_FENCE.name, todo="4.6", names=("fence",)),
    # the TMA store on all 32 lanes: measured as step 6 (where the store is given code), a step 4 mistake
    Variant("hopper-4-tma-store-on-32-threads", "hopper", 4,
            r"if T\.cuda\.elect_sync\(\):\n(\s+Tx\.copy_async\(D\[)", r"if True:\n\1",
            "redundant", features.ONE_TMA_STORER.name, todo="4.6", names=("one thread", "TMA store")),
    Variant("hopper-5-phase-never-flipped", "hopper", 5, r"\n\s+phase_tma\[s\] = phase_tma\[s\] \^ 1", "",
            "fault", features.PHASES_FLIP.name, todo="5.9", names=("flipping phase",)),
    Variant("hopper-6-dsmem-rewritten-before-the-store-read-it", "hopper", 6,
            _STAGING_WAIT_THEN_CTA_SYNC, "",
            "race", features.STAGING_REUSE.name, todo="6.3", names=("Dsmem", "wait_group")),
    # ---- Hopper steps 4-6: one mistake per TODO, named by its first finding (steps 4-5 expected; step 6's wrong
    # and slow ones as the H100 showed them on 2026-11-25) ----
    Variant("hopper-4-expect-tx-without-the-fp16-size", "hopper", 4, _TMA_BYTES, r"\1",
            "wrong", SIMULATED, todo="4.1", names=("tma_bar", "expect_tx")),
    Variant("hopper-4-tma-bar-counts-every-thread", "hopper", 4, _INIT_TMA_BAR_0, r"\g<1>128)",
            "hang", SIMULATED, todo="4.2", names=("tma_bar", "init count")),
    Variant("hopper-4-tma-phase-starts-at-1", "hopper", 4, r"phase_tma = 0\n", "phase_tma = 1\n",
            "wrong", SIMULATED, todo="4.3", names=("tma_bar", "starting phase")),
    Variant("hopper-4-only-the-issuing-thread-waits", "hopper", 4,
            r"\n(\s+)T\.cuda\.mbarrier_wait\(tma_bar\.ptr_to\(\[0\]\), phase_tma\)\n\s+phase_tma = phase_tma \^ 1",
            r"\n\1if warp_id == 0:\n\1    if T.cuda.elect_sync():\n\1        "
            r"T.cuda.mbarrier_wait(tma_bar.ptr_to([0]), phase_tma)\n\1phase_tma = phase_tma ^ 1",
            "wrong", SIMULATED, todo="4.5", names=("tma_bar", "not waited")),
    Variant("hopper-4-no-final-bulk-wait", "hopper", 4, _FINAL_BULK_WAIT, "",
            "race", features.STORE_WAITED.name, todo="4.7", names=("wait_group", "exits")),
    Variant("hopper-5-a-layout-64b-swizzled", "hopper", 5, _A_LAYOUT_128B, r"\1SWIZZLE_64B_ATOM",
            "wrong", SIMULATED, todo="5.1", names=("Asmem", "layout", "64B-swizzled")),
    # tma_bar[1] lands in the padding before the 1 KiB-aligned tiles: expected to come out right by luck
    Variant("hopper-5-one-tma-barrier-for-two-stages", "hopper", 5, _TMA_BAR_PER_STAGE, r"\g<1>1,)",
            "race", SIMULATED, todo="5.2", names=("tma_bar", "1 slot")),
    Variant("hopper-5-asmem-without-its-swizzled-layout", "hopper", 5, _ASMEM_LAYOUT, "",
            "wrong", SIMULATED, todo="5.3", names=("Asmem", "not swizzled")),
    Variant("hopper-5-stage-0-initialised-twice", "hopper", 5, _INIT_STAGE_S, r"\g<1>0]",
            "hang", SIMULATED, todo="5.4", names=("tma_bar[1]", "initialised")),
    Variant("hopper-5-phases-start-at-1", "hopper", 5, r"phase_tma\[s\] = 0\n", "phase_tma[s] = 1\n",
            "wrong", SIMULATED, todo="5.5", names=("tma_bar", "starting phase")),
    Variant("hopper-5-every-descriptor-on-stage-0", "hopper", 5,
            r"encode_sw128_desc\(desc_a\[s\], Asmem\.ptr_to\(\[s, 0, 0\]\)\)",
            "encode_sw128_desc(desc_a[s], Asmem.ptr_to([0, 0, 0]))",
            "wrong", SIMULATED, todo="5.6", names=("descriptor", "not the stage it waited for")),
    Variant("hopper-5-a-copy-completes-on-stage-0", "hopper", 5, _A_COPY_MBAR_STAGE, r"\g<1>0\2",
            "hang", SIMULATED, todo="5.7", names=("tma_bar[0]", "mbar")),
    Variant("hopper-5-prologue-fills-one-stage", "hopper", 5, _PROLOGUE, "for s in T.unroll(1):",
            "hang", features.EVERY_K_TILE_LOADED.name, todo="5.8", names=("every K tile",)),
    Variant("hopper-5-refill-before-the-mma", "hopper", 5,
            r"\n(\s+)mma_k_tile\(s, k\)\n(\s+# ---- refill[^\n]*\n\s+if warp_id == 0:\n\s+if T\.cuda\.elect_sync\(\):\n"
            r"\s+if k \+ PIPE_DEPTH < K_TILES:\n\s+tma_load\(s, k \+ PIPE_DEPTH\))", r"\n\2\n\1mma_k_tile(s, k)",
            "wrong", SIMULATED, todo="5.9", names=("tma_bar[0]", "refilled before this read")),
    # step 6's first decision: one CTA per SM gives up the second CTA that hid step 5's waits (0.57x cuBLAS on the H100)
    Variant("hopper-6-one-cta-per-sm", "hopper", 6, r"CTAS_PER_SM = T\.meta_var\(2\)", "CTAS_PER_SM = T.meta_var(1)",
            "slow", features.GRID_RESIDENT.name, todo="6.1", names=("the CTAs the GPU holds at once",)),
    Variant("hopper-6-scheduler-never-initialised", "hopper", 6, r"\n\s+tile_scheduler\.init\(bx\)", "",
            "wrong", features.TILE_STRIDE.name, todo="6.2", names=("init(bx)",)),
    Variant("hopper-6-next-tile-before-the-store", "hopper", 6, _NEXT_TILE_AFTER_STORE,
            r"mma_tile()\n\1tile_scheduler.next_tile()\n\1store_tile()",
            "wrong", features.TILE_FOLLOWED.name, todo="6.4", names=("next_tile()", "after the tile's store")),
    # traps named by the skeletons
    # (A's twin of hopper-4-b-by-cp-async, which hung on the H100; the skeleton's TODO 4.4 names it as its trap)
    Variant("hopper-4-a-by-cp-async", "hopper", 4,
            r"(Tx\.copy_async\(Asmem\[:, :\], A\[m_st:m_st \+ BLK_M, k_st:k_st \+ BLK_K\],\n\s+)"
            r"dispatch=\"tma_auto\", ", r"\1",
            "hang", features.TMA_EVERY_OPERAND.name, todo="4.4", names=("loaded by TMA", "dispatch"), trap=True),
    # ---- Hopper, steps 7-10: one mistake per TODO, named by its first finding (the hang and race ones expected, the
    # others as the H100 showed them on 2026-11-25) ----
    # step 7
    # the consumer capped at its 128 accumulator registers: ptxas spills the rest to local memory
    Variant("hopper-7-consumer-capped-at-its-accumulator", "hopper", 7,
            r"PRODUCER_REGS, CONSUMER_REGS = 40, 232", "PRODUCER_REGS, CONSUMER_REGS = 40, 128",
            "slow", features.NO_SPILLS.name, todo="7.1", names=("spills", "CONSUMER_REGS")),
    Variant("hopper-7-no-register-cap-at-launch", "hopper", 7,
            r'\n\s+T\.attr\(\{"tirx\.launch_bounds_min_blocks_per_sm": 1\}\)', "",
            "redundant", features.SETMAXNREG_APPLIED.name, todo="7.2", names=("launch_bounds", "setmaxnreg")),
    Variant("hopper-7-one-warpgroup", "hopper", 7, r"wg_id = T\.warpgroup_id\(\[2\]\)", "wg_id = T.warpgroup_id([1])",
            "hang", features.PRODUCER_CONSUMER.name, todo="7.3", names=("warpgroup",)),
    # MBarrier.arrive(stage, TMA_BYTES) takes the byte count for a remote CTA rank: no expect_tx at all
    Variant("hopper-7-tma2mma-a-plain-mbarrier", "hopper", 7, r"tma2mma = TMABar\(", "tma2mma = MBarrier(",
            "wrong", features.EXPECT_TX.name, todo="7.4", names=("expect_tx", "TMABar")),
    # the A and B copies counted as arrivals: their bytes complete the phase, not arrivals
    Variant("hopper-7-tma2mma-counts-both-copies", "hopper", 7, r"tma2mma\.init\(1\)", "tma2mma.init(2)",
            "hang", SIMULATED, todo="7.5", names=("tma2mma", "init count")),
    Variant("hopper-7-setmaxnreg-dec-in-the-elected-thread", "hopper", 7,
            r"\n\s+T\.ptx\.setmaxnreg\.dec\.sync\.aligned\.u32\(PRODUCER_REGS\)((?:\n\s+# [^\n]*)*\n\s+if warp_id == 0:"
            r"\n\s+if T\.cuda\.elect_sync\(\):)(\n\s+)",
            r"\1\2T.ptx.setmaxnreg.dec.sync.aligned.u32(PRODUCER_REGS)\2",
            "hang", features.SETMAXNREG_BY_WARPGROUPS.name, todo="7.6", names=("setmaxnreg", "128 threads")),
    Variant("hopper-7-producer-on-32-threads", "hopper", 7,
            r"if T\.cuda\.elect_sync\(\):\n(\s+produce = PipelineState)", r"if True:\n\1",
            "fault", features.ONE_TMA_ISSUER.name, todo="7.7", names=("one thread issues the TMA", "elect_sync")),
    Variant("hopper-7-producer-starts-at-phase-0", "hopper", 7,
            r"produce = PipelineState\(PIPE_DEPTH, 1\)", "produce = PipelineState(PIPE_DEPTH, 0)",
            "hang", SIMULATED, todo="7.7", names=("mma2tma", "starting phase")),
    Variant("hopper-7-consumer-starts-at-phase-1", "hopper", 7,
            r"consume = PipelineState\(PIPE_DEPTH, 0\)", "consume = PipelineState(PIPE_DEPTH, 1)",
            "wrong", SIMULATED, todo="7.8", names=("tma2mma", "starting phase")),
    Variant("hopper-7-dsmem-rewritten-before-the-store-read-it", "hopper", 7,
            _STAGING_WAIT + r"(\n\s+T\.cuda\.warpgroup_sync)", r"\1",
            "race", features.STAGING_REUSE.name, todo="7.11", names=("Dsmem", "wait_group.read")),
    # step 6's CTA-wide barrier kept: the producer warpgroup never reaches it
    Variant("hopper-7-cta-sync-in-the-epilogue", "hopper", 7,
            r"T\.cuda\.warpgroup_sync\(EPILOGUE_BAR\)", "T.cuda.cta_sync()",
            "hang", SIMULATED, todo="7.11", names=("cta_sync", "warpgroup_sync")),
    # `release` is the same PipelineState as `consume`: each release advances both, stages go unreleased
    Variant("hopper-7-release-is-the-consume-state", "hopper", 7,
            r"release = PipelineState\(PIPE_DEPTH, 0\)", "release = consume",
            "hang", SIMULATED, todo="7.8", names=("mma2tma", "never released")),
    # the stage just issued is released (its group still in flight), from the first K tile on
    Variant("hopper-7-release-the-stage-in-flight", "hopper", 7,
            r"(\n( +))if k > 0:\n(\s+)if warp_id == 0:\n(\s+)if lane_id == 0:\n\s+mma2tma\.arrive\(release\.stage\)\n"
            r"\s+release\.advance\(\)",
            r"\1if warp_id == 0:\n\3if lane_id == 0:\n\4mma2tma.arrive(consume.stage)\1release.advance()",
            "hang", SIMULATED, todo="7.9", names=("mma2tma", "wait_group")),
    Variant("hopper-7-no-release-after-the-k-loop", "hopper", 7,
            r"(# >>> TODO 7\.10[^\n]*\n\s+T\.ptx\.wgmma\.wait_group\.sync\.aligned\(0\))\n\s+if warp_id == 0:\n"
            r"\s+if lane_id == 0:\n\s+mma2tma\.arrive\(release\.stage\)\n\s+release\.advance\(\)", r"\1",
            "hang", SIMULATED, todo="7.10", names=("mma2tma", "after the K loop")),
    # step 8
    Variant("hopper-8-depth-from-a-stage-counted-in-elements", "hopper", 8,
            r"PIPE_DEPTH = \(SMEM_PER_CTA - EPILOGUE_SMEM\) // \(\(BLK_M \+ BLK_N\) \* BLK_K \* 2\)",
            "PIPE_DEPTH = (SMEM_PER_CTA - EPILOGUE_SMEM) // ((BLK_M + BLK_N) * BLK_K)",
            "fault", features.SHARED_MEMORY_FITS.name, todo="8.1", names=("shared memory", "PIPE_DEPTH")),
    # step 9
    # the rank from the CTA index: no cluster is declared, so the launch is not a cluster launch
    Variant("hopper-9-rank-from-the-cta-index", "hopper", 9,
            r"rank = T\.cta_id_in_cluster\(\[CLUSTER\]\)", "rank = bx % CLUSTER",
            "fault", features.CLUSTER_PAIR.name, todo="9.1", names=("clusters of 2 CTAs", "cta_id_in_cluster")),
    Variant("hopper-9-mma2tma-counts-one-cta", "hopper", 9, r"mma2tma\.init\(CLUSTER\)", "mma2tma.init(1)",
            "fault", SIMULATED, todo="9.2", names=("mma2tma", "init count")),
    Variant("hopper-9-cta-sync-after-init", "hopper", 9,
            r"(# >>> TODO 9\.3[^\n]*\n\s+)T\.cuda\.cluster_sync\(\)", r"\1T.cuda.cta_sync()",
            "hang", SIMULATED, todo="9.3", names=("tma2mma", "cluster_sync")),
    Variant("hopper-9-both-ctas-on-the-same-rows", "hopper", 9, r" \+ rank \* BLK_M\)", ")",
            "wrong", SIMULATED, todo="9.4", names=("stores too", "rank in the cluster")),
    # each CTA multicasts the whole B tile: 48 KiB land in a stage armed for 32 KiB
    Variant("hopper-9-each-cta-multicasts-all-of-b", "hopper", 9,
            r"Bsmem\[produce\.stage, rank \* B_PART:\(rank \+ 1\) \* B_PART, :\],\n(\s+)"
            r"B\[n_st \+ rank \* B_PART:n_st \+ \(rank \+ 1\) \* B_PART,",
            r"Bsmem[produce.stage, :, :],\n\1B[n_st:n_st + BLK_N,",
            "hang", SIMULATED, todo="9.5", names=("tma2mma", "expect_tx")),
    Variant("hopper-9-release-in-its-own-cta-only", "hopper", 9,
            _RELEASE_ON_EVERY_PEER + r"(\n\s+# <<< TODO 9\.6)",
            r"mma2tma.arrive(release.stage)\1",
            "hang", SIMULATED, todo="9.6", names=("mma2tma", "remote arrive")),
    Variant("hopper-9-last-release-in-its-own-cta-only", "hopper", 9,
            _RELEASE_ON_EVERY_PEER + r"(\n\s+# <<< TODO 9\.7)",
            r"mma2tma.arrive(release.stage)\1",
            "hang", SIMULATED, todo="9.7", names=("mma2tma", "release of the last K tile")),
    Variant("hopper-9-no-cluster-sync-at-the-end", "hopper", 9,
            r"(# >>> TODO 9\.8[^\n]*)\n\s+T\.cuda\.cluster_sync\(\)", r"\1",
            "race", SIMULATED, todo="9.8", names=("mma2tma", "cluster_sync")),
    # step 10
    # 128 x (40 + 2 x 240) = 66560 registers: more than the file, the consumers' setmaxnreg.inc waits forever
    Variant("hopper-10-register-split-over-the-file", "hopper", 10,
            r"PRODUCER_REGS, CONSUMER_REGS = 40, 232", "PRODUCER_REGS, CONSUMER_REGS = 40, 240",
            "hang", features.REGISTERS_FIT.name, todo="10.1", names=("65536", "CONSUMER_REGS")),
    # one staging tile's layout for both consumers: TIRx cannot map it onto Dsmem's (2, 64, 128)
    Variant("hopper-10-one-staging-layout-for-both-consumers", "hopper", 10,
            r"\(NUM_CONSUMERS, CONSUMER_ROWS, EPI_N\)\)(\n\s+# <<< TODO 10\.2)", r"(CONSUMER_ROWS, EPI_N))\1",
            "build", BUILD, todo="10.2", names=("layout", "(2, 64, 128)")),
    Variant("hopper-10-no-producer-warpgroup", "hopper", 10,
            r"T\.warpgroup_id\(\[1 \+ NUM_CONSUMERS\]\)", "T.warpgroup_id([NUM_CONSUMERS])",
            "hang", features.THREADS_384.name, todo="10.3", names=("three warpgroups",)),
    Variant("hopper-10-dsmem-without-a-consumer-dimension", "hopper", 10,
            r"Dsmem = pool\.alloc\(\(NUM_CONSUMERS, CONSUMER_ROWS, EPI_N\)", "Dsmem = pool.alloc((BLK_M, EPI_N)",
            "build", BUILD, todo="10.4", names=("Dsmem", "2-dimensional")),
    Variant("hopper-10-mma2tma-counts-step-9s-arrivals", "hopper", 10,
            r"mma2tma\.init\(CLUSTER \* NUM_CONSUMERS\)", "mma2tma.init(CLUSTER)",
            "fault", SIMULATED, todo="10.5", names=("mma2tma", "init count")),
    # consumers 1 and 2 instead of 0 and 1: consumer 2's A rows start at the next stage
    Variant("hopper-10-consumer-index-is-the-warpgroup-index", "hopper", 10,
            r"consumer = T\.meta_var\(wg_id - 1\)", "consumer = T.meta_var(wg_id)",
            "fault", SIMULATED, todo="10.6", names=("Asmem", "descriptor")),
    Variant("hopper-10-both-consumers-on-the-first-rows", "hopper", 10,
            r"Asmem\.ptr_to\(\[0, consumer \* CONSUMER_ROWS, 0\]\)", "Asmem.ptr_to([0, 0, 0])",
            "wrong", SIMULATED, todo="10.7", names=("same operands", "own rows")),
    Variant("hopper-10-one-stage-offset-for-a-and-b", "hopper", 10,
            r"b_offset = T\.meta_var\(T\.Cast\(\"uint64\", consume\.stage \* \(2 \* STAGE_DESC_STEP\)\)\)",
            'b_offset = T.meta_var(T.Cast("uint64", consume.stage * STAGE_DESC_STEP))',
            "wrong", SIMULATED, todo="10.8", names=("Bsmem", "stage offset")),
    Variant("hopper-10-accumulator-reset-every-k-tile", "hopper", 10,
            r"k \* \(BLK_K // MMA_K\) \+ kk != 0\)(\n\s+# <<< TODO 10\.9)", r"kk != 0)\1",
            "wrong", features.ACCUMULATE_FLAG.name, todo="10.9", names=("accumulate flag", "first K tile")),
    Variant("hopper-10-no-fence-before-tma-store", "hopper", 10,
            r"(d_type\))\n\s+T\.ptx\.fence\.proxy\.async_\.shared__cta\(\)", r"\1",
            "race", features.STORE_FENCE.name, todo="10.10", names=("fence.proxy.async",)),
    # traps named by the skeletons
    # (not run on the H100: two 128-thread consumers on one named barrier break its thread count, a race)
    Variant("hopper-10-consumers-share-a-named-barrier", "hopper", 10,
            r"warpgroup_sync\(EPILOGUE_BAR \+ consumer\)", "warpgroup_sync(EPILOGUE_BAR)",
            "race", SIMULATED, todo="10.10", names=("named barrier",), trap=True),
    # ---- Blackwell, steps 1-6 ----
    Variant("blackwell-1-no-tcgen05-fence", "blackwell", 1,
            r"(T\.cuda\.cta_sync\(\))\n\s+T\.ptx\.tcgen05\.fence__after_thread_sync\(\)(\n\s+# <<< TODO 1\.1)", r"\1\2",
            "wrong", features.TCGEN05_FENCES.name),
    Variant("blackwell-2-one-k-tile", "blackwell", 2, r"for k in T\.serial\(K // BLK_K\):", "for k in T.serial(1):",
            "wrong", features.K_LOOP.name),
    Variant("blackwell-2-accumulator-reset-every-k-tile", "blackwell", 2, r"mma_k_tile\(k != 0\)", "mma_k_tile(False)",
            "wrong", features.ACCUMULATE_FLAG.name),
    Variant("blackwell-3-thread-copy", "blackwell", 3, r"Tx\.cta\.copy\(Asmem", "Tx.copy(Asmem",
            "slow", features.CTA_WIDE_COPIES.name),
    Variant("blackwell-4-b-by-cp-async", "blackwell", 4,
            r"(Tx\.copy_async\(Bsmem\[:, :\], B\[n_st:n_st \+ BLK_N, k_st:k_st \+ BLK_K\],\n\s+)dispatch=\"tma_auto\", ",
            r"\1", "hang", features.TMA_EVERY_OPERAND.name, todo="4.4", names=("loaded by TMA", "dispatch")),
    Variant("blackwell-4-k-loop-on-4-threads", "blackwell", 4,
            r"if warp_id == 0:\n(\s+if T\.cuda\.elect_sync\(\):\n\s+for k in T\.serial)", r"if True:\n\1",
            "hang", features.ONE_MMA_ISSUER.name, todo="4.5", names=("one thread", "elect_sync")),
    # the prologue loads every K tile instead of one per stage: stages past the ring's end
    Variant("blackwell-5-prologue-loads-every-k-tile", "blackwell", 5,
            r"PRE_NUM = min\(PIPE_DEPTH, K_TILES\)", "PRE_NUM = K_TILES",
            "fault", SIMULATED, todo="5.1", names=("tma_bar[2]", "past the end")),
    Variant("blackwell-5-phase-never-flipped", "blackwell", 5, r"\n\s+phase_tma\[s\] = phase_tma\[s\] \^ 1", "",
            "wrong", features.PHASES_FLIP.name, todo="5.8", names=("flipping phase",)),
    # (step 6 gives the epilogue as code: the mistake is made in step 4's TODO 4.6)
    Variant("blackwell-4-no-fence-before-tma-store", "blackwell", 4,
            r"(Tx\.copy\(Dsmem\[warp_id \* 32 \+ lane_id, :\], Dreg_f16\[:\]\)\n\s+#[^\n]*)\n\s+"
            r"T\.ptx\.fence\.proxy\.async_\.shared__cta\(\)", r"\1",
            "wrong", features.STORE_FENCE.name, todo="4.6", names=("fence",)),
    Variant("blackwell-6-dsmem-rewritten-before-the-store-read-it", "blackwell", 6,
            _STAGING_WAIT_THEN_CTA_SYNC, "",
            "race", features.STAGING_REUSE.name, todo="6.3", names=("Dsmem", "wait_group")),
    # ---- Blackwell steps 4-6: one mistake per TODO, named by its first finding ----
    Variant("blackwell-4-expect-tx-without-the-fp16-size", "blackwell", 4, _TILE_BYTES, r"\1",
            "wrong", SIMULATED, todo="4.1", names=("tma_bar", "expect_tx")),
    Variant("blackwell-4-tma-bar-counts-both-copies", "blackwell", 4, _INIT_TMA_BAR_0, r"\g<1>2)",
            "hang", SIMULATED, todo="4.2", names=("tma_bar", "init count")),
    Variant("blackwell-4-tma-phase-starts-at-1", "blackwell", 4, r"phase_tma = 0\n", "phase_tma = 1\n",
            "wrong", SIMULATED, todo="4.3", names=("tma_bar", "starting phase")),
    Variant("blackwell-4-phase-never-flipped", "blackwell", 4, r"\n\s+phase_tma = phase_tma \^ 1", "",
            "hang", features.PHASES_FLIP.name, todo="4.4", names=("flipping phase",)),
    Variant("blackwell-4-no-wait-on-mma-bar", "blackwell", 4, r"\n\s+" + _MMA_BAR_WAIT_LINES, "",
            "wrong", SIMULATED, todo="4.5", names=("mma_bar", "wait")),
    Variant("blackwell-4-no-final-bulk-wait", "blackwell", 4, _FINAL_BULK_WAIT, "",
            "race", features.STORE_WAITED.name, todo="4.7", names=("wait_group", "exits")),
    # tma_bar[1] lands in the padding before the 1 KiB-aligned tiles: expected to come out right by luck
    Variant("blackwell-5-one-tma-barrier-for-two-stages", "blackwell", 5, _TMA_BAR_PER_STAGE, r"\g<1>1,)",
            "race", SIMULATED, todo="5.2", names=("tma_bar", "1 slot")),
    # (Blackwell derives the MMA's descriptors from the layout: only the build rejects an unswizzled stage buffer)
    Variant("blackwell-5-asmem-without-its-swizzled-layout", "blackwell", 5, _ASMEM_LAYOUT, "",
            "wrong", BUILD, todo="5.3", names=("Asmem", "no-swizzle")),
    Variant("blackwell-5-stage-0-initialised-twice", "blackwell", 5, _INIT_STAGE_S, r"\g<1>0]",
            "hang", SIMULATED, todo="5.4", names=("tma_bar[1]", "initialised")),
    Variant("blackwell-5-phases-start-at-1", "blackwell", 5, r"phase_tma\[s\] = 0\n", "phase_tma[s] = 1\n",
            "wrong", SIMULATED, todo="5.5", names=("tma_bar", "starting phase")),
    Variant("blackwell-5-a-copy-completes-on-stage-0", "blackwell", 5, _A_COPY_MBAR_STAGE, r"\g<1>0\2",
            "hang", SIMULATED, todo="5.6", names=("tma_bar[0]", "mbar")),
    Variant("blackwell-5-prologue-fills-one-stage", "blackwell", 5, _PROLOGUE, "for s in T.unroll(1):",
            "hang", features.EVERY_K_TILE_LOADED.name, todo="5.7", names=("every K tile",)),
    Variant("blackwell-5-refill-before-the-mma-wait", "blackwell", 5,
            r"\n(\s+)" + _MMA_BAR_WAIT_LINES + r"\n(\s+# ---- refill[^\n]*\n\s+if k \+ PIPE_DEPTH < K_TILES:\n"
            r"\s+tma_load\(s, k \+ PIPE_DEPTH\))",
            r"\n\2\n\1T.cuda.mbarrier_wait(mma_bar.ptr_to([0]), phase_mma)\n\1phase_mma = phase_mma ^ 1",
            "wrong", SIMULATED, todo="5.8", names=("mma_bar", "refill")),
    Variant("blackwell-6-one-cta-per-tile-around-the-tile-loop", "blackwell", 6, _ONE_CTA_PER_SM, _ONE_CTA_PER_TILE,
            "slow", features.TILE_STRIDE.name, todo="6.1", names=("one CTA per SM",)),
    Variant("blackwell-6-tile-origin-from-the-cta-id", "blackwell", 6,
            r"m_st = T\.meta_var\(tile_scheduler\.m_idx \* BLK_M\)", "m_st = T.meta_var(bx * BLK_M)",
            "wrong", features.TILE_FOLLOWED.name, todo="6.2", names=("m_st", "scheduler")),
    Variant("blackwell-6-tile-loop-never-steps", "blackwell", 6, r"\n\s+tile_scheduler\.next_tile\(\)", "",
            "hang", features.TILE_STRIDE.name, todo="6.4", names=("next_tile()", "never ends")),
    # traps named by the skeletons
    # (A's twin of blackwell-4-b-by-cp-async; the skeleton's TODO 4.4 names it as its trap)
    Variant("blackwell-4-a-by-cp-async", "blackwell", 4,
            r"(Tx\.copy_async\(Asmem\[:, :\], A\[m_st:m_st \+ BLK_M, k_st:k_st \+ BLK_K\],\n\s+)"
            r"dispatch=\"tma_auto\", ", r"\1",
            "hang", features.TMA_EVERY_OPERAND.name, todo="4.4", names=("loaded by TMA", "dispatch"), trap=True),
    # ---- Blackwell, steps 7-10 (expected on a GPU: Blackwell cannot run here) ----
    # step 7
    Variant("blackwell-7-mma2ld-a-plain-mbarrier", "blackwell", 7,
            r"mma2ld = TCGen05Bar\(pool, 1\)", "mma2ld = MBarrier(pool, 1)",
            "wrong", SIMULATED, todo="7.1", names=("mma2ld", "tcgen05.commit")),
    Variant("blackwell-7-ld2mma-counts-one-arrival", "blackwell", 7,
            r"ld2mma\.init\(WB_THREADS\)", "ld2mma.init(1)",
            "wrong", SIMULATED, todo="7.2", names=("ld2mma", "init count")),
    Variant("blackwell-7-producer-starts-at-phase-0", "blackwell", 7,
            r"tma_state = PipelineState\(PIPE_DEPTH, 1\)", "tma_state = PipelineState(PIPE_DEPTH, 0)",
            "hang", SIMULATED, todo="7.3", names=("mma2tma", "starting phase")),
    Variant("blackwell-7-no-tcgen05-fence-after-wait", "blackwell", 7,
            r"(tma2mma\.wait\(s, mma_state\.phase\))\n\s+T\.ptx\.tcgen05\.fence__after_thread_sync\(\)", r"\1",
            "wrong", features.TCGEN05_FENCES.name, todo="7.4", names=("fence__after_thread_sync", "mbarrier wait")),
    Variant("blackwell-7-mma-on-32-threads", "blackwell", 7,
            r"(acc_state = PipelineState\(1, 1\)[^\n]*\n\s+)if T\.cuda\.elect_sync\(\):", r"\1if True:",
            "hang", features.ONE_MMA_ISSUER.name, todo="7.4",
            names=("one thread issues the tcgen05 MMA", "elect_sync")),
    Variant("blackwell-7-accumulator-reset-every-k-tile", "blackwell", 7, r"accum=\(k != 0\)", "accum=False",
            "wrong", features.ACCUMULATE_FLAG.name, todo="7.4", names=("accumulate flag", "first K tile")),
    # TMEM handed back without ordering the tcgen05.ld reads before the MMA's next writes (a student trial's mistake)
    Variant("blackwell-7-no-tcgen05-fence-before-the-handback", "blackwell", 7,
            r"(# all TMEM reads of this tile are done: the MMA may overwrite it)\n\s+T\.ptx\.tcgen05\.fence__before_thread_sync\(\)",
            r"\1", "race", features.TMEM_HANDBACK_FENCE.name, todo="7.5",
            names=("fence::before_thread_sync", "hands TMEM back")),
    Variant("blackwell-7-dsmem-rewritten-before-the-store-read-it", "blackwell", 7,
            _STAGING_WAIT + r"(\n\s+T\.cuda\.warpgroup_sync)", r"\1",
            "race", features.STAGING_REUSE.name, todo="7.5", names=("Dsmem", "wait_group.read")),
    # step 8: the stage counted in fp16 elements, not bytes: 13 stages, 416 KiB, a kernel that never launches
    Variant("blackwell-8-depth-from-a-stage-counted-in-elements", "blackwell", 8,
            r"PIPE_DEPTH = \(SMEM_PER_CTA - EPILOGUE_SMEM\) // TILE_BYTES",
            "PIPE_DEPTH = (SMEM_PER_CTA - EPILOGUE_SMEM) // (BLK_M * BLK_K + BLK_N * BLK_K)",
            "fault", features.SHARED_MEMORY_FITS.name, todo="8.1", names=("shared memory", "PIPE_DEPTH")),
    # step 9
    # MMA_M of one CTA: the scheduler walks twice the M tiles, half of them below the matrix (right, but slow)
    Variant("blackwell-9-mma-m-of-one-cta", "blackwell", 9,
            r"MMA_M, MMA_N = BLK_M \* CTA_GROUP, BLK_N \* CTA_GROUP", "MMA_M, MMA_N = BLK_M, BLK_N * CTA_GROUP",
            "slow", SIMULATED, todo="9.1", names=("outside", "tile counts")),
    Variant("blackwell-9-rank-from-the-second-id", "blackwell", 9,
            r"cbx, cby = T\.cta_id_in_cluster", "cby, cbx = T.cta_id_in_cluster",
            "hang", SIMULATED, todo="9.2", names=("stores too", "rank in the cluster")),
    # ptxas rejects a kernel that mixes cta_group::1 (the TMEM alloc) and cta_group::2 (the MMA), naming both
    Variant("blackwell-9-tmem-allocated-for-one-cta", "blackwell", 9,
            r"total_cols=512, cta_group=CTA_GROUP\)", "total_cols=512, cta_group=1)",
            "fault", BUILD, todo="9.3", names=("cta_group::1", "cta_group::2")),
    Variant("blackwell-9-ld2mma-counts-one-cta", "blackwell", 9,
            r"ld2mma\.init\(WB_THREADS \* CTA_GROUP\)", "ld2mma.init(WB_THREADS)",
            "wrong", SIMULATED, todo="9.4", names=("ld2mma", "init count")),
    Variant("blackwell-9-cta-sync-after-init", "blackwell", 9,
            r"T\.cuda\.cluster_sync\(\)(\n\s+T\.ptx\.tcgen05\.fence__after_thread_sync\(\)\n\s+# <<< TODO 9\.4)",
            r"T.cuda.cta_sync()\1",
            "hang", SIMULATED, todo="9.4", names=("tma2mma", "cluster_sync")),
    Variant("blackwell-9-both-ctas-on-the-same-rows", "blackwell", 9,
            r"m_st = T\.meta_var\(\(tile_scheduler\.m_idx \* CTA_GROUP \+ cbx\) \* BLK_M\)",
            "m_st = T.meta_var(tile_scheduler.m_idx * MMA_M)",
            "wrong", SIMULATED, todo="9.5", names=("stores too", "rank in the cluster")),
    Variant("blackwell-9-loads-complete-on-their-own-ctas-barrier", "blackwell", 9,
            r"tma2mma\.remote_view\(0\)", "tma2mma.remote_view(cbx)",
            "hang", SIMULATED, todo="9.6", names=("tma2mma", "mbar")),
    Variant("blackwell-9-mma2tma-commit-not-multicast", "blackwell", 9,
            r"mma2tma\.arrive\(s, cta_group=CTA_GROUP, cta_mask=3\)", "mma2tma.arrive(s, cta_group=CTA_GROUP)",
            "hang", SIMULATED, todo="9.8", names=("mma2tma", "cta_mask")),
    # found by a student trial: the release after every chunk instead of once per tile
    Variant("blackwell-9-ld2mma-arrive-every-chunk", "blackwell", 9,
            r"( +)if c == MMA_N // EPI_N - 1:\n\s+#[^\n]*\n\s+(T\.ptx\.tcgen05\.fence__before_thread_sync\(\))\n"
            r"\s+(ld2mma\.arrive\(0, remote=0\))", r"\1\2\n\1\3",
            "wrong", SIMULATED, todo="9.9", names=("ld2mma", "once per phase")),
    Variant("blackwell-9-cta-sync-before-the-dealloc", "blackwell", 9,
            r"(# >>> TODO 9\.10[^\n]*\n\s+)T\.cuda\.cluster_sync\(\)", r"\1T.cuda.cta_sync()",
            "fault", SIMULATED, todo="9.10", names=("ld2mma", "cluster_sync")),
    # step 10
    # step 9's stage (one A tile) sizes the ring: 6 stages of 48 KiB, 321 KiB, a kernel that never launches
    Variant("blackwell-10-depth-from-step-9s-stage", "blackwell", 10,
            r"PIPE_DEPTH = \(SMEM_PER_CTA - EPILOGUE_SMEM\) // TILE_BYTES_ALL",
            "PIPE_DEPTH = (SMEM_PER_CTA - EPILOGUE_SMEM) // ((BLK_M * BLK_K + BLK_N * BLK_K) * 2)",
            "fault", features.SHARED_MEMORY_FITS.name, todo="10.1", names=("shared memory", "PIPE_DEPTH")),
    Variant("blackwell-10-ld2mma-one-slot", "blackwell", 10,
            r"ld2mma = MBarrier\(pool, NUM_CONSUMER\)", "ld2mma = MBarrier(pool, 1)",
            "hang", SIMULATED, todo="10.2", names=("ld2mma", "past the end")),
    Variant("blackwell-10-asmem-stages-second", "blackwell", 10,
            r"Asmem = pool\.alloc\(\(PIPE_DEPTH, NUM_CONSUMER, BLK_M, BLK_K\)",
            "Asmem = pool.alloc((NUM_CONSUMER, PIPE_DEPTH, BLK_M, BLK_K)",
            "wrong", SIMULATED, todo="10.3", names=("Asmem", "first dimension is its stages")),
    Variant("blackwell-10-mma2tma-counts-one-commit", "blackwell", 10,
            r"mma2tma\.init\(NUM_CONSUMER\)", "mma2tma.init(1)",
            "wrong", SIMULATED, todo="10.4", names=("mma2tma", "init count")),
    # M tiles of one consumer: half the cluster tiles lie below the matrix (right, but slow)
    Variant("blackwell-10-m-tiles-of-one-consumer", "blackwell", 10,
            r"num_m_tiles=M // \(MMA_M \* NUM_CONSUMER\)", "num_m_tiles=M // MMA_M",
            "slow", SIMULATED, todo="10.5", names=("outside", "tile counts")),
    Variant("blackwell-10-tma2mma-armed-with-one-ctas-bytes", "blackwell", 10,
            r"tma2mma\.arrive\(s, TILE_BYTES_ALL \* CTA_GROUP\)", "tma2mma.arrive(s, TILE_BYTES_ALL)",
            "wrong", SIMULATED, todo="10.6", names=("tma2mma", "expect_tx")),
    Variant("blackwell-10-mma-on-every-warp", "blackwell", 10,
            r"if warp_id < NUM_CONSUMER:\n(\s+mma_state = PipelineState)", r"if True:\n\1",
            "hang", features.TWO_MMA_ISSUERS_ELECTED.name, todo="10.7",
            names=("issued by different warps", "warp id")),
    Variant("blackwell-10-writebacks-share-a-named-barrier", "blackwell", 10,
            r"warpgroup_sync\(WB_BARRIER \+ wg_id\)", "warpgroup_sync(WB_BARRIER)",
            "race", SIMULATED, todo="10.8", names=("named barrier",)),
    # traps named by the skeletons
    # (the skeleton's TODO 9.7: CTA 0 arms tma2mma with one CTA's bytes, so the phase completes before the peer's
    # tiles have landed and the MMA may read a stage half loaded)
    Variant("blackwell-9-tma2mma-armed-with-one-ctas-bytes", "blackwell", 9,
            r"tma2mma\.arrive\(s, TILE_BYTES \* CTA_GROUP\)", "tma2mma.arrive(s, TILE_BYTES)",
            "wrong", SIMULATED, todo="9.7", names=("tma2mma", "expect_tx"), trap=True),
    # Hopper step 11, one per TODO of its skeleton, as Blackwell's below
    Variant("hopper-11-k-tiles-rounded-down", "hopper", 11,
            r"K_TILES = -\(-K // BLK_K\)", "K_TILES = K // BLK_K",
            "wrong", features.K_COVERED.name, todo="11.1", names=("every K tile",)),
    # the cluster tile count rounded down: at 1000 rows, the last 232 are never computed (the whole grid's stores,
    # simulated, leave them out)
    Variant("hopper-11-tiles-rounded-down", "hopper", 11,
            r"num_m_tiles=-\(-M // \(CLUSTER \* BLK_M\)\)", "num_m_tiles=M // (CLUSTER * BLK_M)",
            "wrong", SIMULATED, todo="11.2", names=("no CTA of the grid stores D[768:1000", "ceil(M"),
            shape=(1000, 1000, 1000)),
    Variant("hopper-11-loads-by-tma-auto", "hopper", 11,
            r'dispatch="tma_explicit", mbar=', 'dispatch="tma_auto", mbar=',
            "build", BUILD, todo="11.3", names=("tma_explicit",), shape=(1, 8, 8)),
    Variant("hopper-11-stores-by-tma-auto", "hopper", 11,
            r'(Dsmem\[consumer, :, part \* 64:\(part \+ 1\) \* 64\], )dispatch="tma_explicit"', r'\1dispatch="tma_auto"',
            "build", BUILD, todo="11.4", names=("tma_explicit",), shape=(1, 8, 8)),
    # outside the TODOs (step 10's code, kept): a ragged step's partner CTA must keep its own rows even where they
    # lie past the matrix (caught where the first cluster's tiles are simulated)
    Variant("hopper-11-partner-on-the-same-rows", "hopper", 11,
            r"\+ rank \* BLK_M\)", ")",
            "wrong", SIMULATED, names=("same part",)),
    # ... and a box may hang over the edge, never start past the cluster tiles that cover the matrix (H200,
    # 2026-12-02: no fault, the tiles of every other row of clusters never written, 49% of outputs at 1000^3)
    Variant("hopper-11-cluster-rows-doubled", "hopper", 11,
            r"m_idx \* \(CLUSTER \* BLK_M\)", "m_idx * (2 * CLUSTER * BLK_M)",
            "wrong", SIMULATED, names=("reaches outside",)),
    # Blackwell step 11, one per TODO of its skeleton
    # step 10's K tile count, rounded down: the last K - K % 64 columns are never multiplied (K = 568: 8 of 9 K tiles)
    Variant("blackwell-11-k-tiles-rounded-down", "blackwell", 11,
            r"K_TILES = -\(-K // BLK_K\)", "K_TILES = K // BLK_K",
            "wrong", features.K_COVERED.name, todo="11.1", names=("every K tile",)),
    # M tiles rounded up over one consumer's 256 rows, not the cluster tile's 512: tiles start past the matrix
    Variant("blackwell-11-m-tiles-of-one-consumer", "blackwell", 11,
            r"num_m_tiles=-\(-M // \(MMA_M \* NUM_CONSUMER\)\)", "num_m_tiles=-(-M // MMA_M)",
            "slow", SIMULATED, todo="11.2", names=("outside", "tile counts")),
    # step 10's loads: with 64-column boxes TIRx's tma_auto finds the same tensor maps as tma_explicit at most ragged
    # shapes (the same TIR at 1000^3), but refuses a one-row matrix (M = 1: "globalStrides[0]=2 ... use tma_explicit")
    Variant("blackwell-11-loads-by-tma-auto", "blackwell", 11,
            r'(Tx\.copy_async\([AB]smem[^\n]*\n[^\n]*)dispatch="tma_explicit"', r'\1dispatch="tma_auto"',
            "build", BUILD, todo="11.3", names=("tma_explicit",), shape=(1, 8, 8)),
    # step 10's store, the same refusal
    Variant("blackwell-11-stores-by-tma-auto", "blackwell", 11,
            r'(Dsmem\[wg_id, :, :\], )dispatch="tma_explicit"', r'\1dispatch="tma_auto"',
            "build", BUILD, todo="11.4", names=("tma_explicit",), shape=(1, 8, 8)),
    # step 12: the fixup's order around its lock in global memory, read off the CUDA (features.FIXUP_*) at the CPU
    # grade's static shape, which is data-parallel (the simulated fixup: the block at the end)
    Variant("hopper-12-count-without-a-fence", "hopper", 12,
            r"\n\s+T\.cuda\.thread_fence\(\)[^\n]*", "",
            "race", features.FIXUP_RELEASE.name, todo="12.13", names=("lock's count", "thread_fence"), trap=True),
    Variant("hopper-12-count-before-the-barrier", "hopper", 12,
            r"(partials\[cluster, rank, consumer, i, thread\] = acc\[i\]\n)( +)T\.cuda\.warpgroup_sync\(EPILOGUE_BAR "
            r"\+ consumer\)\n(\s+if warp_id == 0:\n\s+if lane_id == 0:\n\s+T\.cuda\.thread_fence\(\)[^\n]*\n"
            r"\s+T\.evaluate\(T\.cuda\.atomic_add[^\n]*\n)",
            r"\1\3\2T.cuda.warpgroup_sync(EPILOGUE_BAR + consumer)\n",
            "race", features.FIXUP_RELEASE.name, todo="12.13", names=("lock's count", "named barrier"), trap=True),
    # without the acquire the partial sums may be read before the count is seen (H200, 2026-12-02: 95% of outputs
    # wrong at 257x264x4104, no hang)
    Variant("hopper-12-spin-on-a-plain-load", "hopper", 12,
            r"T\.ptx\.ld\.acquire\.gpu\.global_\.b32\(seen\[0\], locks\.ptr_to\(\[lock_index\]\)\)",
            "seen[0] = locks[lock_index]",
            "wrong", features.FIXUP_ACQUIRE.name, todo="12.14", names=("ld.acquire",)),
    Variant("hopper-12-partials-read-before-the-barrier", "hopper", 12,
            r"(locks\[lock_index\] = 0[^\n]*\n)\s+T\.cuda\.warpgroup_sync\(EPILOGUE_BAR \+ consumer\)\n", r"\1",
            "race", features.FIXUP_ACQUIRE.name, todo="12.14", names=("barrier before the partial sums",)),
    Variant("hopper-12-lock-left-counted", "hopper", 12,
            r"\n\s+locks\[lock_index\] = 0[^\n]*", "",
            "hang", features.LOCKS_RESET.name, todo="12.14", names=("lock", "back at 0")),
)

# Mistakes of step 12 that no CPU check catches: each builds and passes the CPU grade at every correctness shape
# (the protocol checker simulates the whole grid there, the fixup too), so it is not in VARIANTS: the mistake is in
# the values computed.
# tests/test_known_bad_gpu.py runs them on a Hopper GPU.
GPU_ONLY_VARIANTS: tuple[Variant, ...] = (
    # the model counts a cluster's whole tiles rounded down: a last wave that leaves SMs idle costs nothing, and fewer
    # tiles than clusters nothing at all, so the widest tiles win where they leave most SMs idle (256x4096x4096: 32
    # tiles of 128x256 for 132 SMs, which the reference's model rates at 1.80x the time of its 128 tiles of 128x64;
    # 256-wide pairs, 16 of them, ran 1.95x on an H200). The mistake it replaced (each iteration costed without the
    # tile's width) passed the H200 grade on 2026-12-02, once split-K could fill the GPU with its wide tiles (rated
    # 1.16x there); two before it (the fixup left out of the cost, ranges without a floor of K tiles) changed no plan
    # at a graded shape and passed the H100 grade. A plan mistake is graded only where the plan it makes is slow
    # (test_known_bad_cpu checks that each of these makes one the reference's model rates well past the limit).
    # On an H200 (2026-12-02, alone): too slow, 2.14x the reference's time at 256x4096x4096, 1.99x at 1x4096x14336,
    # 2.59x at 200x4096x14336.
    Variant("hopper-12-waves-rounded-down", "hopper", 12,
            r"whole_tiles_each = -\(-\(self\.tiles - self\.sk_tiles\) // self\.clusters\)",
            "whole_tiles_each = (self.tiles - self.sk_tiles) // self.clusters",
            "slow", GPU_ONLY, todo="12.1", names=("whole_tiles_each",)),
    Variant("hopper-12-first-unit-one-late", "hopper", 12,
            r"(return T\.Select\(first < EXTRA \* \(IPU \+ 1\)[^\n]*)", r"\1 + 1",
            "wrong", GPU_ONLY, todo="12.6", names=("first_unit",)),
    # one partial slot: every stream-K cluster stores over the same sums (a fault on the H100; on an H200,
    # 2026-11-27 evening, wrong: 0.1% of outputs at 257x264x4104)
    Variant("hopper-12-one-partial-slot", "hopper", 12,
            r"PARTIALS = \(max\(plan\.sk_units, 1\),", "PARTIALS = (1,",
            "fault", GPU_ONLY, todo="12.8", names=("partials",)),
    # the box of A's last rows cut only where one tile holds all of M: where the last row of tiles holds few rows, TMA
    # fills the rest of its box with zeros every K tile (H200, 2026-11-29: 200x4096x14336 0.58x cuBLAS, the reference
    # 0.95x); right at 1x4096x14336. Since 200 tokens take split-K over 128-wide pairs the wgmmas hide those rows there:
    # it passed an H200 grade (2026-12-02), so the grade times 72x4096x14336 too (64-row tiles 64 wide, 56 rows of 64):
    # 1.54x the reference's time there (H200)
    Variant("hopper-12-a-tail-min-of-blk-m-and-m", "hopper", 12, r"A_TAIL = MM % BLK_M or BLK_M",
            "A_TAIL = min(BLK_M, MM)", "slow", GPU_ONLY, todo="12.7", names=("A_TAIL",)),
    # a piece that begins mid-tile adds the previous unit's accumulator
    Variant("hopper-12-accumulate-from-the-tile-start", "hopper", 12,
            r"\(k - work\.k_begin\) \* \(BLK_K // MMA_K\) \+ kk != 0", "k * (BLK_K // MMA_K) + kk != 0",
            "wrong", GPU_ONLY, todo="12.12", names=("accumulate",)),
    # where A and B are swapped, D^T's registers staged as if they were D's: every box lands where it should, with
    # D^T's block in it, not D's (at 137x12296x1032, a grader shape; its grade failed on an H200, 2026-11-29)
    Variant("hopper-12-swapped-staging-not-transposed", "hopper", 12,
            r"Tsmem\[consumer, acc_col\(lane_id, i\), acc_row\(0, warp_id, lane_id, i\)\]",
            "Tsmem[consumer, acc_row(0, warp_id, lane_id, i), acc_col(lane_id, i)]",
            "wrong", GPU_ONLY, todo="12.15", names=("Tsmem",)),
)

# ---- Hopper step 12: the fixup through global memory ----
# The protocol checker runs the whole grid with its locks (grader/analysis/protocol.py, run_grid). These are graded
# at a correctness shape that step 12 deals as stream-K at 132 SMs: the static-check shape is whole tiles, where
# no lock is used. On a GPU, the later-CTA wait runs through while all 132 CTAs are resident (one per SM): it
# hangs only where the GPU holds fewer CTAs than the grid, so it is rejected for what CUDA allows ("race").
_FIXUP_SHAPE = (257, 264, 4104)
_SWAPPED_SHAPE = (137, 12296, 1032)  # the host swaps A and B (grader/core/steps.py)
VARIANTS += (
    # the partial range stores its sums and never adds its count: the final range spins for ever
    Variant("hopper-12-fixup-no-release", "hopper", 12,
            r"\n\s+T\.evaluate\(T\.cuda\.atomic_add\(locks\.ptr_to\(\[lock_index\]\), work\.k_end - work\.k_begin\)\)",
            "", "hang", SIMULATED, todo="12.13", names=("locks[", "a release that never came"), shape=_FIXUP_SHAPE),
    # clusters numbered from the last CTA: a tile's final range waits on CTAs with higher indices
    Variant("hopper-12-fixup-waits-on-a-later-cta", "hopper", 12,
            r"cluster = T\.meta_var\(bx // CLUSTER\)", "cluster = T.meta_var((sm_count - 1 - bx) // CLUSTER)",
            "race", SIMULATED, todo="12.9", names=("locks[", "comes after", "lower indices"), shape=_FIXUP_SHAPE),
    # both consumers count into one lock: it reaches 2 x k_begin, and a wait for k_begin may never see its value
    Variant("hopper-12-lock-shared-by-the-consumers", "hopper", 12,
            r"lock_index = T\.meta_var\(\(work\.tile \* CLUSTER \+ rank\) \* NUM_CONSUMERS \+ consumer\)",
            "lock_index = T.meta_var((work.tile * CLUSTER + rank) * NUM_CONSUMERS)",
            "hang", SIMULATED, todo="12.11", names=("lock",), shape=_FIXUP_SHAPE),
    # a count of the whole tile: the final piece's own K tiles are never in the lock, so the wait is never served
    Variant("hopper-12-wait-for-the-whole-tile", "hopper", 12,
            r"while seen\[0\] != work\.k_begin:", "while seen[0] != K_TILES:",
            "hang", SIMULATED, todo="12.14", names=("lock", "never"), shape=_FIXUP_SHAPE),
)

# Step 12's mistakes in which work goes where, seen over the whole grid that the protocol checker runs for a step that
# takes any shape: the output's coverage by the TMA stores, a box stored by two clusters, the locks at the end
_ONE_WAVE_SHAPE = (7, 264, 72)  # a few whole tiles, a small grid: the cheapest shape these show at


def _work_placement_variants(track: str, cta_rows: str, first_uncovered: str) -> tuple[Variant, ...]:
    """The same three mistakes in either track's step 12 (the host's plan and WorkUnits are the same code there):
    `cta_rows` is the solution's name for a CTA's rows, `first_uncovered` the part of D left out at 7x264x72."""
    return (
        Variant(f"{track}-12-tiles-rounded-down", track, 12,
                rf"tiles = -\(-M // \({cta_rows} \* cluster\)\) \* -\(-N // tile_n\)",
                f"tiles = max(M // ({cta_rows} * cluster) * (N // tile_n), 1)",
                "wrong", SIMULATED, todo="12.2", names=(f"no CTA of the grid stores {first_uncovered}", "ceil(M"),
                shape=_ONE_WAVE_SHAPE),
        # every piece of a range starts at its tile's first K tile: K tiles computed twice, and the counts the other
        # pieces add stay in the lock. The final piece, its k_begin 0, takes itself for a whole tile: it computes all
        # of it and waits on no one, so the outputs are right (H200, 2026-12-02: the grade's shapes right, the timed
        # one 1.56x the reference's time: slow; the protocol checker names the lock left counted). Blackwell's final
        # piece has the same guard (k_begin > 0): slow expected there too
        Variant(f"{track}-12-piece-from-the-tile-start", track, 12,
                r"self\.k_begin = T\.max\(self\.tile \* K_TILES, self\.range_begin\) - self\.tile \* K_TILES",
                "self.k_begin = 0",
                "slow", SIMULATED, todo="12.4", names=("locks[0] ends the launch",),
                shape=_FIXUP_SHAPE),
        # the tile loop steps by 1: the first cluster runs every tile (Hopper, H200 2026-12-02: its grade ran out of
        # the judge's time in the protocol checker, which since ends the grid run at the first tile stored twice;
        # then graded again there: wrong, 12.1% of the outputs at 7x264x72)
        Variant(f"{track}-12-whole-tiles-one-apart", track, 12,
                r"self\._data_parallel\(self\.tile \+ self\.plan\.clusters\)", "self._data_parallel(self.tile + 1)",
                "wrong", SIMULATED, todo="12.5", names=("stores too", "two clusters compute the same tile"),
                shape=_ONE_WAVE_SHAPE),
    )


VARIANTS += _work_placement_variants("hopper", "rows", "D[0:7, 32:264]") + (
    # more stream-K ranges than clusters (146 for 66 pairs at 257x264x4104): the ranges past the last cluster are never
    # run, so the tiles they end are never stored, and the partial sums of the one they share with cluster 131 are
    # left counted in its lock
    Variant("hopper-12-units-past-the-clusters", "hopper", 12,
            r"sk_units = min\(clusters, sk_tiles \* k_tiles // MIN_K_TILES_PER_UNIT\)",
            "sk_units = sk_tiles * k_tiles // MIN_K_TILES_PER_UNIT",
            "wrong", SIMULATED, todo="12.3", names=("locks[", "ends the launch"), shape=_FIXUP_SHAPE),
    # the kernel keeps step 11's pair where the plan chose one CTA: the plan's clusters and the grid's disagree (at
    # 131x520x192, 34 whole tiles alone: the pairs' origins run past the matrix; at K = 200, rows off 32-byte
    # boundaries, the plan takes pairs itself)
    Variant("hopper-12-cluster-not-from-the-plan", "hopper", 12,
            r"CLUSTER = plan\.cluster  #", "CLUSTER = 2  #",
            "wrong", SIMULATED, todo="12.7", names=("reaches outside", "origin is off"), shape=(131, 520, 192)),
    # the stage's bytes counted as whole boxes where the copies are cut: at 7x264x72 the box of A holds 7 rows, and
    # the barrier waits for 64 that never come
    Variant("hopper-12-bytes-of-whole-boxes", "hopper", 12,
            r"box_rows\(m_st, BLK_M, A_TAIL, MM\)", "BLK_M",
            "hang", SIMULATED, todo="12.10", names=("tma2mma", "expect_tx"), shape=(7, 264, 72)),
    # a 64-row tile's two consumers on the same columns: both multiply the same operands (7x264x72: 64-row tiles)
    Variant("hopper-12-consumers-on-the-same-columns", "hopper", 12,
            r"col_0 = T\.meta_var\(consumer \* \(BLK_N - CONSUMER_N\)\)", "col_0 = T.meta_var(0)",
            "wrong", SIMULATED, todo="12.11", names=("same operands", "B descriptor"), shape=_ONE_WAVE_SHAPE),
    # the columns past the last multiple of 64 never stored: at 4093x2056x560 (176-wide tiles) columns 128-175 of
    # each (where all of a consumer's columns are such, the unused accumulator lets the compiler drop the wgmma)
    Variant("hopper-12-last-columns-left-out", "hopper", 12,
            r"\n +if REST_N > 0:\n(?: {20}[^\n]*\n)+", "\n",
            "wrong", SIMULATED, todo="12.15", names=("no CTA of the grid stores",), shape=(4093, 2056, 560)),
    # the last columns staged in Dsmem: an 8-column slice of the 128B-swizzled tile is not contiguous, which a TMA
    # box needs (the skeleton's trap of TODO 12.15)
    Variant("hopper-12-last-columns-through-the-swizzled-tile", "hopper", 12,
            r"Rsmem\[consumer, (acc_row\(0, warp_id, lane_id, i\)[^\n]*\n(?:.*\n)*?.*)Rsmem\[consumer, :, part \* 8",
            r"Dsmem[consumer, \1Dsmem[consumer, :, part * 8",
            "build", BUILD, todo="12.15", names=("sliced shared layout",), trap=True, shape=_ONE_WAVE_SHAPE),
    # the staging tiles lie over the ring where a cluster has more than one tile: the producer's loads of the next
    # tile land in the stages that the writeback stages D in (2048x4096x256: 128 cluster tiles for 66 clusters, and
    # as many K tiles as stages: the next tile's first loads wrap onto the staging tiles). GPU outcome expected, not
    # yet run (2026-11-27): the next tile multiplies D's bytes
    Variant("hopper-12-staging-over-a-ring-still-loading", "hopper", 12,
            r"STAGING_IN_RING = plan\.sk_units == 0 and plan\.tiles <= plan\.clusters",
            "STAGING_IN_RING = plan.sk_units == 0",
            "wrong", SIMULATED, todo="12.7", names=("Dsmem", "lies over", "TMA copy"), shape=(2048, 4096, 256)),
    # the consumers' shared barrier left out: a consumer stages D over the A rows that the other one's last wgmma
    # still reads (256x4096x64: one K tile, in stage 0, under the staging tiles). A race: the consumers finish their
    # last wgmma close together, so a GPU run may come out right; not yet run on one (2026-11-27)
    Variant("hopper-12-staging-before-the-other-consumer", "hopper", 12,
            r"\n +T\.ptx\.bar\.sync\(EPILOGUE_BAR \+ NUM_CONSUMERS, NUM_CONSUMERS \* 128\)", "\n                    pass",
            "race", SIMULATED, todo="12.15", names=("Dsmem", "lies over", "wgmma group"), trap=True,
            shape=(256, 4096, 64)),
    # the consumers' shared barrier counting one consumer's threads: it completes with either group alone (the race
    # above, where the other consumer is late)
    Variant("hopper-12-staging-barrier-of-one-consumer", "hopper", 12,
            r"T\.ptx\.bar\.sync\(EPILOGUE_BAR \+ NUM_CONSUMERS, NUM_CONSUMERS \* 128\)",
            "T.ptx.bar.sync(EPILOGUE_BAR + NUM_CONSUMERS, 128)",
            "race", SIMULATED, todo="12.15", names=("named barrier 3", "threads of all of them (256)"),
            shape=(256, 4096, 64)),
    # the CTA's index taken for its cluster's: the two CTAs of a pair (only stream-K plans run in pairs) walk different
    # ranges, and a final range waits on a partial sum no cluster leaves
    Variant("hopper-12-cluster-index-of-the-cta", "hopper", 12,
            r"cluster = T\.meta_var\(bx // CLUSTER\)", "cluster = T.meta_var(bx)",
            "hang", SIMULATED, todo="12.9", names=("spins on locks[", "never served"), shape=_FIXUP_SHAPE),
    # where the host swaps A and B (137x12296x1032: its tiles face D^T, 12296 x 137), the kernel's rows still loaded
    # from A: its boxes run down 12296 rows of a 137-row matrix
    Variant("hopper-12-swapped-rows-loaded-from-a", "hopper", 12,
            r"X = T\.meta_var\(B if SWAP else A\)", "X = T.meta_var(A)",
            "wrong", SIMULATED, todo="12.9", names=("TMA load from A", "reaches outside"), shape=_SWAPPED_SHAPE),
    # a swapped block stored at the straight tile's place: D's row taken from the kernel's row (m_st), its column
    # from the kernel's column
    Variant("hopper-12-swapped-block-at-the-straight-place", "hopper", 12,
            r"row = T\.meta_var\(n_st \+ col_0\)  # D's rows are the kernel's columns\n(\s+)col = T\.meta_var\(m_st \+ row_0\)",
            r"row = T.meta_var(m_st + row_0)\n\1col = T.meta_var(n_st + col_0)",
            "wrong", SIMULATED, todo="12.15", names=("TMA store to D", "reaches outside"), shape=_SWAPPED_SHAPE),
)

# ---- Blackwell step 12: the same fixup, its partial sums read out of TMEM by the writeback warpgroups ----
# The order around the lock, read off the CUDA at the static-check shape (whole tiles, the fixup's code is there):
# Hopper 12's spin in the Blackwell kernel's names (the release's order and the reset, FIXUP_RELEASE and LOCKS_RESET,
# are read the same way; Hopper's variants test them). Then the simulated ones, at the stream-K shape. A few only:
# each grade takes 13-20 s.
VARIANTS += (
    Variant("blackwell-12-spin-on-a-plain-load", "blackwell", 12,
            r"T\.ptx\.ld\.acquire\.gpu\.global_\.b32\(seen\[0\], locks\.ptr_to\(\[lock_index\]\)\)",
            "seen[0] = locks[lock_index]",
            "hang", features.FIXUP_ACQUIRE.name, todo="12.13", names=("ld.acquire",)),
    # the partial range stores its sums and never adds its count: the final range spins for ever
    Variant("blackwell-12-fixup-no-release", "blackwell", 12,
            r"\n\s+T\.evaluate\(T\.cuda\.atomic_add\(locks\.ptr_to\(\[lock_index\]\), work\.k_end - work\.k_begin\)\)",
            "", "hang", SIMULATED, todo="12.14", names=("locks[", "a release that never came"), shape=_FIXUP_SHAPE),
    # clusters numbered from the last CTA: a tile's final range waits on CTAs with higher indices
    Variant("blackwell-12-fixup-waits-on-a-later-cta", "blackwell", 12,
            r"cluster = T\.meta_var\(bx // CTA_GROUP\)", "cluster = T.meta_var((sm_count - 1 - bx) // CTA_GROUP)",
            "race", SIMULATED, todo="12.9", names=("locks[", "comes after", "lower indices"), shape=_FIXUP_SHAPE),
    # the wait's barrier left out: the writeback's other threads read the partial sums before the acquire (the
    # static order check passes: the partial range's own barrier stands between the wait and the loads in the code);
    # the skeleton's TODO 12.13 names it as its trap
    Variant("blackwell-12-partials-read-before-the-barrier", "blackwell", 12,
            r"(locks\[lock_index\] = 0[^\n]*\n)\s+T\.cuda\.warpgroup_sync\(WB_BARRIER \+ wg_id\)\n", r"\1",
            "race", SIMULATED, todo="12.13", names=("partials",), trap=True, shape=_FIXUP_SHAPE),
    # the pair's bytes counted as whole boxes where the copies are cut: at 7x264x72 the first box of A holds 7 rows
    Variant("blackwell-12-bytes-of-whole-boxes", "blackwell", 12,
            r"box_rows\(m_st, BLK_M, A_TAIL, M, NUM_CONSUMER \* CTA_GROUP\)", "NUM_CONSUMER * CTA_GROUP * BLK_M",
            "hang", SIMULATED, todo="12.10", names=("tma2mma", "expect_tx"), shape=(7, 264, 72)),
) + _work_placement_variants("blackwell", "CTA_ROWS", "D[0:7, 256:264]")
