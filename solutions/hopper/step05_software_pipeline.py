"""Step 5 (Hopper): a two-stage software pipeline.

Shared memory holds PIPE_DEPTH = 2 copies (stages) of the A and B tiles, each with its own
mbarrier and its own phase bit. The TMA for K tile k + 2 is issued into a stage as soon as the
wgmmas of K tile k have released it, so the copy of the next tile overlaps the MMA of this one.
"""

import tvm
from tvm.backend.cuda.tile_primitive.tma_utils import SwizzleMode, mma_shared_layout
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

from kernel_helpers.hopper import acc_col, acc_row, encode_sw128_desc, wgmma_128x128x16


def hgemm_v5(M, N, K):
    """D = A @ B^T on a (M/128) x (N/128) grid of CTAs, TMA loads two K tiles ahead.

    Data path (per CTA, tile origin m_st = 128*bx, n_st = 128*by; stage s = k % 2):
        prefetch: TMA K tiles 0 and 1 (as far as they exist) into stages 0 and 1;
        for each K tile k: wait tma_bar[s] --> wgmma.mma_async m64n128k16 x 8 on Asmem[s],
        Bsmem[s] --> accumulator registers; commit + wait_group(0) (stage s is free again)
        --> the elected thread issues the TMA of K tile k + 2 into stage s;
        after the loop: registers --st.shared--> Dsmem --TMA store--> D[m_st:+128, n_st:+128].

    Barrier protocol:
        | barrier    | arrival count | who arrives                                    | who waits       | starting phase   |
        |------------|---------------|------------------------------------------------|-----------------|------------------|
        | tma_bar[s] | 1 (each)      | the elected thread (mbarrier.arrive.expect_tx, | all 128 threads | 0 for each stage;|
        | s = 0, 1   |               | 32 KiB), then the TMA engine's byte count      |                 | phase_tma[s]     |
        |            |               |                                                |                 | flips each time  |
        |            |               |                                                |                 | stage s is used  |
        Stage s is refilled only after wgmma.wait_group(0) has returned for the K tile that read
        it. With an odd number of K tiles the two stages are used a different number of times,
        which is why each stage keeps its own phase. Epilogue as in step 4.

    Blackwell twin: the same tma_bar[s] ring and refill rule; the MMA completion that frees a
    stage is tcgen05.commit on an mbarrier (accumulator in TMEM) instead of wgmma.wait_group
    (accumulator in registers).

    Who waits differs from the Blackwell twin: here all 128 threads wait on tma_bar[s] every K tile,
    which is safe because the barrier's next phase needs the elected thread to issue the next
    TMA after the warpgroup-wide wgmma, and all four warps execute every wgmma (.sync.aligned),
    so none can fall a phase behind. On Blackwell one thread issues the MMA and nothing keeps the
    other warps in step, so there only that thread waits inside the K loop.
    """
    a_type = tvm.DataType("float16")
    b_type = tvm.DataType("float16")
    d_type = tvm.DataType("float16")
    acc_type = tvm.DataType("float32")

    BLK_M, BLK_N, BLK_K = 128, 128, 64
    MMA_K = 16
    K_TILES = K // BLK_K
    PIPE_DEPTH = 2
    PRE_NUM = min(PIPE_DEPTH, K_TILES)  # K tiles loaded before the loop starts

    # >>> TODO 5.1: shared-memory layouts with a stage dimension
    A_layout = mma_shared_layout(a_type, SwizzleMode.SWIZZLE_128B_ATOM, (PIPE_DEPTH, BLK_M, BLK_K))
    B_layout = mma_shared_layout(b_type, SwizzleMode.SWIZZLE_128B_ATOM, (PIPE_DEPTH, BLK_N, BLK_K))
    # <<< TODO 5.1
    D_layout = mma_shared_layout(d_type, SwizzleMode.SWIZZLE_128B_ATOM, (BLK_M, BLK_N))
    TMA_BYTES = (BLK_M * BLK_K + BLK_N * BLK_K) * 2  # one K tile of A and of B, fp16
    RING = (K_TILES + PIPE_DEPTH - 1) // PIPE_DEPTH  # trips through the stages

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

        # ---- shared memory: barrier, then the 128B-swizzled tiles on a 1024-byte boundary ----
        pool = T.SMEMPool()
        # >>> TODO 5.2: the barriers of the stage ring
        tma_bar = pool.alloc((PIPE_DEPTH,), "uint64", align=8)
        # <<< TODO 5.2
        pool.move_base_to(1024)
        # >>> TODO 5.3: the A and B stage buffers
        Asmem = pool.alloc((PIPE_DEPTH, BLK_M, BLK_K), a_type, layout=A_layout)
        Bsmem = pool.alloc((PIPE_DEPTH, BLK_N, BLK_K), b_type, layout=B_layout)
        # <<< TODO 5.3
        Dsmem = pool.alloc((BLK_M, BLK_N), d_type, layout=D_layout)
        pool.commit()

        # ---- barrier init (one thread), made visible to every thread and to the async proxy ----
        if warp_id == 0:
            if lane_id == 0:
                # >>> TODO 5.4: initialise the ring's barriers
                for s in T.unroll(PIPE_DEPTH):
                    T.ptx.mbarrier.init.shared.b64(tma_bar.ptr_to([s]), T.uint32(1))
                # <<< TODO 5.4
        T.ptx.fence.mbarrier_init.release.cluster()
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cta_sync()

        m_st = T.meta_var(bx * BLK_M)
        n_st = T.meta_var(by * BLK_N)
        # one phase bit per stage, both starting at 0
        # >>> TODO 5.5: the phase state of the ring
        phase_tma = T.alloc_local((PIPE_DEPTH,), "int32")
        for s in T.unroll(PIPE_DEPTH):
            phase_tma[s] = 0
        # <<< TODO 5.5

        # ---- registers: the 128x128 fp32 accumulator (128 per thread), descriptors per stage ----
        acc = T.alloc_local((BLK_M * BLK_N // 128,), acc_type)
        # >>> TODO 5.6: the wgmma descriptors of the stages
        desc_a = T.alloc_local((PIPE_DEPTH,), "uint64")
        desc_b = T.alloc_local((PIPE_DEPTH,), "uint64")
        # the stages never move: encode their wgmma descriptors once
        for s in T.unroll(PIPE_DEPTH):
            encode_sw128_desc(desc_a[s], Asmem.ptr_to([s, 0, 0]))
            encode_sw128_desc(desc_b[s], Bsmem.ptr_to([s, 0, 0]))
        # <<< TODO 5.6

        # one elected thread: arm tma_bar[stage] with the byte count, load K tile k into stage
        # >>> TODO 5.7: load K tile k into stage `stage`
        @T.inline
        def tma_load(stage, k):
            T.ptx.mbarrier.arrive.expect_tx.shared.b64(tma_bar.ptr_to([stage]), T.uint32(TMA_BYTES))
            Tx.copy_async(Asmem[stage, :, :], A[m_st:m_st + BLK_M, k * BLK_K:(k + 1) * BLK_K],
                          dispatch="tma_auto", mbar=tma_bar.ptr_to([stage]))
            Tx.copy_async(Bsmem[stage, :, :], B[n_st:n_st + BLK_N, k * BLK_K:(k + 1) * BLK_K],
                          dispatch="tma_auto", mbar=tma_bar.ptr_to([stage]))
        # <<< TODO 5.7

        # the warpgroup multiplies K tile k, held in stage `stage`: 4 K-slices x 2 row halves
        # (8 wgmmas), one commit group, and waits for it; only the very first K=16 slice of the
        # whole K does not accumulate
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
            # ---- prefetch: fill both stages before the first MMA ----
            # >>> TODO 5.8: prologue: start the first loads
            if warp_id == 0:
                if T.cuda.elect_sync():
                    for s in T.unroll(PRE_NUM):
                        tma_load(s, s)
            # <<< TODO 5.8

            # the stage loop is unrolled so that `s` (stage, phase and descriptor index) is a constant
            # >>> TODO 5.9: the stage ring: wait, multiply, refill
            for ring in range(RING):
                for s in T.unroll(PIPE_DEPTH):
                    k = T.meta_var(ring * PIPE_DEPTH + s)
                    if k < K_TILES:
                        # every thread waits until K tile k has landed in stage s
                        T.cuda.mbarrier_wait(tma_bar.ptr_to([s]), phase_tma[s])
                        phase_tma[s] = phase_tma[s] ^ 1
                        # the wgmmas are done reading stage s when this returns: it may be refilled
                        mma_k_tile(s, k)
                        # ---- refill stage s with K tile k + PIPE_DEPTH ----
                        if warp_id == 0:
                            if T.cuda.elect_sync():
                                if k + PIPE_DEPTH < K_TILES:
                                    tma_load(s, k + PIPE_DEPTH)
            # <<< TODO 5.9

        # ---- writeback: registers -> fp16 -> Dsmem (fragment layout), then one TMA store ----
        @T.inline
        def store_tile():
            for h in T.unroll(2):
                for i in T.unroll(64):
                    Dsmem[acc_row(h, warp_id, lane_id, i), acc_col(lane_id, i)] = T.cast(
                        acc[h * 64 + i], d_type)
            # the TMA store reads Dsmem through the async proxy: fence, then sync
            T.ptx.fence.proxy.async_.shared__cta()
            T.cuda.cta_sync()
            if warp_id == 0:
                if T.cuda.elect_sync():
                    Tx.copy_async(D[m_st:m_st + BLK_M, n_st:n_st + BLK_N], Dsmem[:, :],
                                  dispatch="tma_auto")
                    T.ptx.cp.async_.bulk.commit_group()

        mma_tile()
        store_tile()

        # the store must finish reading Dsmem before the CTA (and its shared memory) goes away
        if warp_id == 0:
            T.ptx.cp.async_.bulk.wait_group(0)

    return kernel
