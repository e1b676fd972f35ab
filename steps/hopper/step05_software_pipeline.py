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

from kernel_helpers.todo import todo


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

    # TODO 5.1: shared-memory layouts with a stage dimension
    #   A and B now live in PIPE_DEPTH stages: step 4's 128B-swizzled MMA layout with a leading stage
    #   dimension, so each stage is a full 128x64 tile on a 1 KiB boundary.
    todo("5.1 shared-memory layouts with a stage dimension")
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
        # TODO 5.2: one TMA barrier per stage
        #   Two stages can be in flight, each completing on its own barrier: PIPE_DEPTH mbarriers.
        todo("5.2 one TMA barrier per stage")
        pool.move_base_to(1024)
        # TODO 5.3: the A and B stage buffers
        #   Allocate Asmem and Bsmem with the stage dimension first, with the layouts of TODO 5.1.
        todo("5.3 the A and B stage buffers")
        Dsmem = pool.alloc((BLK_M, BLK_N), d_type, layout=D_layout)
        pool.commit()

        # ---- barrier init (one thread), made visible to every thread and to the async proxy ----
        if warp_id == 0:
            if lane_id == 0:
                # TODO 5.4: initialise every stage's barrier
                #   Each tma_bar[s] gets one arrival per phase, by the same single thread; unroll over the stages.
                todo("5.4 initialise every stage's barrier")
        T.ptx.fence.mbarrier_init.release.cluster()
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cta_sync()

        m_st = T.meta_var(bx * BLK_M)
        n_st = T.meta_var(by * BLK_N)
        # TODO 5.5: one phase bit per stage
        #   A local int32 array of PIPE_DEPTH bits, all 0. One bit for all stages is wrong: with an odd
        #   number of K tiles the stages are used a different number of times.
        todo("5.5 one phase bit per stage")

        # ---- registers: the 128x128 fp32 accumulator (128 per thread), descriptors per stage ----
        acc = T.alloc_local((BLK_M * BLK_N // 128,), acc_type)
        # TODO 5.6: one wgmma descriptor pair per stage
        #   wgmma needs a descriptor for the tile it reads, and there are now PIPE_DEPTH tiles of each:
        #   PIPE_DEPTH descriptors each for A and B, encoded once, stage s pointing at stage s's first element.
        todo("5.6 one wgmma descriptor pair per stage")

        # TODO 5.7: load K tile k into stage `stage`
        #   An inline helper tma_load(stage, k), called below by the elected thread: step 4's load
        #   (arrive.expect_tx of TMA_BYTES, two TMA copies), aimed at stage `stage` of the buffers and of tma_bar,
        #   for K tile `k` (columns k * BLK_K ..), without the wait: that moves into the ring. Keep
        #   dispatch="tma_auto": otherwise the copy becomes cp.async and never completes on the barrier.
        todo("5.7 load K tile k into stage `stage`")

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
            # TODO 5.8: prologue: fill the stages before the first MMA
            #   One elected thread starts the loads of the first PRE_NUM K tiles, K tile s into stage s.
            todo("5.8 prologue: fill the stages before the first MMA")

            # TODO 5.9: the stage ring: wait for stage s, multiply it, refill it
            #   Walk over the K tiles as RING trips through the PIPE_DEPTH stages, K tile k in stage s = k %
            #   PIPE_DEPTH; unroll the stage loop so s is a compile-time constant, and skip the K tiles past the last
            #   one (the last trip may be partial). For K tile k, every thread: waits on stage s's barrier with stage
            #   s's own phase bit and flips that bit; the warpgroup multiplies stage s with the mma_k_tile helper
            #   above, which returns when the wgmmas are done reading stage s. Then one elected thread of warp 0
            #   refills stage s with K tile k + PIPE_DEPTH if that K tile exists, so it is in flight while the next
            #   stage is multiplied. No load past the last K tile: its bytes would never be waited for.
            todo("5.9 the stage ring: wait for stage s, multiply it, refill it")

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
