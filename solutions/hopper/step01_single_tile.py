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


def hgemm_v1(M, N, K):
    """D = A @ B^T for M = N = 128, K = 64, in one CTA of one warpgroup (128 threads).

    Data path: global A, B --(all 128 threads, synchronous Tx.cta.copy)--> 128B-swizzled shared
    memory --(wgmma.mma_async m64n128k16, descriptors)--> 128 fp32 accumulator registers per
    thread --(cast to fp16, one store per register)--> global D.

    Synchronisation (no mbarrier in this step):

    | barrier                     | count | who arrives          | who waits            | start |
    |-----------------------------|-------|----------------------|----------------------|-------|
    | fence.proxy.async + cta_sync| 128   | all threads (copied) | all threads          | -     |
    | wgmma commit/wait_group(0)  | -     | the warpgroup commits| the warpgroup waits  | -     |

    The fence makes the generic-proxy shared-memory stores visible to the async proxy that wgmma
    reads through; cta_sync makes every thread's part of the tile visible before any wgmma starts.

    Blackwell twin: tcgen05.mma is issued by one thread and signals completion with tcgen05.commit
    on an mbarrier, and the accumulator lives in TMEM (read back with tcgen05.ld); here the whole
    warpgroup issues wgmma, completion is wgmma.commit_group / wgmma.wait_group, and the
    accumulator lives in registers.
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
        bx, by = T.cta_id([M // BLK_M, N // BLK_N])
        wg_id = T.warpgroup_id([1])
        warp_id = T.warp_id_in_wg([4])
        lane_id = T.lane_id([32])

        # --- Shared memory: the swizzled tiles start on a 1024-byte boundary ---
        pool = T.SMEMPool()
        pool.move_base_to(1024)
        Asmem = pool.alloc((BLK_M, BLK_K), a_type, layout=A_layout)
        Bsmem = pool.alloc((BLK_N, BLK_K), b_type, layout=B_layout)
        pool.commit()

        m_st = T.meta_var(bx * BLK_M)
        n_st = T.meta_var(by * BLK_N)

        # --- Registers: the 128x128 fp32 accumulator, 128 values per thread ---
        acc = T.alloc_local((BLK_M * BLK_N // 128,), acc_type)
        desc_a = T.alloc_local((1,), "uint64")
        desc_b = T.alloc_local((1,), "uint64")

        # --- Synchronous load: every thread copies part of A and B ---
        Tx.cta.copy(Asmem[:, :], A[m_st:m_st + BLK_M, 0:BLK_K])
        Tx.cta.copy(Bsmem[:, :], B[n_st:n_st + BLK_N, 0:BLK_K])
        # wgmma reads shared memory through the async proxy: fence, then wait for every thread.
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cta_sync()

        # --- MMA: 4 K-slices x 2 row halves, one commit group, wait for it ---
        encode_sw128_desc(desc_a, Asmem.ptr_to([0, 0]))
        encode_sw128_desc(desc_b, Bsmem.ptr_to([0, 0]))
        T.ptx.wgmma.fence.sync.aligned()
        for kk in T.unroll(BLK_K // MMA_K):
            wgmma_128x128x16(acc, desc_a[0], desc_b[0], kk, kk != 0)
        T.ptx.wgmma.commit_group.sync.aligned()
        T.ptx.wgmma.wait_group.sync.aligned(0)

        # --- Writeback: registers -> global, straight from the fragment layout ---
        for h in T.unroll(2):
            for i in T.unroll(64):
                D[m_st + acc_row(h, warp_id, lane_id, i), n_st + acc_col(lane_id, i)] = T.cast(
                    acc[h * 64 + i], d_type)

    return kernel
