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
    check: str  # the name of the static check that must fail on the CPU

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
    # ---- Blackwell, steps 7-10 ----
    Variant("blackwell-7-dsmem-rewritten-before-the-store-read-it", "blackwell", 7,
            _STAGING_WAIT + r"(\n\s+T\.cuda\.warpgroup_sync)", r"\1",
            "race", features.STAGING_REUSE.name),
    Variant("blackwell-7-no-tcgen05-fence-after-wait", "blackwell", 7,
            r"(tma2mma\.wait\(s, mma_state\.phase\))\n\s+T\.ptx\.tcgen05\.fence__after_thread_sync\(\)", r"\1",
            "wrong", features.TCGEN05_FENCES.name),
    Variant("blackwell-7-mma-on-32-threads", "blackwell", 7,
            r"(acc_state = PipelineState\(1, 1\)[^\n]*\n\s+)if T\.cuda\.elect_sync\(\):", r"\1if True:",
            "hang", features.ONE_MMA_ISSUER.name),
    Variant("blackwell-8-accumulator-reset-every-k-tile", "blackwell", 8, r"accum=\(k != 0\)", "accum=False",
            "wrong", features.ACCUMULATE_FLAG.name),
    Variant("blackwell-10-mma-on-every-warp", "blackwell", 10,
            r"if warp_id < NUM_CONSUMER:\n(\s+mma_state = PipelineState)", r"if True:\n\1",
            "hang", features.TWO_MMA_ISSUERS_ELECTED.name),
)
