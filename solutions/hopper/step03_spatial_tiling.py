"""Step 3 (Hopper): spatial tiling.

The output is cut into 128x128 tiles and the grid has one CTA per tile: CTA (bx, by) computes
D[128*bx : 128*bx+128, 128*by : 128*by+128] with step 2's K loop. M and N are multiples of 128,
K a multiple of 64.
"""

import tvm
from tvm.backend.cuda.tile_primitive.tma_utils import SwizzleMode, mma_shared_layout
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

from kernel_helpers.hopper import acc_col, acc_row, encode_sw128_desc, wgmma_128x128x16


def hgemm_v3(M, N, K):
    """D = A @ B^T on a (M/128) x (N/128) grid of CTAs, one warpgroup and one output tile each.

    Data path (per CTA, tile origin m_st = 128*bx, n_st = 128*by):
        for each K tile k: A[m_st:+128, 64k:+64], B[n_st:+128, 64k:+64] --all 128 threads,
        Tx.cta.copy--> Asmem, Bsmem (128B swizzle, reused every K tile) --wgmma.mma_async
        m64n128k16 x 8--> the same accumulator registers (128 fp32 per thread);
        after the loop: registers --cast to fp16--> D[m_st:+128, n_st:+128], one store per register.

    Barrier protocol:
        | barrier | arrival count | who arrives | who waits | starting phase |
        |---------|---------------|-------------|-----------|----------------|
        | (none)  | -             | -           | -         | -              |
        No mbarrier. Per K tile: copy, fence.proxy.async.shared::cta + cta_sync (stores visible
        to the async proxy wgmma reads through), wgmma.fence, 8 wgmmas, wgmma.commit_group,
        wgmma.wait_group(0). That wait is what makes the next K tile's copy safe: when it
        returns, the wgmmas have finished reading Asmem/Bsmem, so they may be overwritten.
        CTAs share nothing: each has its own shared memory and registers.

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
        # >>> TODO 3.1: launch one CTA per 128x128 output tile
        bx, by = T.cta_id([M // BLK_M, N // BLK_N])
        # <<< TODO 3.1
        wg_id = T.warpgroup_id([1])
        warp_id = T.warp_id_in_wg([4])
        lane_id = T.lane_id([32])

        # ---- shared memory: the 128B-swizzled tiles start on a 1024-byte boundary ----
        pool = T.SMEMPool()
        pool.move_base_to(1024)
        Asmem = pool.alloc((BLK_M, BLK_K), a_type, layout=A_layout)
        Bsmem = pool.alloc((BLK_N, BLK_K), b_type, layout=B_layout)
        pool.commit()

        # >>> TODO 3.2: the first row and column of this CTA's tile
        m_st = T.meta_var(bx * BLK_M)
        n_st = T.meta_var(by * BLK_N)
        # <<< TODO 3.2

        # ---- registers: the 128x128 fp32 accumulator (128 per thread), two descriptors ----
        acc = T.alloc_local((BLK_M * BLK_N // 128,), acc_type)
        desc_a = T.alloc_local((1,), "uint64")
        desc_b = T.alloc_local((1,), "uint64")
        # the tiles never move: encode their wgmma descriptors once
        encode_sw128_desc(desc_a[0], Asmem.ptr_to([0, 0]))
        encode_sw128_desc(desc_b[0], Bsmem.ptr_to([0, 0]))

        # ---- one K tile in two parts (inline helpers: later steps change what they do) ----
        # every thread copies its part of the K tile that starts at column k_st of A and B
        @T.inline
        def load_k_tile(k_st):
            Tx.cta.copy(Asmem[:, :], A[m_st:m_st + BLK_M, k_st:k_st + BLK_K])
            Tx.cta.copy(Bsmem[:, :], B[n_st:n_st + BLK_N, k_st:k_st + BLK_K])
            # wgmma reads shared memory through the async proxy: fence, then sync
            T.ptx.fence.proxy.async_.shared__cta()
            T.cuda.cta_sync()

        # the warpgroup multiplies K tile k, held in stage `stage` (here the only one, 0): 4 K-slices
        # x 2 row halves (8 wgmmas), one commit group, and waits for it; only the very first K=16
        # slice of the whole K does not accumulate
        @T.inline
        def mma_k_tile(stage, k):
            T.ptx.wgmma.fence.sync.aligned()
            for kk in T.unroll(BLK_K // MMA_K):
                wgmma_128x128x16(acc, desc_a[stage], desc_b[stage], kk, k * (BLK_K // MMA_K) + kk != 0)
            T.ptx.wgmma.commit_group.sync.aligned()
            T.ptx.wgmma.wait_group.sync.aligned(0)

        # ---- the K loop of one output tile ----
        @T.inline
        def mma_tile():
            for k in range(K // BLK_K):
                load_k_tile(k * BLK_K)
                mma_k_tile(0, k)

        # ---- writeback: registers -> fp16 -> D, straight from the wgmma fragment layout ----
        @T.inline
        def store_tile():
            for h in T.unroll(2):
                for i in T.unroll(64):
                    D[m_st + acc_row(h, warp_id, lane_id, i), n_st + acc_col(lane_id, i)] = T.cast(
                        acc[h * 64 + i], d_type)

        mma_tile()
        store_tile()

    return kernel
