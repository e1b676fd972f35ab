"""Step 1 (Hopper): one 128x128 output tile with K = 64.

All 128 threads of one warpgroup copy the A and B tiles into 128B-swizzled shared memory, the
warpgroup multiplies them with wgmma (eight m64n128k16 instructions: four K=16 slices times the
two 64-row halves), and each thread writes its accumulator registers straight to global memory.
"""

import tvm
from tvm.backend.cuda.tile_primitive.tma_utils import SwizzleMode, mma_shared_layout
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

from kernel_helpers.hopper import acc_col, acc_row, encode_sw128_desc, wgmma_128x128x16

from kernel_helpers.todo import todo


def hgemm_v1(M, N, K):
    """D = A @ B^T for M = N = 128, K = 64 (fp16 in, fp32 accumulate in registers, fp16 out).

    Data path:
        A, B (global) --all 128 threads, ld.global + st.shared (Tx.cta.copy)--> Asmem, Bsmem
        (128B swizzle) --wgmma.mma_async m64n128k16 x 8, issued by the whole warpgroup through
        shared-memory descriptors--> accumulator in registers (128 fp32 per thread, wgmma
        fragment layout) --cast to fp16--> D (global), one store per register.

    Barrier protocol:
        | barrier | arrival count | who arrives | who waits | starting phase |
        |---------|---------------|-------------|-----------|----------------|
        | (none)  | -             | -           | -         | -              |
        No mbarrier: wgmma completes through its own group counter. The warpgroup issues the
        8 wgmmas, closes them into one group with wgmma.commit_group, and every thread blocks in
        wgmma.wait_group(0) until the group has finished. Before the MMA:
        fence.proxy.async.shared::cta + cta_sync between the generic-proxy stores to
        Asmem/Bsmem and the wgmma that reads them through the async proxy, then wgmma.fence.

    Blackwell twin: one elected thread issues tcgen05.mma and tcgen05.commit arrives on an
    mbarrier that all threads wait on, and the accumulator lives in TMEM (tcgen05.ld to read it);
    here the warpgroup issues wgmma, waits with wgmma.wait_group, and accumulates in registers.
    """
    a_type = tvm.DataType("float16")
    b_type = tvm.DataType("float16")
    d_type = tvm.DataType("float16")
    acc_type = tvm.DataType("float32")

    BLK_M, BLK_N, BLK_K = 128, 128, 64
    MMA_K = 16

    A_layout = mma_shared_layout(a_type, SwizzleMode.SWIZZLE_128B_ATOM, (BLK_M, BLK_K))
    B_layout = mma_shared_layout(b_type, SwizzleMode.SWIZZLE_128B_ATOM, (BLK_N, BLK_K))

    @T.prim_func
    def kernel(
        A: T.Buffer((M, K), a_type),
        B: T.Buffer((N, K), b_type),
        D: T.Buffer((M, N), d_type),
    ):
        # fmt: off
        T.device_entry()
        bx, by = T.cta_id([1, 1])
        wg_id = T.warpgroup_id([1])
        warp_id = T.warp_id_in_wg([4])
        lane_id = T.lane_id([32])

        # ---- shared memory: the 128B-swizzled tiles start on a 1024-byte boundary ----
        pool = T.SMEMPool()
        pool.move_base_to(1024)
        Asmem = pool.alloc((BLK_M, BLK_K), a_type, layout=A_layout)
        Bsmem = pool.alloc((BLK_N, BLK_K), b_type, layout=B_layout)
        pool.commit()

        m_st = T.meta_var(0)  # the one tile starts at row 0 of A and D ...
        n_st = T.meta_var(0)  # ... and at row 0 of B, column 0 of D

        # ---- registers: the 128x128 fp32 accumulator (128 per thread), two descriptors ----
        acc = T.alloc_local((BLK_M * BLK_N // 128,), acc_type)
        desc_a = T.alloc_local((1,), "uint64")
        desc_b = T.alloc_local((1,), "uint64")
        # the tiles never move: encode their wgmma descriptors once
        # TODO 1.1: encode the wgmma descriptors of the two tiles
        #   wgmma reads A and B from shared memory through 64-bit matrix descriptors (address, 128B swizzle,
        #   strides). kernel_helpers.hopper has the encoder; one descriptor per tile, into desc_a[0] / desc_b[0],
        #   pointing at the tile's first element. The tiles never move, so once is enough.
        todo("1.1 encode the wgmma descriptors of the two tiles")

        # ---- one K tile in two parts (inline helpers: later steps change what they do) ----
        # every thread copies its part of the K tile that starts at column k_st of A and B
        @T.inline
        def load_k_tile(k_st):
            # TODO 1.2: load the A and B tiles into shared memory for wgmma
            #   All 128 threads copy the 128x64 tiles of A (rows from m_st) and B (rows from n_st) that start at
            #   column k_st into Asmem/Bsmem (a CTA-wide tile copy). wgmma reads shared memory through the async
            #   proxy: fence the generic stores for it, then a CTA barrier so every thread's part is in.
            todo("1.2 load the A and B tiles into shared memory for wgmma")

        # the warpgroup multiplies K tile k, held in stage `stage` (here the only one, 0): 4 K-slices
        # x 2 row halves (8 wgmmas), one commit group, and waits for it; only the very first K=16
        # slice of the whole K does not accumulate
        @T.inline
        def mma_k_tile(stage, k):
            # TODO 1.3: the warpgroup multiplies the tiles and waits for it
            #   All 128 threads (one warpgroup) issue wgmma together: fence the accumulator registers, issue one
            #   128x128x16 MMA per K=16 slice of the 64-wide tile, reading the tiles through the descriptors of
            #   `stage` (helper in kernel_helpers.hopper), commit them as a group and wait for the group. Scale-d
            #   is 0 only for the very first K=16 slice of the whole K (K tile k = 0, slice 0: it overwrites
            #   garbage); every other slice accumulates.
            todo("1.3 the warpgroup multiplies the tiles and waits for it")

        # ---- the K loop of one output tile: here a single K tile ----
        @T.inline
        def mma_tile():
            load_k_tile(0)
            mma_k_tile(0, 0)

        # ---- writeback: registers -> fp16 -> D, straight from the wgmma fragment layout ----
        @T.inline
        def store_tile():
            # TODO 1.4: write the accumulator registers to D as fp16
            #   Each thread holds 128 fp32 values of the tile in the wgmma fragment layout: acc[h * 64 + i] sits
            #   at tile row acc_row(h, warp_id, lane_id, i) and column acc_col(lane_id, i)
            #   (kernel_helpers.hopper). Cast each to fp16 and store it at that place of D, offset by the tile
            #   origin.
            todo("1.4 write the accumulator registers to D as fp16")

        mma_tile()
        store_tile()

    return kernel
