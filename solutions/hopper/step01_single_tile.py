"""Step 1 (Hopper): one 128x128 output tile with K = 64.

All 128 threads of one warpgroup copy the A and B tiles into 128B-swizzled shared memory, the
warpgroup multiplies them with wgmma (eight m64n128k16 instructions: four K=16 slices times the
two 64-row halves), and each thread writes its accumulator registers straight to global memory.
The two parts of a K tile (load_k_tile, mma_k_tile), the K loop of a tile (mma_tile, here one
K tile) and the writeback (store_tile) are named `@T.inline` helpers: the later steps change what
is inside them and call them in loops, so each step's diff shows its idea, not re-indented code.
"""

import tvm
from tvm.backend.cuda.tile_primitive.tma_utils import SwizzleMode, mma_shared_layout
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

from kernel_helpers.hopper import acc_col, acc_row, encode_sw128_desc, wgmma_128x128x16


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
        # >>> TODO 1.1: encode the wgmma descriptors of the two tiles
        encode_sw128_desc(desc_a[0], Asmem.ptr_to([0, 0]))
        encode_sw128_desc(desc_b[0], Bsmem.ptr_to([0, 0]))
        # <<< TODO 1.1

        # ---- one K tile in two parts (inline helpers: later steps change what they do) ----
        # every thread copies its part of the K tile that starts at column k_st of A and B
        @T.inline
        def load_k_tile(k_st):
            # >>> TODO 1.2: load the A and B tiles into shared memory for wgmma
            Tx.cta.copy(Asmem[:, :], A[m_st:m_st + BLK_M, k_st:k_st + BLK_K])
            Tx.cta.copy(Bsmem[:, :], B[n_st:n_st + BLK_N, k_st:k_st + BLK_K])
            # wgmma reads shared memory through the async proxy: fence, then sync
            T.ptx.fence.proxy.async_.shared__cta()
            T.cuda.cta_sync()
            # <<< TODO 1.2

        # the warpgroup multiplies K tile k, held in stage `stage` (here the only one, 0): 4 K-slices
        # x 2 row halves (8 wgmmas), one commit group, and waits for it; only the very first K=16
        # slice of the whole K does not accumulate
        @T.inline
        def mma_k_tile(stage, k):
            # >>> TODO 1.3: the warpgroup multiplies the tiles and waits for it
            T.ptx.wgmma.fence.sync.aligned()
            for kk in T.unroll(BLK_K // MMA_K):
                wgmma_128x128x16(acc, desc_a[stage], desc_b[stage], kk, k * (BLK_K // MMA_K) + kk != 0)
            T.ptx.wgmma.commit_group.sync.aligned()
            T.ptx.wgmma.wait_group.sync.aligned(0)
            # <<< TODO 1.3

        # ---- the K loop of one output tile: here a single K tile ----
        @T.inline
        def mma_tile():
            load_k_tile(0)
            mma_k_tile(0, 0)

        # ---- writeback: registers -> fp16 -> D, straight from the wgmma fragment layout ----
        @T.inline
        def store_tile():
            # >>> TODO 1.4: write the accumulator registers to D as fp16
            for h in T.unroll(2):
                for i in T.unroll(64):
                    D[m_st + acc_row(h, warp_id, lane_id, i), n_st + acc_col(lane_id, i)] = T.cast(
                        acc[h * 64 + i], d_type)
            # <<< TODO 1.4

        mma_tile()
        store_tile()

    return kernel
