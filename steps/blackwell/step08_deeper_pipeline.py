"""Step 8 (Blackwell): a deeper pipeline.

Step 7's roles and barriers, with a deeper ring of shared-memory stages. With four stages the
TMA thread can be at most three K tiles ahead of the MMA: loads that take longer than three K
tiles' MMAs (about 0.2 us each at 128x128x64) stall the tensor core. How many stages fit, and what else
must change when PIPE_DEPTH grows?
"""

import tvm
from tvm.backend.cuda.lang.pipeline import MBarrier, PipelineState, TCGen05Bar, TMABar
from tvm.backend.cuda.lang.tile_scheduler import ClusterPersistentScheduler2D
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.backend.cuda.tile_primitive.tma_utils import mma_shared_layout, SwizzleMode
from tvm.tirx.layout import TileLayout, S, tid_in_wg as axis_tid_in_wg

from kernel_helpers.todo import todo


def hgemm_v8(M, N, K, sm_count):
    """D = A @ B^T for M, N multiples of 128, K a multiple of 64 (fp16 in, fp32 in TMEM, fp16 out).

    Grid: sm_count CTAs of 256 threads (two warpgroups). Each CTA walks its output tiles in
    ClusterPersistentScheduler2D's L2-grouped order, as in step 6; each role keeps its own copy of
    the scheduler and walks the same tiles, so all roles agree on the number of tiles and of K tiles.
    Roles and data path, per output tile (stage s and its phase come from a PipelineState that
    counts K tiles from the first tile of the CTA on, PIPE_DEPTH stages: TODO 8.1):
        TMA producer (warpgroup 1, warp 3, one elected thread): for each K tile: wait mma2tma[s]
            (stage s is free) --> mbarrier.arrive.expect_tx(tma2mma[s], 32768) --> TMA A, B tiles
            --> Asmem[s], Bsmem[s] (128B swizzle).
        MMA issuer (warpgroup 1, warp 0, one elected thread): wait ld2mma (the writeback has read
            the previous tile's accumulator out of TMEM) --> for each K tile: wait tma2mma[s] -->
            tcgen05.mma (accumulate = k != 0) into TMEM columns [0, 128) --> tcgen05.commit onto
            mma2tma[s]; after the last K tile: tcgen05.commit onto mma2ld.
        Writeback (warpgroup 0, 128 threads, thread t owns row t): wait mma2ld --> in EPI_N = 64
            column chunks: TMEM --tcgen05.ld + wait::ld--> registers; after the last chunk's load
            arrive on ld2mma (TMEM free) --> fp16 --> Dsmem (128 x 64, 128B swizzle)
            --fence.proxy.async + named barrier 1--> TMA store by one thread --> D.
        Warpgroup 1's warps 1 and 2 have no role: they go straight to the teardown.

    Barrier protocol (all barriers initialised once per CTA by thread 0, before any role starts):
        | barrier     | count | who arrives                          | who waits            | starting phase |
        |-------------|-------|--------------------------------------|----------------------|----------------|
        | tma2mma[s]  | 1     | TMA thread: arrive.expect_tx(32768); | MMA thread           | 0 (consumer)   |
        | s < DEPTH   | + tx  | the two TMA loads complete_tx        |                      |                |
        | mma2tma[s]  | 1     | MMA thread: tcgen05.commit           | TMA thread           | 1 (producer:   |
        | s < DEPTH   |       | (cta_group::1, unicast) per K tile   |                      | stages start   |
        |             |       |                                      |                      | free)          |
        | mma2ld      | 1     | MMA thread: tcgen05.commit after the | all 128 writeback    | 0 (consumer)   |
        |             |       | last K tile of each output tile      | threads              |                |
        | ld2mma      | 128   | every writeback thread, once per     | MMA thread           | 1 (producer:   |
        |             |       | tile, after its last tcgen05.ld      |                      | TMEM starts    |
        |             |       |                                      |                      | free)          |
        Every phase is tracked by a PipelineState (stage, phase) that starts once per CTA and runs
        on across tiles; the shared-memory stage is always the state's stage, never k % PIPE_DEPTH
        (with K tiles not a multiple of PIPE_DEPTH the two would disagree from the second tile on,
        for example 9 K tiles per tile at 4096 x 2944 x 576).
        The TMA and MMA loops run the same number of K tiles per output tile: with different trip
        counts one of them waits for a phase that never comes.
        No waiter can be lapped (a parity wait cannot tell phase n from phase n + 2, so a thread
        may wait on a barrier in a loop only if the barrier's next phase needs an arrival from it):
        each barrier's next phase needs an arrival from each of its waiters. tma2mma[s]'s next phase needs the MMA thread's commit on mma2tma[s], and the
        other way round; mma2ld's next phase needs the next tile's MMAs, which wait on ld2mma,
        which needs all 128 writeback threads to have arrived after their mma2ld wait.
        tcgen05 ordering: the MMA thread fences (tcgen05.fence::after_thread_sync) after each wait;
        the writeback fences after its mma2ld wait, and fences before_thread_sync after its last
        tcgen05.wait::ld before it arrives on ld2mma.
        Dsmem reuse: before writing Dsmem, writeback warp 0 waits until the previous TMA store
        has read it (cp.async.bulk.wait_group.read 0), then named barrier 1 (128 threads).
        Teardown: writeback warp 0 waits for its last store (wait_group 0); cta_sync; warp 0 of
        the CTA (a writeback warp) frees TMEM.

    Hopper twin: solutions/hopper/step08 runs the same role split and the same ring on an H100.
    What only Blackwell has here (the MMA's completion, TMEM and its hand-over between roles) is
    checked only by the build (sm_100a and sm_103a) and by reading the generated code.
    """
    a_type = tvm.DataType("float16")
    d_type = tvm.DataType("float16")
    acc_type = tvm.DataType("float32")
    BLK_M, BLK_N, BLK_K = 128, 128, 64
    K_TILES = K // BLK_K
    TILE_BYTES = (BLK_M * BLK_K + BLK_N * BLK_K) * 2  # what the two TMA loads deliver per K tile
    EPI_N = 64  # writeback chunk: 64 fp32 registers per thread, one 128B-swizzled Dsmem row
    WG_NUMBER = 2
    WB_THREADS = 128  # the writeback warpgroup
    WB_BARRIER = 1  # named barrier id of the writeback warpgroup (0 is the CTA barrier)
    # TODO 8.1: as many stages as shared memory holds
    #   PIPE_DEPTH: the ring's depth, the most stages one CTA's shared memory holds beside everything else it
    #   allocates, computed from the sizes so that a later step that changes a tile changes the depth with it.
    #   Later steps reuse the names SMEM_PER_CTA (what one CTA may use) and EPILOGUE_SMEM (what is not a stage).
    todo("8.1 as many stages as shared memory holds")

    A_layout = mma_shared_layout(a_type, SwizzleMode.SWIZZLE_128B_ATOM, (PIPE_DEPTH, BLK_M, BLK_K))
    B_layout = mma_shared_layout(a_type, SwizzleMode.SWIZZLE_128B_ATOM, (PIPE_DEPTH, BLK_N, BLK_K))
    D_layout = mma_shared_layout(d_type, SwizzleMode.SWIZZLE_128B_ATOM, (BLK_M, EPI_N))

    # fmt: off
    @T.prim_func
    def kernel(
        A: T.Buffer((M, K), "float16"),
        B: T.Buffer((N, K), "float16"),
        D: T.Buffer((M, N), "float16"),
    ):
        T.device_entry()
        bx = T.cta_id([sm_count])
        wg_id = T.warpgroup_id([WG_NUMBER])
        warp_id = T.warp_id_in_wg([4])
        lane_id = T.lane_id([32])

        # ---- shared memory: TMEM address slot + barriers, then the tiles at 1 KiB ----
        pool = T.SMEMPool()
        tmem_pool = T.TMEMPool(pool, total_cols=512, cta_group=1)  # takes the address slot
        tma2mma = TMABar(pool, PIPE_DEPTH)
        mma2tma = TCGen05Bar(pool, PIPE_DEPTH)
        mma2ld = TCGen05Bar(pool, 1)
        ld2mma = MBarrier(pool, 1)
        pool.move_base_to(1024)  # 128B-swizzled tiles must start on a 1024-byte boundary
        Asmem = pool.alloc((PIPE_DEPTH, BLK_M, BLK_K), a_type, layout=A_layout)
        Bsmem = pool.alloc((PIPE_DEPTH, BLK_N, BLK_K), a_type, layout=B_layout)
        Dsmem = pool.alloc((BLK_M, EPI_N), d_type, layout=D_layout)
        pool.commit()

        # ---- TMEM: warp 0 allocates all 512 columns; the accumulator is columns [0, 128) ----
        tmem_pool.commit()
        tmem = tmem_pool.alloc((128, 512), "float32")

        # ---- barrier init (thread 0 of the CTA, outside any role branch) ----
        tma2mma.init(1)
        mma2tma.init(1)
        mma2ld.init(1)
        ld2mma.init(WB_THREADS)
        T.ptx.fence.mbarrier_init.release.cluster()
        T.ptx.fence.proxy.async_.shared__cta()
        T.ptx.tcgen05.fence__before_thread_sync()
        T.cuda.cta_sync()
        T.ptx.tcgen05.fence__after_thread_sync()
        # TMEMPool addresses columns from 0: a 512-column allocation always starts there.
        T.cuda.trap_when_assert_failed(tmem_pool.addr == T.uint32(0))

        # ---- tile scheduler: CTA bx takes tiles bx, bx + sm_count, ... in L2-grouped order ----
        tile_scheduler = ClusterPersistentScheduler2D(
            "ts", num_m_tiles=M // BLK_M, num_n_tiles=N // BLK_N,
            l2_group_size=8, num_clusters=sm_count)
        tile_scheduler.init(bx)
        m_st = T.meta_var(tile_scheduler.m_idx * BLK_M)
        n_st = T.meta_var(tile_scheduler.n_idx * BLK_N)

        if wg_id == 1:
            if warp_id == 3:
                tma_state = PipelineState(PIPE_DEPTH, 1)  # producer: stages start free
                if T.cuda.elect_sync():
                    while tile_scheduler.valid():
                        for k in T.serial(K_TILES):
                            s = T.meta_var(tma_state.stage)
                            mma2tma.wait(s, tma_state.phase)
                            tma2mma.arrive(s, TILE_BYTES)
                            Tx.copy_async(Asmem[s, :, :], A[m_st:m_st + BLK_M, k * BLK_K:(k + 1) * BLK_K],
                                          dispatch="tma_auto", mbar=tma2mma.ptr_to([s]))
                            Tx.copy_async(Bsmem[s, :, :], B[n_st:n_st + BLK_N, k * BLK_K:(k + 1) * BLK_K],
                                          dispatch="tma_auto", mbar=tma2mma.ptr_to([s]))
                            tma_state.advance()
                        tile_scheduler.next_tile()

        if wg_id == 1:
            if warp_id == 0:
                mma_state = PipelineState(PIPE_DEPTH, 0)  # consumer of tma2mma
                acc_state = PipelineState(1, 1)  # producer of the accumulator: TMEM starts free
                if T.cuda.elect_sync():
                    while tile_scheduler.valid():
                        ld2mma.wait(0, acc_state.phase)
                        acc_state.advance()
                        T.ptx.tcgen05.fence__after_thread_sync()
                        for k in T.serial(K_TILES):
                            s = T.meta_var(mma_state.stage)
                            tma2mma.wait(s, mma_state.phase)
                            T.ptx.tcgen05.fence__after_thread_sync()
                            Tx.gemm_async(tmem[:, 0:BLK_N], Asmem[s, :, :], Bsmem[s, :, :],
                                          accum=(k != 0), dispatch="tcgen05", cta_group=1)
                            mma2tma.arrive(s)  # stage s is free once these MMAs finish
                            mma_state.advance()
                        mma2ld.arrive(0)  # the accumulator is complete once all MMAs finish
                        tile_scheduler.next_tile()

        if wg_id == 0:
            wb_state = PipelineState(1, 0)  # consumer of mma2ld
            Dreg = T.alloc_local((EPI_N,), acc_type)
            Dreg_f16 = T.alloc_local((EPI_N,), d_type)
            Dreg_wg = Dreg.view(128, EPI_N, layout=TileLayout(S[(128, EPI_N) : (1@axis_tid_in_wg, 1)]))
            while tile_scheduler.valid():
                mma2ld.wait(0, wb_state.phase)
                wb_state.advance()
                T.ptx.tcgen05.fence__after_thread_sync()
                for c in T.unroll(BLK_N // EPI_N):
                    Tx.wg.copy_async(Dreg_wg[:, :], tmem[:, c * EPI_N:(c + 1) * EPI_N])
                    T.ptx.tcgen05.wait__ld.sync.aligned()
                    if c == BLK_N // EPI_N - 1:
                        # all TMEM reads of this tile are done: the MMA may overwrite it
                        T.ptx.tcgen05.fence__before_thread_sync()
                        ld2mma.arrive(0)
                    Tx.cast(Dreg_f16[:], Dreg[:])
                    # the previous TMA store must have finished reading Dsmem
                    if warp_id == 0:
                        T.ptx.cp.async_.bulk.wait_group.read(0)
                    T.cuda.warpgroup_sync(WB_BARRIER)
                    Tx.copy(Dsmem[warp_id * 32 + lane_id, :], Dreg_f16[:])
                    T.ptx.fence.proxy.async_.shared__cta()
                    T.cuda.warpgroup_sync(WB_BARRIER)
                    if warp_id == 0:
                        if T.cuda.elect_sync():
                            Tx.copy_async(D[m_st:m_st + BLK_M, n_st + c * EPI_N:n_st + (c + 1) * EPI_N],
                                          Dsmem[:, :], dispatch="tma_auto")
                            T.ptx.cp.async_.bulk.commit_group()
                tile_scheduler.next_tile()
            # the last TMA store has finished before the CTA frees TMEM and exits
            if warp_id == 0:
                T.ptx.cp.async_.bulk.wait_group(0)

        # ---- teardown: every role is done; warp 0 of the CTA frees TMEM ----
        T.cuda.cta_sync()
        tmem_pool.dealloc()
    # fmt: on

    return kernel
