"""Write a variant of step 12 that may swap A and B (experiments/every_shape/swap_ab/swap/hopper/): an experiment,
not a step. A wgmma's m is 64 rows a warpgroup; its n is any multiple of 8 up to 256. Where M is small, step 12
puts the tokens on m: 136 rows pad to 192 (three 64-row CTAs, each loading its own copy of B's tile) or 256. cuBLAS
computes D^T = B A^T there (nvjet 256x136 at 136x28672x8192, 192x96 at 184x37888x3584: h200-weak-shapes/): the
weights' rows go on m, the tokens on n, cut to the multiple of 16 that holds them. The variant's kernel is step 12's
on the swapped problem (its rows from B, its columns from A); only the writeback differs: a consumer's 64 x n
fragment is D's n x 64 block, staged transposed (register (r, c) at staging row c, column r) and stored as one box.
The host weighs both ways (plan.swap_ab); check_and_time.py's plans with an x suffix force the swap (dp144c1x: whole
128 x 144 tiles of D^T, alone).

    python experiments/every_shape/swap_ab/make_variant.py

Its edits are of step 12 before it swapped A and B itself (commit 0c4155e); run it there.
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from variant import write_variant  # noqa: E402

HOST = [
    ("    rows_aligned: bool  # every row of A and B begins on a 32-byte boundary (K % 16 == 0)\n",
     "    rows_aligned: bool  # every row of A and B begins on a 32-byte boundary (K % 16 == 0)\n"
     "    swap_ab: bool = False  # the kernel computes D^T = B A^T: its rows are B's, its columns A's\n"),
    ("def plan_decomposition(M: int, N: int, K: int, sm_count: int) -> Decomposition:\n",
     "def plan_decomposition(M: int, N: int, K: int, sm_count: int) -> Decomposition:\n"
     "    straight = plan_one_way(M, N, K, sm_count)\n"
     "    swapped = dataclasses.replace(plan_one_way(N, M, K, sm_count, SWAPPED_WIDTHS), swap_ab=True)\n"
     "    return min((straight, swapped), key=lambda plan: ((plan.estimated_cost * plan.margin) ** 2\n"
     "                                                      + dram_cost(M, N, K, plan) ** 2) ** 0.5)\n\n\n"
     "def plan_one_way(M: int, N: int, K: int, sm_count: int, widths=TILE_WIDTHS) -> Decomposition:\n"),
    ("            for tile_n in TILE_WIDTHS:\n", "            for tile_n in widths:\n"),
    ("L2_GROUP_ROWS = 2048\n",
     "L2_GROUP_ROWS = 2048\n# the tokens' tile where A and B are swapped: 128 columns or more (narrower ones ran slower than step 12's\n"
     "# straight plans: 136x4608x3584 48 wide 0.927x cuBLAS against 1.067x, 300x4096x4096 80 wide 0.857x against 1.007x)\n"
     "SWAPPED_WIDTHS = tuple(w for w in TILE_WIDTHS if w >= 128)\n"),
]

KERNEL = [
    ("    BLK_M = plan.tile_m\n",
     "    SWAP = plan.swap_ab\n    MM, NN = (N, M) if SWAP else (M, N)  # the kernel's rows and columns\n"
     "    BLK_M = plan.tile_m\n"),
    ("    A_TAIL = M % BLK_M or BLK_M\n    B_TAIL = N % (BLK_N // CLUSTER) or BLK_N // CLUSTER\n",
     "    A_TAIL = MM % BLK_M or BLK_M\n    B_TAIL = NN % (BLK_N // CLUSTER) or BLK_N // CLUSTER\n"),
    ("    EPILOGUE_SMEM = (0 if STAGING_IN_RING else NUM_CONSUMERS * CONSUMER_ROWS * (EPI_N + REST_COLS) * 2) + 1024\n",
     "    STAGING_BYTES = NUM_CONSUMERS * (CONSUMER_N * 64 if SWAP else CONSUMER_ROWS * (EPI_N + REST_COLS)) * 2\n"
     "    EPILOGUE_SMEM = (0 if STAGING_IN_RING else STAGING_BYTES) + 1024\n"),
    ("    R_layout = mma_shared_layout(d_type, SwizzleMode.SWIZZLE_NONE, (NUM_CONSUMERS, CONSUMER_ROWS, REST_COLS))\n",
     "    R_layout = mma_shared_layout(d_type, SwizzleMode.SWIZZLE_NONE, (NUM_CONSUMERS, CONSUMER_ROWS, REST_COLS))\n"
     "    T_layout = mma_shared_layout(d_type, SwizzleMode.SWIZZLE_128B_ATOM, (NUM_CONSUMERS, CONSUMER_N, 64))\n"),
    ("        T.device_entry()\n",
     "        T.device_entry()\n        X = T.meta_var(B if SWAP else A)  # the kernel's rows\n"
     "        Y = T.meta_var(A if SWAP else B)  # and columns\n"),
    ("        Dsmem = pool.alloc((NUM_CONSUMERS, CONSUMER_ROWS, EPI_N), d_type, layout=D_layout)\n"
     "        Rsmem = pool.alloc((NUM_CONSUMERS, CONSUMER_ROWS, REST_COLS), d_type, layout=R_layout)\n",
     "        if SWAP:\n"
     "            Tsmem = pool.alloc((NUM_CONSUMERS, CONSUMER_N, 64), d_type, layout=T_layout)\n"
     "        else:\n"
     "            Dsmem = pool.alloc((NUM_CONSUMERS, CONSUMER_ROWS, EPI_N), d_type, layout=D_layout)\n"
     "            Rsmem = pool.alloc((NUM_CONSUMERS, CONSUMER_ROWS, REST_COLS), d_type, layout=R_layout)\n"),
    ("num_m_tiles=-(-M // (CLUSTER * BLK_M)), num_n_tiles=-(-N // BLK_N),",
     "num_m_tiles=-(-MM // (CLUSTER * BLK_M)), num_n_tiles=-(-NN // BLK_N),"),
    ("box_rows(m_st, BLK_M, A_TAIL, M)", "box_rows(m_st, BLK_M, A_TAIL, MM)"),
    ("box_rows(n_st, B_PART, B_TAIL, N, CLUSTER, past=B_TAIL)", "box_rows(n_st, B_PART, B_TAIL, NN, CLUSTER, past=B_TAIL)"),
    ("                            if m_st + BLK_M <= M:\n", "                            if m_st + BLK_M <= MM:\n"),
    ("                            elif m_st < M:\n", "                            elif m_st < MM:\n"),
    ("A[m_st:m_st + BLK_M, k", "X[m_st:m_st + BLK_M, k"),
    ("A[m_st:m_st + A_TAIL, k", "X[m_st:m_st + A_TAIL, k"),
    ("                            if b_st + B_PART <= N:\n", "                            if b_st + B_PART <= NN:\n"),
    ("B[b_st:b_st + B_PART, k", "Y[b_st:b_st + B_PART, k"),
    ("T.Select(b_st < N, b_st, N - B_TAIL)", "T.Select(b_st < NN, b_st, NN - B_TAIL)"),
    ("B[tail_st:tail_st + B_TAIL, k", "Y[tail_st:tail_st + B_TAIL, k"),
    ("                # ---- writeback: registers -> fp16 -> Dsmem, then one TMA store ----\n",
     "                if SWAP:\n"
     "                    # ---- D^T's 64 x CONSUMER_N block is D's CONSUMER_N x 64: staged transposed, one box ----\n"
     "                    if warp_id == 0:\n"
     "                        T.ptx.cp.async_.bulk.wait_group.read(0)\n"
     "                    T.cuda.warpgroup_sync(EPILOGUE_BAR + consumer)\n"
     "                    for i in T.unroll(ACC):\n"
     "                        Tsmem[consumer, acc_col(lane_id, i), acc_row(0, warp_id, lane_id, i)] = T.cast(\n"
     "                            acc[i], d_type)\n"
     "                    T.ptx.fence.proxy.async_.shared__cta()\n"
     "                    T.cuda.warpgroup_sync(EPILOGUE_BAR + consumer)\n"
     "                    if warp_id == 0:\n"
     "                        if T.cuda.elect_sync():\n"
     "                            Tx.copy_async(D[n_st + col_0:n_st + col_0 + CONSUMER_N, m_st + row_0:m_st + row_0 + 64],\n"
     "                                          Tsmem[consumer, :, :], dispatch=\"tma_explicit\")\n"
     "                            T.ptx.cp.async_.bulk.commit_group()\n"
     "                else:\n"
     "                # ---- writeback: registers -> fp16 -> Dsmem, then one TMA store ----\n"),
]


def indent_writeback(text: str) -> str:
    """Step 12's writeback, under the `else:` of the swapped one."""
    begin = text.index("                # ---- writeback: registers -> fp16 -> Dsmem, then one TMA store ----\n")
    end = text.index("                # <<< TODO 12.15\n")
    block = "".join("    " + line if line.strip() else line for line in text[begin:end].splitlines(True))
    return text[:begin] + block + text[end:]

# Stream-K over every tile's margin on the plan's whole cost, not only on the SMs' part of it: where the DRAM's time is
# the larger, the root of the sum of squares hid the margin (1x4096x14336 stream-K over swapped 32-wide pairs 0.968x
# cuBLAS where step 12's whole 64 x 32 tiles ran 1.024x, 200x4096x14336 0.735x against 0.944x; h200-swap-ab/)
MARGIN = [
    ("    return min(candidates, key=lambda plan: ((plan.estimated_cost * plan.margin) ** 2\n"
     "                                             + dram_cost(M, N, K, plan) ** 2) ** 0.5)\n",
     "    return min(candidates, key=lambda plan: plan.margin * (plan.estimated_cost ** 2\n"
     "                                                           + dram_cost(M, N, K, plan) ** 2) ** 0.5)\n"),
]
SWAP_MARGIN = [
    ("    return min((straight, swapped), key=lambda plan: ((plan.estimated_cost * plan.margin) ** 2\n"
     "                                                      + dram_cost(M, N, K, plan) ** 2) ** 0.5)\n",
     "    return min((straight, swapped), key=lambda plan: plan.margin * (plan.estimated_cost ** 2\n"
     "                                                                    + dram_cost(M, N, K, plan) ** 2) ** 0.5)\n"),
]


def write_swap(folder: Path, later_edits: list[tuple[str, str]]) -> None:
    """HOST and KERNEL's edits, the straight writeback under the swapped one's `else:`, then `later_edits`."""
    write_variant(folder, HOST + KERNEL)
    written = folder / "hopper" / "step12_stream_k.py"
    text = indent_writeback(written.read_text())
    for old, new in later_edits:
        if text.count(old) != 1:
            raise SystemExit(f"{folder.name}: no longer has once:\n{old}")
        text = text.replace(old, new)
    written.write_text(text)


if __name__ == "__main__":
    write_variant(HERE / "margin", MARGIN)
    write_swap(HERE / "swap", MARGIN + SWAP_MARGIN)
    write_swap(HERE / "swap128", [])
