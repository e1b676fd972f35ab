"""Write experiments/every_shape/cluster2x2/hopper/step12_stream_k.py: step 12 with clusters of 2 x 2 CTAs, each
operand multicast to the two CTAs that share it (A along N, B along M), as cuBLAS's 4x2 clusters do at 256 tokens
(ncu, h100-ncu256/: 35% fewer L2 sectors than step 12 at 256x4608x3584). An experiment, not a step: a plan's
`cluster_n` = 2 asks for it; check_and_time.py's plan suffix q (dp80q) builds one with 30 clusters (the most 4-CTA
clusters an H100 holds at once).

    python experiments/every_shape/cluster2x2/make_variant.py
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from variant import write_variant  # noqa: E402

EDITS = [
    # the grid: the plan's clusters only (33 clusters of 4 would not all be resident on an H100: 30 are)
    ("""        bx = T.cta_id([sm_count])
""", """        bx = T.cta_id([plan.clusters * CLUSTER])
"""),
    ("""    rows_aligned: bool  # every row of A and B begins on a 32-byte boundary (K % 16 == 0)
""",
     """    rows_aligned: bool  # every row of A and B begins on a 32-byte boundary (K % 16 == 0)
    cluster_n: int = 1  # of the cluster's CTAs, how many side by side along N (sharing A); the rest stack along M
"""),
    ("""    B_PART = BLK_N // CLUSTER  # rows of the B tile each CTA loads and multicasts
""", """    CN = plan.cluster_n
    CM = CLUSTER // CN
    B_PART = BLK_N // CM  # rows of the B tile each CTA loads and multicasts to the CTAs of its column
    A_PART = BLK_M // CN  # rows of the A tile each CTA loads and multicasts to the CTAs of its row
    ROW_MASK = sum(1 << (CM * j) for j in range(CN))  # the CTAs of rank 0's row (rank = row + CM x column)
"""),
    ("""            "ts", num_m_tiles=-(-M // (CLUSTER * BLK_M)), num_n_tiles=-(-N // BLK_N),
            l2_group_size=L2_GROUP_ROWS // (CLUSTER * BLK_M), num_clusters=sm_count // CLUSTER)""",
     """            "ts", num_m_tiles=-(-M // (CM * BLK_M)), num_n_tiles=-(-N // (CN * BLK_N)),
            l2_group_size=max(1, L2_GROUP_ROWS // (CM * BLK_M)), num_clusters=plan.clusters)"""),
    ("""        m_st = T.meta_var(tile_order.m_idx * (CLUSTER * BLK_M) + rank * BLK_M)
        n_st = T.meta_var(tile_order.n_idx * BLK_N)""", """        m_st = T.meta_var(tile_order.m_idx * (CM * BLK_M) + rank % CM * BLK_M)
        n_st = T.meta_var(tile_order.n_idx * (CN * BLK_N) + rank // CM * BLK_N)"""),
    ("""                            Tx.copy_async(Asmem[produce.stage, :, :],
                                          A[m_st:m_st + BLK_M, k * BLK_K:(k + 1) * BLK_K],
                                          dispatch="tma_explicit", mbar=tma2mma.ptr_to([produce.stage]))
                            # this CTA's half of the B tile, written into both CTAs' stage
                            Tx.copy_async(Bsmem[produce.stage, rank * B_PART:(rank + 1) * B_PART, :],
                                          B[n_st + rank * B_PART:n_st + (rank + 1) * B_PART,
                                            k * BLK_K:(k + 1) * BLK_K],
                                          dispatch="tma_explicit", mbar=tma2mma.ptr_to([produce.stage]),
                                          cta_mask=(1 << CLUSTER) - 1)""", """                            if CN > 1:
                                # this CTA's part of the A tile, into the stage of every CTA of its row
                                Tx.copy_async(Asmem[produce.stage, rank // CM * A_PART:(rank // CM + 1) * A_PART, :],
                                              A[m_st + rank // CM * A_PART:m_st + (rank // CM + 1) * A_PART,
                                                k * BLK_K:(k + 1) * BLK_K],
                                              dispatch="tma_explicit", mbar=tma2mma.ptr_to([produce.stage]),
                                              cta_mask=ROW_MASK << (rank % CM))
                            else:
                                Tx.copy_async(Asmem[produce.stage, :, :],
                                              A[m_st:m_st + BLK_M, k * BLK_K:(k + 1) * BLK_K],
                                              dispatch="tma_explicit", mbar=tma2mma.ptr_to([produce.stage]))
                            # this CTA's part of the B tile, into the stage of every CTA of its column
                            Tx.copy_async(Bsmem[produce.stage, rank % CM * B_PART:(rank % CM + 1) * B_PART, :],
                                          B[n_st + rank % CM * B_PART:n_st + (rank % CM + 1) * B_PART,
                                            k * BLK_K:(k + 1) * BLK_K],
                                          dispatch="tma_explicit", mbar=tma2mma.ptr_to([produce.stage]),
                                          cta_mask=((1 << CM) - 1) << (CM * (rank // CM)))"""),
]


if __name__ == "__main__":
    write_variant(HERE, EDITS)
