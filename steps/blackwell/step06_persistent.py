"""Step 6 (Blackwell): a persistent kernel with an L2-grouped tile scheduler.

The grid shrinks to one CTA per SM (sm_count CTAs); each CTA loops over the output tiles that
ClusterPersistentScheduler2D hands it (CTA i takes tiles i, i + sm_count, ...), in an order that
keeps groups of 8 tile rows together so their A and B tiles are reused from L2. TMEM and the
barriers are set up before the first tile.
"""

import tvm
from tvm.backend.cuda.lang.tile_scheduler import ClusterPersistentScheduler2D
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.backend.cuda.tile_primitive.tma_utils import mma_shared_layout, SwizzleMode
from tvm.tirx.layout import TileLayout, S, tid_in_wg as axis_tid_in_wg

from kernel_helpers.todo import todo


def hgemm_v6(M, N, K, sm_count):
    """D = A @ B^T for M, N multiples of 128, K a multiple of 64 (fp16 in, fp32 in TMEM, fp16 out).

    Grid: sm_count CTAs of 128 threads (148 on a B200). CTA bx takes output tiles bx, bx + sm_count,
    ... of the (M / 128) x (N / 128) tiles, in ClusterPersistentScheduler2D's L2-grouped order
    (l2_group_size = 8 tile rows); tile (m_idx, n_idx) is D[m_idx*128 : +128, n_idx*128 : +128].
    Data path in each CTA, per output tile, as in step 5 (stage s = k % 2):
        prefetch: TMA K tiles 0 and 1 (as far as they exist) into stages 0 and 1;
        for each K tile k: wait tma_bar[s] --> tcgen05.mma (accumulate = k != 0) on Asmem[s],
        Bsmem[s] (128B swizzle) --> accumulator in TMEM (128 lanes x 128 fp32 columns);
        tcgen05.commit onto mma_bar; wait mma_bar (stage s is free again) --> TMA of K tile
        k + 2 into stage s. All of it runs in one elected thread of warp 0.
    Then, per output tile, after a cta_sync where the other threads join: TMEM --tcgen05.ld + wait::ld-->
        registers (thread t holds row t) --cast to fp16--> Dsmem (128B swizzle) --fence.proxy.async
        + cta_sync; TMA store by one thread, cp.async.bulk.commit_group--> D (global); then the next tile.

    Barrier protocol (your first task: fill in the ? cells, then write the code to match; the
    other cells are step 5's):
        | barrier    | arrival count | who arrives                                | who waits   | starting phase        |
        |------------|---------------|--------------------------------------------|-------------|-----------------------|
        | tma_bar[s] | 1 (+ 32768    | the elected thread: mbarrier.arrive.       | the elected | ?                     |
        | s = 0, 1   | tx bytes)     | expect_tx(A + B tile bytes); the two TMA   | thread only |                       |
        |            |               | loads complete_tx their bytes              |             |                       |
        | mma_bar    | 1             | tcgen05.commit from the thread that issued | the elected | ?                     |
        |            |               | the MMA (mbarrier::arrive::one), once per  | thread only |                       |
        |            |               | K tile                                     |             |                       |
        Questions the table and the code must answer: a CTA now runs many tiles. When are the
        barriers initialised, and where does each phase bit stand when the next tile starts
        (think of a tile with an odd number of K tiles)? Dsmem is written again for every tile,
        while the previous tile's TMA store was only committed: what must complete, and who must
        know it, before the threads overwrite Dsmem? When is the last store waited for?

    Hopper twin: exercises on an H100 the same scheduler, the tma_bar[s] ring across tiles and
    the Dsmem reuse; its MMA completion is `wgmma.wait_group`, so `tcgen05.commit` onto mma_bar
    and TMEM reuse across tiles are exercised only by building this file for sm_100a.
    """
    a_type = tvm.DataType("float16")
    d_type = tvm.DataType("float16")
    acc_type = tvm.DataType("float32")
    BLK_M, BLK_N, BLK_K = 128, 128, 64
    K_TILES = K // BLK_K
    TILE_BYTES = (BLK_M * BLK_K + BLK_N * BLK_K) * 2  # what the two TMA loads deliver per K tile
    PIPE_DEPTH = 2
    PRE_NUM = min(PIPE_DEPTH, K_TILES)  # K tiles loaded before the loop starts
    RING = (K_TILES + PIPE_DEPTH - 1) // PIPE_DEPTH  # trips through the stages

    A_layout = mma_shared_layout(a_type, SwizzleMode.SWIZZLE_128B_ATOM, (PIPE_DEPTH, BLK_M, BLK_K))
    B_layout = mma_shared_layout(a_type, SwizzleMode.SWIZZLE_128B_ATOM, (PIPE_DEPTH, BLK_N, BLK_K))
    D_layout = mma_shared_layout(d_type, SwizzleMode.SWIZZLE_128B_ATOM, (BLK_M, BLK_N))

    # fmt: off
    @T.prim_func
    def kernel(
        A: T.Buffer((M, K), "float16"),
        B: T.Buffer((N, K), "float16"),
        D: T.Buffer((M, N), "float16"),
    ):
        T.device_entry()
        # TODO 6.1: launch one CTA per SM
        #   bx: this CTA's index in a one-dimensional grid of sm_count CTAs (sm_count is passed in), one CTA per SM;
        #   each CTA then loops over output tiles instead of owning one. API: T.cta_id.
        todo("6.1 launch one CTA per SM")
        wg_id = T.warpgroup_id([1])
        warp_id = T.warp_id_in_wg([4])
        lane_id = T.lane_id([32])

        # ---- shared memory: TMEM address slot + barriers, then the tiles at 1 KiB ----
        pool = T.SMEMPool()
        tmem_pool = T.TMEMPool(pool, total_cols=512, cta_group=1)  # takes the address slot
        mma_bar = pool.alloc((1,), "uint64", align=8)
        tma_bar = pool.alloc((PIPE_DEPTH,), "uint64", align=8)
        pool.move_base_to(1024)  # 128B-swizzled tiles must start on a 1024-byte boundary
        Asmem = pool.alloc((PIPE_DEPTH, BLK_M, BLK_K), a_type, layout=A_layout)
        Bsmem = pool.alloc((PIPE_DEPTH, BLK_N, BLK_K), a_type, layout=B_layout)
        Dsmem = pool.alloc((BLK_M, BLK_N), d_type, layout=D_layout)
        pool.commit()

        # ---- TMEM: warp 0 allocates all 512 columns; the accumulator is columns [0, 128) ----
        tmem_pool.commit()
        tmem = tmem_pool.alloc((128, 512), "float32")

        # ---- barrier init (one thread), made visible to every thread and to the async proxy ----
        if warp_id == 0:
            if lane_id == 0:
                for s in T.unroll(PIPE_DEPTH):
                    T.ptx.mbarrier.init.shared.b64(tma_bar.ptr_to([s]), T.uint32(1))
                T.ptx.mbarrier.init.shared.b64(mma_bar.ptr_to([0]), T.uint32(1))
        T.ptx.fence.mbarrier_init.release.cluster()
        T.ptx.fence.proxy.async_.shared__cta()
        T.ptx.tcgen05.fence__before_thread_sync()
        T.cuda.cta_sync()
        T.ptx.tcgen05.fence__after_thread_sync()
        # TMEMPool addresses columns from 0: a 512-column allocation always starts there.
        T.cuda.trap_when_assert_failed(tmem_pool.addr == T.uint32(0))

        # ---- tile scheduler: CTA bx takes tiles bx, bx + sm_count, ... in L2-grouped order ----
        # TODO 6.2: the tile scheduler and this tile's origin
        #   tile_scheduler: a ClusterPersistentScheduler2D over the (M / BLK_M) x (N / BLK_N) output tiles, with
        #   sm_count CTAs taking turns and an L2 group of 8 tile rows, initialised with this CTA's bx. m_st and n_st,
        #   which the helpers below read, are expressions of its current tile indices (T.meta_var), so they follow the
        #   scheduler as it advances. API: tvm.backend.cuda.lang.tile_scheduler.
        todo("6.2 the tile scheduler and this tile's origin")
        # the phase bits of step 5
        phase_mma: T.int32
        phase_mma = 0
        phase_tma = T.alloc_local((PIPE_DEPTH,), "int32")  # one phase bit per stage
        for s in T.unroll(PIPE_DEPTH):
            phase_tma[s] = 0

        # one elected thread: arm tma_bar[stage] with the byte count, load K tile k into stage
        @T.inline
        def tma_load(stage, k):
            T.ptx.mbarrier.arrive.expect_tx.shared.b64(tma_bar.ptr_to([stage]), T.uint32(TILE_BYTES))
            Tx.copy_async(Asmem[stage, :, :], A[m_st:m_st + BLK_M, k * BLK_K:(k + 1) * BLK_K],
                          dispatch="tma_auto", mbar=tma_bar.ptr_to([stage]))
            Tx.copy_async(Bsmem[stage, :, :], B[n_st:n_st + BLK_N, k * BLK_K:(k + 1) * BLK_K],
                          dispatch="tma_auto", mbar=tma_bar.ptr_to([stage]))

        # ---- the K loop of one output tile, run by one elected thread of warp 0 alone ----
        @T.inline
        def mma_tile():
            if warp_id == 0:
                if T.cuda.elect_sync():
                    # ---- prefetch: fill both stages before the first MMA ----
                    for s in T.unroll(PRE_NUM):
                        tma_load(s, s)

                    # the stage loop is unrolled so that `s` (stage and phase index) is a constant
                    for ring in T.serial(RING):
                        for s in T.unroll(PIPE_DEPTH):
                            k = T.meta_var(ring * PIPE_DEPTH + s)
                            if k < K_TILES:
                                # ---- wait until K tile k has landed in stage s ----
                                T.cuda.mbarrier_wait(tma_bar.ptr_to([s]), phase_tma[s])
                                phase_tma[s] = phase_tma[s] ^ 1
                                T.ptx.tcgen05.fence__after_thread_sync()

                                # ---- MMA on stage s: 4 x tcgen05.mma, then commit ----
                                Tx.gemm_async(tmem[:, 0:BLK_N], Asmem[s, :, :], Bsmem[s, :, :],
                                              accum=(k != 0), dispatch="tcgen05", cta_group=1)
                                T.ptx.tcgen05.commit.cta_group__1.mbarrier__arrive__one.shared__cluster.b64(
                                    mma_bar.ptr_to([0]))

                                # ---- wait for this MMA: TMEM updated, stage s free ----
                                T.cuda.mbarrier_wait(mma_bar.ptr_to([0]), phase_mma)
                                phase_mma = phase_mma ^ 1

                                # ---- refill stage s with K tile k + PIPE_DEPTH ----
                                if k + PIPE_DEPTH < K_TILES:
                                    tma_load(s, k + PIPE_DEPTH)
                    T.ptx.tcgen05.fence__before_thread_sync()

            # the other threads join here: the accumulator in TMEM is complete
            T.cuda.cta_sync()
            T.ptx.tcgen05.fence__after_thread_sync()

        # ---- writeback: TMEM -> registers (thread t gets row t) -> Dsmem -> TMA store -> D ----
        @T.inline
        def store_tile():
            Dreg = T.alloc_local((BLK_N,), acc_type)
            Dreg_f16 = T.alloc_local((BLK_N,), d_type)
            Dreg_wg = Dreg.view(128, BLK_N, layout=TileLayout(S[(128, BLK_N) : (1@axis_tid_in_wg, 1)]))
            Tx.wg.copy_async(Dreg_wg[:, :], tmem[:, 0:BLK_N])
            T.ptx.tcgen05.wait__ld.sync.aligned()
            T.ptx.tcgen05.fence__before_thread_sync()
            Tx.cast(Dreg_f16[:], Dreg[:])
            # TODO 6.3: wait until the previous tile's store has read Dsmem
            #   Before the threads write this tile's rows into Dsmem, the previous tile's TMA store (committed, not
            #   waited for) may still be reading it. The block guarantees that it has finished reading, for every
            #   thread that writes next. The last tile's store is waited for by the teardown. API family:
            #   T.ptx.cp.async_.bulk (wait_group and its .read form), T.cuda.cta_sync.
            todo("6.3 wait until the previous tile's store has read Dsmem")
            Tx.copy(Dsmem[warp_id * 32 + lane_id, :], Dreg_f16[:])
            # the TMA store reads Dsmem through the async proxy: fence, then sync
            T.ptx.fence.proxy.async_.shared__cta()
            T.cuda.cta_sync()
            if warp_id == 0:
                if T.cuda.elect_sync():
                    Tx.copy_async(D[m_st:m_st + BLK_M, n_st:n_st + BLK_N], Dsmem[:, :],
                                  dispatch="tma_auto")
                    T.ptx.cp.async_.bulk.commit_group()

        # TODO 6.4: every output tile of this CTA, one after the other
        #   Every output tile the scheduler gives this CTA: its K loop (mma_tile) and its writeback (store_tile), then
        #   the scheduler's next tile. m_st and n_st follow the scheduler. API: the scheduler's valid() and
        #   next_tile().
        todo("6.4 every output tile of this CTA, one after the other")

        # ---- teardown: the last store has completed and every TMEM read is done; warp 0 frees TMEM ----
        if warp_id == 0:
            T.ptx.cp.async_.bulk.wait_group(0)
        T.cuda.cta_sync()
        tmem_pool.dealloc()
    # fmt: on

    return kernel
