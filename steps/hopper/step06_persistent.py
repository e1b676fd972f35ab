"""Step 6 (Hopper): a persistent kernel with an L2-grouped tile scheduler.

The grid shrinks to one CTA per SM; each CTA loops over output tiles handed out by
ClusterPersistentScheduler2D (CTA i takes tiles i, i + sm_count, ...), in an order that keeps
groups of 8 tile rows together so their A and B tiles are reused from L2. Barriers are set up
once per CTA, before the tile loop.

Expect this step to be slower than step 5 on an H100 (430 against 660 TFLOP/s at 4096^3, measured
in one run: docs/measurements.md). Step 5 fits two CTAs on each SM, and while one waits for its
TMA loads the other computes; here one CTA per SM with two stages waits for each K tile's load
itself. Persistence pays off once a second role loads while the MMA computes and the ring is
deep enough to cover the load latency: step 7 alone gains 2% (441 TFLOP/s, two stages), step 8
reaches 0.94x cuBLAS (six stages, one wgmma group in flight); measured in one H100 run.
"""

import tvm
from tvm.backend.cuda.lang.tile_scheduler import ClusterPersistentScheduler2D
from tvm.backend.cuda.tile_primitive.tma_utils import SwizzleMode, mma_shared_layout
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

from kernel_helpers.hopper import acc_col, acc_row, encode_sw128_desc, wgmma_128x128x16

from kernel_helpers.todo import todo


def hgemm_v6(M, N, K, sm_count):
    """D = A @ B^T with sm_count persistent CTAs, each looping over 128x128 output tiles.

    Data path (per CTA, per output tile (m_idx, n_idx) from the scheduler, m_st = 128*m_idx,
    n_st = 128*n_idx): step 5's two-stage TMA -> wgmma -> registers pipeline over K, then
    registers --st.shared--> Dsmem --TMA store--> D[m_st:+128, n_st:+128]; then the next tile.

    Barrier protocol (barriers initialised once per CTA, before the tile loop; your first task:
    fill in the ? cell, then write the code):
        | barrier    | arrival count | who arrives                                    | who waits       | starting phase |
        |------------|---------------|------------------------------------------------|-----------------|----------------|
        | tma_bar[s] | 1 (each)      | the elected thread (mbarrier.arrive.expect_tx, | all 128 threads | ?              |
        | s = 0, 1   |               | 32 KiB), then the TMA engine's byte count      |                 |                |
        Questions to answer first: in which phase is each stage's barrier when a tile ends, if the
        number of K tiles is odd, and what does the next tile's first wait then need? Dsmem is
        reused by every tile, and a TMA store that was only committed may still be reading it: what
        must happen before the next tile's threads write it, and after the last tile?

    Blackwell twin: the same scheduler and tma_bar[s] ring, plus an mma_bar (tcgen05.commit,
    accumulator in TMEM); here wgmma.wait_group needs no barrier and the accumulator is in
    registers.
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

    A_layout = mma_shared_layout(a_type, SwizzleMode.SWIZZLE_128B_ATOM, (PIPE_DEPTH, BLK_M, BLK_K))
    B_layout = mma_shared_layout(b_type, SwizzleMode.SWIZZLE_128B_ATOM, (PIPE_DEPTH, BLK_N, BLK_K))
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
        # TODO 6.1: launch one CTA per SM
        #   A persistent kernel launches as many CTAs as the GPU has SMs (sm_count, passed in), each looping
        #   over output tiles instead of one CTA per tile. bx names this CTA; the grid is one-dimensional.
        todo("6.1 launch one CTA per SM")
        wg_id = T.warpgroup_id([1])
        warp_id = T.warp_id_in_wg([4])
        lane_id = T.lane_id([32])

        # ---- shared memory: barrier, then the 128B-swizzled tiles on a 1024-byte boundary ----
        pool = T.SMEMPool()
        tma_bar = pool.alloc((PIPE_DEPTH,), "uint64", align=8)
        pool.move_base_to(1024)
        Asmem = pool.alloc((PIPE_DEPTH, BLK_M, BLK_K), a_type, layout=A_layout)
        Bsmem = pool.alloc((PIPE_DEPTH, BLK_N, BLK_K), b_type, layout=B_layout)
        Dsmem = pool.alloc((BLK_M, BLK_N), d_type, layout=D_layout)
        pool.commit()

        # ---- barrier init (one thread), made visible to every thread and to the async proxy ----
        if warp_id == 0:
            if lane_id == 0:
                for s in T.unroll(PIPE_DEPTH):
                    T.ptx.mbarrier.init.shared.b64(tma_bar.ptr_to([s]), T.uint32(1))
        T.ptx.fence.mbarrier_init.release.cluster()
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cta_sync()

        # ---- tile scheduler: which output tiles this CTA computes, in which order ----
        # TODO 6.2: the tile scheduler and this tile's origin
        #   tile_scheduler: a ClusterPersistentScheduler2D over the (M/128) x (N/128) output tiles, shared
        #   by all the CTAs of the grid in an L2-friendly order, started at this CTA; m_st and n_st as
        #   expressions (T.meta_var) of its current tile indices, so they follow it as it advances.
        todo("6.2 the tile scheduler and this tile's origin")
        # one phase bit per stage, both starting at 0
        phase_tma = T.alloc_local((PIPE_DEPTH,), "int32")
        for s in T.unroll(PIPE_DEPTH):
            phase_tma[s] = 0

        # ---- registers: the 128x128 fp32 accumulator (128 per thread), descriptors per stage ----
        acc = T.alloc_local((BLK_M * BLK_N // 128,), acc_type)
        desc_a = T.alloc_local((PIPE_DEPTH,), "uint64")
        desc_b = T.alloc_local((PIPE_DEPTH,), "uint64")
        # the stages never move: encode their wgmma descriptors once
        for s in T.unroll(PIPE_DEPTH):
            encode_sw128_desc(desc_a[s], Asmem.ptr_to([s, 0, 0]))
            encode_sw128_desc(desc_b[s], Bsmem.ptr_to([s, 0, 0]))

        # one elected thread: arm tma_bar[stage] with the byte count, load K tile k into stage
        @T.inline
        def tma_load(stage, k):
            T.ptx.mbarrier.arrive.expect_tx.shared.b64(tma_bar.ptr_to([stage]), T.uint32(TMA_BYTES))
            Tx.copy_async(Asmem[stage, :, :], A[m_st:m_st + BLK_M, k * BLK_K:(k + 1) * BLK_K],
                          dispatch="tma_auto", mbar=tma_bar.ptr_to([stage]))
            Tx.copy_async(Bsmem[stage, :, :], B[n_st:n_st + BLK_N, k * BLK_K:(k + 1) * BLK_K],
                          dispatch="tma_auto", mbar=tma_bar.ptr_to([stage]))

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
            if warp_id == 0:
                if T.cuda.elect_sync():
                    for s in T.unroll(PRE_NUM):
                        tma_load(s, s)

            # the stage loop is unrolled so that `s` (stage, phase and descriptor index) is a constant
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

        # ---- writeback: registers -> fp16 -> Dsmem (fragment layout), then one TMA store ----
        @T.inline
        def store_tile():
            # the previous tile's TMA store must have finished reading Dsmem before we overwrite it
            # TODO 6.3: wait until the previous tile's store has read Dsmem
            #   store_tile now runs once per tile, and the previous tile's TMA store was only committed: it may
            #   still be reading Dsmem. Before any thread writes Dsmem, that store must be done with it, and every
            #   thread must know. API: the cp.async.bulk wait_group family (docs/tirx-facts.md), T.cuda's syncs.
            #   The last tile's store is waited for after the tile loop, as in step 5.
            todo("6.3 wait until the previous tile's store has read Dsmem")
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

        # TODO 6.4: every output tile of this CTA, one after the other
        #   While the scheduler has a tile for this CTA: that tile's K loop (mma_tile) and writeback
        #   (store_tile), then the scheduler's next tile. m_st and n_st follow the scheduler, so the helpers
        #   do too. The phase state was initialised once, above, before the loop.
        todo("6.4 every output tile of this CTA, one after the other")

        # the last store must finish reading Dsmem before the CTA (and its shared memory) goes away
        if warp_id == 0:
            T.ptx.cp.async_.bulk.wait_group(0)

    return kernel
