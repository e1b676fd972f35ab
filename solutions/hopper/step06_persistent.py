"""Step 6 (Hopper): a persistent kernel with an L2-grouped tile scheduler.

The grid shrinks to the CTAs the GPU holds at once, CTAS_PER_SM on each SM; each CTA loops over
output tiles handed out by ClusterPersistentScheduler2D (CTA i takes tiles i, i + grid, ...), in an
order that keeps groups of 8 tile rows together so their A and B tiles are reused from L2.
Barriers are set up once per CTA, so their phases run on across tiles instead of restarting at 0.

How many CTAs an SM holds is this step's decision. Step 5's CTA takes 97 KiB of shared memory
(two stages and Dsmem) and 128 threads, so an SM holds two of them, and while one waits for its
TMA loads or writes its tile back, the other computes. A persistent grid of one CTA per SM gives
that up: measured on an H100 (one run, interleaved with cuBLAS, L2 flushed), one CTA per SM ran
at 0.57-0.64x cuBLAS where step 5 ran at 0.87-0.93x; two per SM run at 0.91-0.96x
(docs/ladder-h100.md has this step's numbers at every bench shape).
"""

import tvm
from tvm.backend.cuda.lang.tile_scheduler import ClusterPersistentScheduler2D
from tvm.backend.cuda.tile_primitive.tma_utils import SwizzleMode, mma_shared_layout
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

from kernel_helpers.hopper import acc_col, acc_row, encode_sw128_desc, wgmma_128x128x16


def hgemm_v6(M, N, K, sm_count):
    """D = A @ B^T with CTAS_PER_SM * sm_count persistent CTAs, each looping over 128x128 output tiles.

    Data path (per CTA, per output tile (m_idx, n_idx) from the scheduler, m_st = 128*m_idx,
    n_st = 128*n_idx): step 5's two-stage TMA -> wgmma -> registers pipeline over K, then
    registers --st.shared--> Dsmem --TMA store--> D[m_st:+128, n_st:+128]; then the next tile.

    Barrier protocol (barriers initialised once per CTA, before the tile loop):
        | barrier    | arrival count | who arrives                                    | who waits       | starting phase    |
        |------------|---------------|------------------------------------------------|-----------------|-------------------|
        | tma_bar[s] | 1 (each)      | the elected thread (mbarrier.arrive.expect_tx, | all 128 threads | 0, ONCE per CTA;  |
        | s = 0, 1   |               | 32 KiB), then the TMA engine's byte count      |                 | phase_tma[s] flips|
        |            |               |                                                |                 | each use and      |
        |            |               |                                                |                 | carries over from |
        |            |               |                                                |                 | tile to tile      |
        Resetting phase_tma to 0 at each tile is the classic bug: with an odd number of K tiles a
        stage ends a tile at phase 1, and a wait on phase 0 would pass at once on stale data.
        Dsmem reuse: the TMA store of tile i is committed but not waited for; before tile i+1
        writes Dsmem, warp 0 (whichever lane issued the store) waits with
        cp.async.bulk.wait_group.read(0) (the store has finished reading Dsmem), then cta_sync.
        After the last tile warp 0 waits with cp.async.bulk.wait_group(0).

    Blackwell twin: the same scheduler, tma_bar[s] ring and carried-over phases, plus an
    mma_bar whose phase also carries over (tcgen05.commit, accumulator in TMEM); here
    wgmma.wait_group needs no phase and the accumulator is in registers.

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
        # >>> TODO 6.1: how many CTAs each SM holds at once
        CTAS_PER_SM = T.meta_var(2)  # 2 x 97 KiB of shared memory and 2 x 128 threads fit an SM; a third does not
        bx = T.cta_id([CTAS_PER_SM * sm_count])
        # <<< TODO 6.1
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

        # ---- tile scheduler: CTA bx takes tiles bx, bx + grid, ... in L2-grouped order ----
        # >>> TODO 6.2: the tile scheduler and this tile's origin
        tile_scheduler = ClusterPersistentScheduler2D(
            "ts", num_m_tiles=M // BLK_M, num_n_tiles=N // BLK_N,
            l2_group_size=8, num_clusters=CTAS_PER_SM * sm_count)
        tile_scheduler.init(bx)
        m_st = T.meta_var(tile_scheduler.m_idx * BLK_M)
        n_st = T.meta_var(tile_scheduler.n_idx * BLK_N)
        # <<< TODO 6.2
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
            # >>> TODO 6.3: wait until the previous tile's store has read Dsmem
            if warp_id == 0:
                T.ptx.cp.async_.bulk.wait_group.read(0)
            T.cuda.cta_sync()
            # <<< TODO 6.3
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

        # >>> TODO 6.4: every output tile of this CTA, one after the other
        while tile_scheduler.valid():
            mma_tile()
            store_tile()
            tile_scheduler.next_tile()
        # <<< TODO 6.4

        # the last store must finish reading Dsmem before the CTA (and its shared memory) goes away
        if warp_id == 0:
            T.ptx.cp.async_.bulk.wait_group(0)

    return kernel
