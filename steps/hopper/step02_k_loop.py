"""Step 2 (Hopper): the K loop.

One 128x128 output tile, K any multiple of 64: the CTA walks K in BLK_K = 64 tiles, reloading
the same shared-memory buffers each time and accumulating into the same registers (wgmma
scale-d = 0 only for the very first K=16 slice, 1 afterwards).
"""

import tvm
from tvm.backend.cuda.tile_primitive.tma_utils import SwizzleMode, mma_shared_layout
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

from kernel_helpers.hopper import acc_col, acc_row, encode_sw128_desc, wgmma_128x128x16

from kernel_helpers.todo import todo


def hgemm_v2(M, N, K):
    """D = A @ B^T for M = N = 128, K a multiple of 64 (fp16 in, fp32 accumulate in registers).

    Data path:
        for each K tile k: A[:, 64k:64k+64], B[:, 64k:64k+64] (global) --all 128 threads,
        Tx.cta.copy--> Asmem, Bsmem (128B swizzle, reused every K tile) --wgmma.mma_async
        m64n128k16 x 8--> the same accumulator registers (128 fp32 per thread);
        after the loop: registers --cast to fp16--> D (global), one store per register.

    Barrier protocol:
        | barrier | arrival count | who arrives | who waits | starting phase |
        |---------|---------------|-------------|-----------|----------------|
        | (none)  | -             | -           | -         | -              |
        No mbarrier. Per K tile: copy, fence.proxy.async.shared::cta + cta_sync (stores visible
        to the async proxy wgmma reads through), wgmma.fence, 8 wgmmas, wgmma.commit_group,
        wgmma.wait_group(0). That wait is what makes the next K tile's copy safe: when it
        returns, the wgmmas have finished reading Asmem/Bsmem, so they may be overwritten.

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
            # TODO 2.1: the K loop: per K tile, load it, then accumulate it
            #   mma_tile now walks over the K / BLK_K K tiles of this CTA's rows and columns and runs step 1's two
            #   parts on each: load_k_tile from the tile's first column, then mma_k_tile for K tile k (still stage
            #   0: one pair of tiles). mma_k_tile ends with the wait for its wgmma group; that wait is what makes
            #   the next iteration's overwrite of Asmem/Bsmem safe.
            todo("2.1 the K loop: per K tile, load it, then accumulate it")

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
