"""Known-bad kernels: the reference solutions with one plausible mistake each.

Every variant builds and shows its step's features, yet would hang, compute wrong or run slow on a
GPU. The CPU grade must fail each one with a message that names the fix (tests/test_known_bad_cpu.py);
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
    # Hopper: what it did on an H100 (2026-11-24, docs/measurements.md, one-off runner column); Blackwell: expected.
    # hang | wrong | slow | fault (the kernel stops with a CUDA error) | race (breaks the memory model, yet
    # came out right there: rejected for what the PTX ISA allows, not for what one run showed) |
    # redundant (the same work issued by 32 threads: right, and no slower at the timed shape)
    gpu: str
    check: str  # the name of the static check that must fail on the CPU, or SIMULATED
    # Steps 4-10: the TODO whose block the mistake is made in ("9.2"); every TODO of steps 4-10 has a variant.
    todo: str = ""
    # Words the first finding of the CPU grade must contain: the barrier or decision at fault, in the step's
    # own names (e.g. ("mma2tma", "init count")), so that the cause comes before its consequences.
    names: tuple[str, ...] = ()
    # True when a skeleton or a hint names this mistake as a "Trap:" of its TODO (a trap must bite).
    trap: bool = False

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

VARIANTS: tuple[Variant, ...] = (
    # ---- Hopper, steps 1-6 ----
    Variant("hopper-1-no-proxy-fence", "hopper", 1,
            r"(B\[n_st:n_st \+ BLK_N, k_st:k_st \+ BLK_K\]\)\n\s+#[^\n]*)\n\s+T\.ptx\.fence\.proxy\.async_\.shared__cta\(\)", r"\1",
            "race", features.WGMMA_FENCES.name),
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
            r"\1", "hang", features.TMA_EVERY_OPERAND.name),
    Variant("hopper-4-tma-on-4-threads", "hopper", 4, _WARP_THEN_ELECT_THEN_ARRIVE, r"if True:\n\1",
            "fault", features.ONE_TMA_ISSUER.name),
    Variant("hopper-4-tma-on-32-threads", "hopper", 4, _ELECT_THEN_ARRIVE, r"if True:\n\1",
            "fault", features.ONE_EXPECT_TX.name),
    Variant("hopper-4-phase-never-flipped", "hopper", 4, r"\n\s+phase_tma = phase_tma \^ 1", "",
            "fault", features.PHASES_FLIP.name),
    Variant("hopper-4-no-fence-before-tma-store", "hopper", 4,
            r"(acc\[h \* 64 \+ i\], d_type\)\n\s+#[^\n]*)\n\s+T\.ptx\.fence\.proxy\.async_\.shared__cta\(\)", r"\1",
            "race", features.STORE_FENCE.name),
    Variant("hopper-5-phase-never-flipped", "hopper", 5, r"\n\s+phase_tma\[s\] = phase_tma\[s\] \^ 1", "",
            "fault", features.PHASES_FLIP.name),
    Variant("hopper-6-tma-store-on-32-threads", "hopper", 6,
            r"if T\.cuda\.elect_sync\(\):\n(\s+Tx\.copy_async\(D\[)", r"if True:\n\1",
            "redundant", features.ONE_TMA_STORER.name),
    Variant("hopper-6-dsmem-rewritten-before-the-store-read-it", "hopper", 6,
            _STAGING_WAIT_THEN_CTA_SYNC, "",
            "race", features.STAGING_REUSE.name),
    # traps named by the skeletons
    # (A's twin of hopper-4-b-by-cp-async, which hung on the H100; the skeleton's TODO 4.4 names it as its trap)
    Variant("hopper-4-a-by-cp-async", "hopper", 4,
            r"(Tx\.copy_async\(Asmem\[:, :\], A\[m_st:m_st \+ BLK_M, k_st:k_st \+ BLK_K\],\n\s+)"
            r"dispatch=\"tma_auto\", ", r"\1",
            "hang", features.TMA_EVERY_OPERAND.name, todo="4.4", names=("loaded by TMA", "dispatch"), trap=True),
    # ---- Hopper, steps 7-10: the same classes inside warp roles ----
    Variant("hopper-7-dsmem-rewritten-before-the-store-read-it", "hopper", 7,
            _STAGING_WAIT + r"(\n\s+T\.cuda\.warpgroup_sync)", r"\1",
            "race", features.STAGING_REUSE.name),
    Variant("hopper-7-producer-on-32-threads", "hopper", 7,
            r"if T\.cuda\.elect_sync\(\):\n(\s+produce = PipelineState)", r"if True:\n\1",
            "fault", features.ONE_TMA_ISSUER.name),
    Variant("hopper-8-accumulator-reset-every-k-tile", "hopper", 8, _HOPPER_FLAG, "kk != 0",
            "wrong", features.ACCUMULATE_FLAG.name),
    Variant("hopper-9-no-wgmma-fence", "hopper", 9, r"\n\s+T\.ptx\.wgmma\.fence\.sync\.aligned\(\)", "",
            "race", features.WGMMA_FENCES.name),
    Variant("hopper-10-no-fence-before-tma-store", "hopper", 10,
            r"(d_type\))\n\s+T\.ptx\.fence\.proxy\.async_\.shared__cta\(\)", r"\1",
            "race", features.STORE_FENCE.name),
    Variant("hopper-10-one-k-tile", "hopper", 10, r"for k in range\(K_TILES\):", "for k in range(1):",
            "wrong", features.K_LOOP.name),
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
            r"\1", "hang", features.TMA_EVERY_OPERAND.name),
    Variant("blackwell-4-k-loop-on-4-threads", "blackwell", 4,
            r"if warp_id == 0:\n(\s+if T\.cuda\.elect_sync\(\):\n\s+for k in T\.serial)", r"if True:\n\1",
            "hang", features.ONE_MMA_ISSUER.name),
    Variant("blackwell-5-phase-never-flipped", "blackwell", 5, r"\n\s+phase_tma\[s\] = phase_tma\[s\] \^ 1", "",
            "wrong", features.PHASES_FLIP.name),
    Variant("blackwell-6-no-fence-before-tma-store", "blackwell", 6,
            r"(Tx\.copy\(Dsmem\[warp_id \* 32 \+ lane_id, :\], Dreg_f16\[:\]\)\n\s+#[^\n]*)\n\s+"
            r"T\.ptx\.fence\.proxy\.async_\.shared__cta\(\)", r"\1",
            "wrong", features.STORE_FENCE.name),
    Variant("blackwell-6-dsmem-rewritten-before-the-store-read-it", "blackwell", 6,
            _STAGING_WAIT_THEN_CTA_SYNC, "",
            "race", features.STAGING_REUSE.name),
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
            "wrong", SIMULATED, todo="10.3", names=("Asmem", "past the end")),
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
            names=("one thread per MMA warp", "elect_sync")),
    Variant("blackwell-10-writebacks-share-a-named-barrier", "blackwell", 10,
            r"warpgroup_sync\(WB_BARRIER \+ wg_id\)", "warpgroup_sync(WB_BARRIER)",
            "race", SIMULATED, todo="10.8", names=("named barrier",)),
    # traps named by the skeletons
    # (the skeleton's TODO 9.7: CTA 0 arms tma2mma with one CTA's bytes, so the phase completes before the peer's
    # tiles have landed and the MMA may read a stage half loaded)
    Variant("blackwell-9-tma2mma-armed-with-one-ctas-bytes", "blackwell", 9,
            r"tma2mma\.arrive\(s, TILE_BYTES \* CTA_GROUP\)", "tma2mma.arrive(s, TILE_BYTES)",
            "wrong", SIMULATED, todo="9.7", names=("tma2mma", "expect_tx"), trap=True),
)
