"""Write variants of step 12's writeback under experiments/every_shape/epilogue/VARIANT/hopper/: an experiment, not a
step. At 4096^3 step 12 ties cuBLAS in cycles (ncu: both tensor-bound); what its consumers spend outside the
tensor cores is the writeback (2.5% of 4096^3), during which neither consumer issues a wgmma. Variants:

- stsm: the staging written with stmatrix (one 16-byte row of four 8x8 matrices per lane: 8 instructions a round
  in place of 64 two-byte stores; the 128B swizzle applied by Dsmem.ptr_to, as in the stores it replaces).
- skew: the two consumers' writebacks in turn (consumer 0's, then consumer 1's: two named barriers, 4 and 5), so
  that one consumer's wgmmas run while the other writes back. Only an order in time: each consumer has its own
  staging tile. Consumer 0 waits for consumer 1's previous writeback before its own (after the loop, for its last).
- stsm_skew: both.
- noepi: no writeback at all (D is never written: wrong, timed with check_and_time.py --time-wrong). It ran 1.57x
  cuBLAS at 4096^3, over the tensor cores' peak: without a reader of the accumulators the wgmmas go too.
- bound: no writeback, the accumulators summed (a reader, so the wgmmas stay) and stored only if the sum is a value
  it never is (wrong, timed with --time-wrong): what a writeback that costs nothing would give.
- onepass: stsm, and a consumer's whole row of 64-column boxes staged at once (one round: no wait for the first
  round's store to have read the staging before the second), at the price of pipeline stages (4096^3: 64 KiB of
  staging, 3 stages of 48 KiB, not 4).
- stsm_db: stsm, in 64-column chunks that take turns in the two 64-column halves of the staging tile: a chunk waits
  only for the store of the chunk two before it (bulk wait_group.read 1), not for the one just issued.
- direct: no staging: each thread stores its accumulators' column pairs straight to D (4-byte global stores,
  16 contiguous bytes per row and warp instruction), guarded at the matrix's edges; nothing for the consumer to
  wait on but the stores' issue.
- stsm_warp: stsm, and each warp writes back its own 16 rows (a TMA box of 16 x 64 per warp and part): the warps
  of a consumer sync only themselves (warp_sync), no named barrier between them in the writeback.

- under: stsm, and each tile's writeback deferred under the next unit's wgmmas: once a tile's K loop is done its
  sums are packed into fp16 pairs (64 registers beside the 128 of the accumulator), and the consumer issues the next
  unit's first two K tiles before it stages and stores them, so the tensor cores have two K tiles of work queued
  while the writeback runs (the last tile's writeback after the loop). The rest columns go through stmatrix.x2.

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
    ("""                # >>> TODO 12.15: the writeback at any width
""", """                # >>> TODO 12.15: the writeback at any width
                if not STAGING_IN_RING:  # in turn: consumer 1 after consumer 0, consumer 0 after consumer 1's last
                    if consumer == 0:
                        if wrote[0] > 0:
                            T.ptx.bar.sync(5, NUM_CONSUMERS * 128)
                    else:
                        T.ptx.bar.sync(4, NUM_CONSUMERS * 128)
"""),
    ("""                # <<< TODO 12.15
                work.next(cluster)
""", """                # <<< TODO 12.15
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


PER_WARP = [
    ("""                for half in T.unroll(STAGED_N // EPI_N):
                    if warp_id == 0:
                        T.ptx.cp.async_.bulk.wait_group.read(0)
                    T.cuda.warpgroup_sync(EPILOGUE_BAR + consumer)
""", """                for half in T.unroll(STAGED_N // EPI_N):
                    if lane_id == 0:  # this warp's own stores: lane 0 commits them
                        T.ptx.cp.async_.bulk.wait_group.read(0)
                    T.cuda.warp_sync()
"""),
    ("""                    T.ptx.fence.proxy.async_.shared__cta()
                    T.cuda.warpgroup_sync(EPILOGUE_BAR + consumer)
                    if warp_id == 0:
                        if T.cuda.elect_sync():
                            row = T.meta_var(m_st + row_0)
                            for part in T.unroll(EPI_N // 64):
                                col = T.meta_var(n_st + col_0 + half * EPI_N + part * 64)
                                Tx.copy_async(D[row:row + CONSUMER_ROWS, col:col + 64],
                                              Dsmem[consumer, :, part * 64:(part + 1) * 64], dispatch="tma_explicit")
                            T.ptx.cp.async_.bulk.commit_group()
""", """                    T.ptx.fence.proxy.async_.shared__cta()
                    T.cuda.warp_sync()
                    if lane_id == 0:
                        row = T.meta_var(m_st + row_0 + 16 * warp_id)
                        for part in T.unroll(EPI_N // 64):
                            col = T.meta_var(n_st + col_0 + half * EPI_N + part * 64)
                            Tx.copy_async(D[row:row + 16, col:col + 64],
                                          Dsmem[consumer, 16 * warp_id:16 * warp_id + 16, part * 64:(part + 1) * 64],
                                          dispatch="tma_explicit")
                        T.ptx.cp.async_.bulk.commit_group()
"""),
    ("""            # the last TMA store must finish before the CTA (and its shared memory) goes away
            if warp_id == 0:
                T.ptx.cp.async_.bulk.wait_group(0)
""", """            # the last TMA store must finish before the CTA (and its shared memory) goes away
            if lane_id == 0:
                T.ptx.cp.async_.bulk.wait_group(0)
"""),
]


ONE_PASS = [("""    EPI_N = 128 if CONSUMER_N % 128 == 0 else 64
""", """    EPI_N = max(64, CONSUMER_N - CONSUMER_N % 64)
""")]


DOUBLE_BUFFERED = [  # edits of the stsm variant
    ("""                for half in T.unroll(STAGED_N // EPI_N):
                    if warp_id == 0:
                        T.ptx.cp.async_.bulk.wait_group.read(0)
""", """                for chunk in T.unroll(STAGED_N // 64):
                    buf = T.meta_var(chunk % (EPI_N // 64))  # the half of the staging tile this chunk goes through
                    if warp_id == 0:
                        T.ptx.cp.async_.bulk.wait_group.read(EPI_N // 64 - 1)  # the chunk before in `buf` has left
"""),
    ("""                    for jj in T.unroll(EPI_N // 16):
                        base = T.meta_var(half * (EPI_N // 2) + jj * 8)""",
     """                    for jj in T.unroll(4):
                        base = T.meta_var(chunk * 32 + jj * 8)"""),
    ("16 * warp_id + lane_id % 16, 16 * jj + lane_id // 16 * 8]",
     "16 * warp_id + lane_id % 16, buf * 64 + 16 * jj + lane_id // 16 * 8]"),
    ("""                            for part in T.unroll(EPI_N // 64):
                                col = T.meta_var(n_st + col_0 + half * EPI_N + part * 64)
                                Tx.copy_async(D[row:row + CONSUMER_ROWS, col:col + 64],
                                              Dsmem[consumer, :, part * 64:(part + 1) * 64], dispatch="tma_explicit")
""", """                            col = T.meta_var(n_st + col_0 + chunk * 64)
                            Tx.copy_async(D[row:row + CONSUMER_ROWS, col:col + 64],
                                          Dsmem[consumer, :, buf * 64:(buf + 1) * 64], dispatch="tma_explicit")
"""),
]


def deferred_writeback(indent: int) -> str:
    """under: the writeback of the tile whose fp16 pairs are in `packed` (rows from pending[1], columns from
    pending[2]), the staged columns and the rest both through stmatrix."""
    lines = """for half in T.unroll(STAGED_N // EPI_N):
    if warp_id == 0:
        T.ptx.cp.async_.bulk.wait_group.read(0)
    T.cuda.warpgroup_sync(EPILOGUE_BAR + consumer)
    for jj in T.unroll(EPI_N // 16):
        base = T.meta_var(half * (EPI_N // 4) + jj * 4)
        T.ptx.stmatrix.sync.aligned.m8n8.x4.shared.b16(
            Dsmem.ptr_to([consumer, 16 * warp_id + lane_id % 16, 16 * jj + lane_id // 16 * 8]),
            packed[base], packed[base + 1], packed[base + 2], packed[base + 3])
    T.ptx.fence.proxy.async_.shared__cta()
    T.cuda.warpgroup_sync(EPILOGUE_BAR + consumer)
    if warp_id == 0:
        if T.cuda.elect_sync():
            for part in T.unroll(EPI_N // 64):
                Tx.copy_async(D[pending[1]:pending[1] + CONSUMER_ROWS,
                                pending[2] + half * EPI_N + part * 64:pending[2] + half * EPI_N + part * 64 + 64],
                              Dsmem[consumer, :, part * 64:(part + 1) * 64], dispatch="tma_explicit")
            T.ptx.cp.async_.bulk.commit_group()
if REST_N > 0:
    if warp_id == 0:
        T.ptx.cp.async_.bulk.wait_group.read(0)
    T.cuda.warpgroup_sync(EPILOGUE_BAR + consumer)
    for j in T.unroll(REST_N // 8):
        T.ptx.stmatrix.sync.aligned.m8n8.x2.shared.b16(
            Rsmem.ptr_to([consumer, 16 * warp_id + lane_id % 16, 8 * j]),
            packed[STAGED_N // 4 + 2 * j], packed[STAGED_N // 4 + 2 * j + 1])
    T.ptx.fence.proxy.async_.shared__cta()
    T.cuda.warpgroup_sync(EPILOGUE_BAR + consumer)
    if warp_id == 0:
        if T.cuda.elect_sync():
            for part in T.unroll(REST_N // 8):
                Tx.copy_async(D[pending[1]:pending[1] + CONSUMER_ROWS,
                                pending[2] + STAGED_N + part * 8:pending[2] + STAGED_N + part * 8 + 8],
                              Rsmem[consumer, :, part * 8:(part + 1) * 8], dispatch="tma_explicit")
            T.ptx.cp.async_.bulk.commit_group()
"""
    return "".join(" " * indent + line + "\n" for line in lines.splitlines())


UNDER = [
    ("""            seen = T.alloc_local((1,), "int32")
""", """            seen = T.alloc_local((1,), "int32")
            packed = T.alloc_local((ACC // 2,), "uint32")  # the last tile's sums as fp16 pairs, not yet written back
            pending = T.alloc_local((3,), "int32")  # 1 while `packed` waits for its writeback; its first row, column
            pending[0] = 0
"""),
    ("""                    T.ptx.wgmma.commit_group.sync.aligned()
""", """                    T.ptx.wgmma.commit_group.sync.aligned()
                    if not STAGING_IN_RING:  # (there each cluster has one unit: its writeback follows the loop)
                        # the previous tile's writeback, while this unit's first two K tiles run on the tensor cores
                        if k == T.min(work.k_begin + 1, work.k_end - 1):
                            if pending[0] > 0:
""" + "@DEFERRED32@" + """                                pending[0] = 0
"""),
    ("""            # the last TMA store must finish before the CTA (and its shared memory) goes away
""", """            if pending[0] > 0:
                if STAGING_IN_RING:
                    T.ptx.bar.sync(EPILOGUE_BAR + NUM_CONSUMERS, NUM_CONSUMERS * 128)
""" + "@DEFERRED16@" + """            # the last TMA store must finish before the CTA (and its shared memory) goes away
"""),
]


def under_edits() -> list[tuple[str, str]]:
    """UNDER with the deferred writeback written in at its two places (in the K loop, after it)."""
    return [(old, new.replace("@DEFERRED32@", deferred_writeback(32)).replace("@DEFERRED16@", deferred_writeback(16)))
            for old, new in UNDER]


# under: the writeback (TODO 12.15) becomes the packing
PACK = """                for i in T.unroll(ACC // 2):
                    packed[i] = T.call_pure_extern("uint32", "__pack_half2", T.cast(acc[2 * i], d_type),
                                                   T.cast(acc[2 * i + 1], d_type))
                pending[0] = 1
                pending[1] = m_st + row_0
                pending[2] = n_st + col_0
"""


WRITEBACK_START = "                # >>> TODO 12.15: the writeback at any width\n"
WRITEBACK_END = "                # <<< TODO 12.15\n"

# bound: the accumulators read (summed), never stored
BOUND = """                total = T.alloc_local((1,), acc_type)
                total[0] = T.float32(0)
                for i in T.unroll(ACC):
                    total[0] = total[0] + acc[i]
                if total[0] == T.float32(-1234.5):
                    D[m_st, n_st] = T.cast(total[0], d_type)
"""

# direct: registers straight to D
DIRECT = """                for i in T.unroll(ACC // 2):
                    row = T.meta_var(m_st + row_0 + acc_row(0, warp_id, lane_id, 2 * i))
                    col = T.meta_var(n_st + col_0 + acc_col(lane_id, 2 * i))
                    if row < M and col < N:  # N is a multiple of 8 and col even: col + 1 < N too
                        for j in T.vectorized(2):
                            D[row, col + j] = T.cast(acc[2 * i + j], d_type)
"""


def straight_only(text: str) -> str:
    """Step 12's text without its writeback of a swapped tile: the straight one, four columns less deep, where it
    stood before step 12 swapped A and B (what the edits above are written against)."""
    start = text.index("                if SWAP:\n", text.index(WRITEBACK_START))
    other = text.index("                else:\n", start)
    end = text.index(WRITEBACK_END)
    straight = "".join(line[4:] if line.strip() else line for line in text[other + len("                else:\n"):end]
                       .splitlines(True))
    return text[:start] + straight + text[end:]


def writeback_replaced(text: str, code: str) -> str:
    """Step 12's text with its writeback (TODO 12.15, the markers kept out) replaced by `code`."""
    start, end = text.index(WRITEBACK_START), text.index(WRITEBACK_END)
    return text[:start] + code + text[end:]


if __name__ == "__main__":
    write_variant(HERE / "stsm", STSM, transform=straight_only)
    write_variant(HERE / "skew", SKEW, transform=straight_only)
    write_variant(HERE / "stsm_skew", STSM + SKEW, transform=straight_only)
    write_variant(HERE / "stsm_warp", STSM + PER_WARP, transform=straight_only)
    write_variant(HERE / "onepass", STSM + ONE_PASS, transform=straight_only)
    write_variant(HERE / "stsm_db", STSM + DOUBLE_BUFFERED, transform=straight_only)
    for name, code in (("noepi", ""), ("bound", BOUND), ("direct", DIRECT)):
        write_variant(HERE / name, [])
        written = HERE / name / "hopper" / "step12_stream_k.py"
        written.write_text(writeback_replaced(written.read_text(), code))
    write_variant(HERE / "under", under_edits(), transform=straight_only)
    written = HERE / "under" / "hopper" / "step12_stream_k.py"
    written.write_text(writeback_replaced(written.read_text(), PACK))
