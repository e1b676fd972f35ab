"""Write variants of step 12's writeback under experiments/every_shape/epilogue/VARIANT/hopper/: an experiment, not a
step. At 4096^3 step 12 ties cuBLAS in cycles (ncu: both tensor-bound); what its consumers spend outside the
tensor cores is the writeback (2.5% of 4096^3), during which neither consumer issues a wgmma. Variants:

- stsm: the staging written with stmatrix (one 16-byte row of four 8x8 matrices per lane: 8 instructions a round
  in place of 64 two-byte stores; the 128B swizzle applied by Dsmem.ptr_to, as in the stores it replaces).
- skew: the two consumers' writebacks in turn (consumer 0's, then consumer 1's: two named barriers, 4 and 5), so
  that one consumer's wgmmas run while the other writes back. Only an order in time: each consumer has its own
  staging tile. Consumer 0 waits for consumer 1's previous writeback before its own (after the loop, for its last).
- stsm_skew: both.
- noepi: no writeback at all (D is never written: wrong, timed with check_and_time.py --time-wrong), the bound
  of what a faster or hidden writeback can give.

    python experiments/every_shape/epilogue/make_variant.py
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from variant import write_variant  # noqa: E402

STSM = [("""                    for i in T.unroll(EPI_N // 2):
                        Dsmem[consumer, acc_row(0, warp_id, lane_id, i), acc_col(lane_id, i)] = T.cast(
                            acc[half * (EPI_N // 2) + i], d_type)""",
         """                    # lane l: row l % 16 of the warp's 16, columns 8 x (l // 16) onwards of 16: matrix l // 8
                    for jj in T.unroll(EPI_N // 16):
                        base = T.meta_var(half * (EPI_N // 2) + jj * 8)
                        T.ptx.stmatrix.sync.aligned.m8n8.x4.shared.b16(
                            Dsmem.ptr_to([consumer, 16 * warp_id + lane_id % 16, 16 * jj + lane_id // 16 * 8]),
                            *[T.call_pure_extern("uint32", "__pack_half2", T.cast(acc[base + 2 * q], d_type),
                                                 T.cast(acc[base + 2 * q + 1], d_type)) for q in range(4)])""")]

SKEW = [
    ("""            seen = T.alloc_local((1,), "int32")
""", """            seen = T.alloc_local((1,), "int32")
            wrote = T.alloc_local((1,), "int32")  # consumer 0: a writeback of its own is behind it
            wrote[0] = 0
"""),
    ("""                # >>> TODO 12.14: the writeback at any width
""", """                # >>> TODO 12.14: the writeback at any width
                if not STAGING_IN_RING:  # in turn: consumer 1 after consumer 0, consumer 0 after consumer 1's last
                    if consumer == 0:
                        if wrote[0] > 0:
                            T.ptx.bar.sync(5, NUM_CONSUMERS * 128)
                    else:
                        T.ptx.bar.sync(4, NUM_CONSUMERS * 128)
"""),
    ("""                # <<< TODO 12.14
                work.next(cluster)
""", """                # <<< TODO 12.14
                if not STAGING_IN_RING:
                    if consumer == 0:
                        T.ptx.bar.arrive(4, NUM_CONSUMERS * 128)
                        wrote[0] = 1
                    else:
                        T.ptx.bar.arrive(5, NUM_CONSUMERS * 128)
                work.next(cluster)
"""),
    ("""            # the last TMA store must finish before the CTA (and its shared memory) goes away
""", """            if not STAGING_IN_RING:
                if consumer == 0:
                    if wrote[0] > 0:
                        T.ptx.bar.sync(5, NUM_CONSUMERS * 128)
            # the last TMA store must finish before the CTA (and its shared memory) goes away
"""),
]


def no_writeback(text: str) -> str:
    start = text.index("                # >>> TODO 12.14: the writeback at any width\n")
    end = text.index("                # <<< TODO 12.14\n")
    return text[:start] + text[end:]


if __name__ == "__main__":
    write_variant(HERE / "stsm", STSM)
    write_variant(HERE / "skew", SKEW)
    write_variant(HERE / "stsm_skew", STSM + SKEW)
    write_variant(HERE / "noepi", [])
    noepi = HERE / "noepi" / "hopper" / "step12_stream_k.py"
    noepi.write_text(no_writeback(noepi.read_text()))
