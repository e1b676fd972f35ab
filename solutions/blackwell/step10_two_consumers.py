"""Step 10 (Blackwell): two MMA consumers.

Step 9's CTA pair, now computing two 256x256 accumulators at once: a third warpgroup holds the TMA
thread and two MMA threads, each MMA thread accumulating its own 256 rows of a 512x256 cluster
tile into its own half of TMEM (columns 0-255 and 256-511), and two writeback warpgroups each
drain one of them. Each B tile loaded is used by two MMAs, and while one accumulator is being
written back the tensor core keeps working on the other.
"""

import tvm
from tvm.backend.cuda.lang.pipeline import MBarrier, PipelineState, TCGen05Bar, TMABar
from tvm.backend.cuda.lang.tile_scheduler import ClusterPersistentScheduler2D
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.backend.cuda.tile_primitive.tma_utils import mma_shared_layout, SwizzleMode
from tvm.tirx.layout import TileLayout, S, tid_in_wg as axis_tid_in_wg


def hgemm_v10(M, N, K, sm_count):
    """D = A @ B^T for M a multiple of 512, N of 256, K of 64 (fp16 in, fp32 in TMEM, fp16 out).

    Grid: sm_count CTAs of 384 threads (three warpgroups), in clusters of 2 (cbx = rank, 0 or 1).
    Cluster c = bx // 2 walks the 512x256 cluster tiles c, c + sm_count / 2, ... in
    ClusterPersistentScheduler2D's L2-grouped order; both CTAs and all roles walk the same tiles.
    In cluster tile (m_idx, n_idx), consumer j (0 or 1) of CTA cbx owns A and D rows
    a_st(j) = (4 m_idx + 2 j + cbx) * 128, and CTA cbx loads B rows b_st = (2 n_idx + cbx) * 128;
    consumer j's MMA covers rows (4 m_idx + 2 j) * 128 : +256 of the pair, columns n_idx * 256 : +256.
    Roles and data path, per cluster tile (stage s and phases from PipelineStates, PIPE_DEPTH = 4):
        TMA producer (each CTA: warpgroup 2, warp 3, one thread): for each K tile: wait its own
            mma2tma[s] --> CTA 0 only: arrive.expect_tx(tma2mma[s], 98304 = 2 CTAs x (two A tiles
            + one B tile)) --> TMA (cta_group::2) of A rows a_st(0), a_st(1) into Asmem[s, 0],
            Asmem[s, 1] and of B rows b_st into Bsmem[s]; all signal CTA 0's tma2mma[s].
        MMA issuers (CTA 0 only: warpgroup 2, warps j = 0 and 1, one thread each): wait ld2mma[j]
            --> for each K tile: wait tma2mma[s] --> tcgen05.mma.cta_group::2 M = 256, N = 256 on
            Asmem[s, j] and Bsmem[s] of both CTAs --> TMEM columns [256 j, 256 j + 256) of both
            CTAs --> tcgen05.commit multicast (mask 0b11) onto mma2tma[s] of both CTAs; after the
            last K tile: the same multicast commit onto mma2ld[j].
        Writeback j (each CTA: warpgroup j = 0, 1, thread t owns row t): wait its own mma2ld[j]
            --> 4 chunks of EPI_N = 64 columns of TMEM [256 j, 256 j + 256): tcgen05.ld -->
            registers; after the last load arrive on CTA 0's ld2mma[j] (remote) --> fp16 -->
            Dsmem[j] (its own staging buffer) --fence.proxy.async + named barrier 1 + j--> TMA
            store by one thread of the warpgroup --> D.

    Barrier protocol (initialised by thread 0 of each CTA, then a cluster-wide sync):
        | barrier     | count | who arrives                          | who waits            | starting phase |
        |-------------|-------|--------------------------------------|----------------------|----------------|
        | tma2mma[s]  | 1     | CTA 0's TMA thread: arrive.expect_tx | both MMA threads of  | 0 (consumer)   |
        | (CTA 0's)   | + tx  | (98304); the six TMA loads of both   | CTA 0                |                |
        |             |       | CTAs complete_tx on CTA 0's barrier  |                      |                |
        | mma2tma[s]  | 2     | each of CTA 0's two MMA threads:     | each CTA's TMA       | 1 (producer)   |
        | (each CTA)  |       | tcgen05.commit cta_group::2, mask 3  | thread, its own copy |                |
        | mma2ld[j]   | 1     | CTA 0's MMA thread j: tcgen05.commit | writeback warpgroup  | 0 (consumer)   |
        | j = 0, 1    |       | cta_group::2, multicast mask 0b11    | j of each CTA (128)  |                |
        | (each CTA)  |       |                                      |                      |                |
        | ld2mma[j]   | 256   | the 128 threads of writeback         | CTA 0's MMA thread j | 1 (producer)   |
        | j = 0, 1    |       | warpgroup j of EACH CTA, remote      |                      |                |
        | (CTA 0's)   |       | arrive to CTA 0                      |                      |                |
        mma2tma[s] counts 2: stage s is free only when BOTH MMAs that read it have finished; with
        a count of 1 the first commit would free it under the other MMA.
        Named barriers: writeback warpgroup j syncs its 128 threads on barrier 1 + j. Two warpgroups
        on one id would make a 256-thread rendezvous of a barrier declared for 128 and hang or mix
        their Dsmem hand-offs.
        No waiter can be lapped (a parity wait cannot tell phase n from phase n + 2): tma2mma[s]'s next phase needs mma2tma[s], which needs
        the commits of both MMA threads (its two waiters); mma2tma[s] and mma2ld[j] / ld2mma[j]
        as in step 9, per consumer.
        Stage, phase and accumulator rules as in step 8; the tcgen05 fences as in step 7;
        teardown as in step 9 (cluster-wide sync, then warp 0 of each CTA frees TMEM).
        Shared memory: 4 stages x (2 x 16 + 16) KiB + 2 x 16 KiB of Dsmem + 1 KiB of barriers =
        230400 B of the 232448 B a CTA may use.

    Hopper twin: solutions/hopper/step10 runs two consumer warpgroups on an H100, each with its own
    accumulator, its own Dsmem staging buffer and its own named-barrier id, fed by one producer
    over a full/empty ring whose empty barrier counts both consumers; plus step 9's cluster. The
    two tcgen05 MMA issuers, their accumulators in two halves of TMEM, the multicast commits and
    the cta_group::2 parts are checked here only by the build (sm_100a and sm_103a) and by
    reading the generated code.
    """
    a_type = tvm.DataType("float16")
    d_type = tvm.DataType("float16")
    acc_type = tvm.DataType("float32")
    BLK_M, BLK_N, BLK_K = 128, 128, 64  # per CTA
    K_TILES = K // BLK_K
    EPI_N = 64  # writeback chunk: 64 fp32 registers per thread, one 128B-swizzled Dsmem row
    WG_NUMBER = 3
    WB_THREADS = 128  # the writeback warpgroup
    WB_BARRIER = 1  # named barrier 1 + j for writeback warpgroup j (0 is the CTA barrier)
    CTA_GROUP = 2  # CTAs per cluster, and the tcgen05 cta_group
    MMA_M, MMA_N = BLK_M * CTA_GROUP, BLK_N * CTA_GROUP  # one MMA for the pair: 256 x 256
    # >>> TODO 10.1: two consumers: what each K tile and the epilogue take, and the stages left
    NUM_CONSUMER = 2  # MMA threads, accumulators and writeback warpgroups
    TILE_BYTES_ALL = (NUM_CONSUMER * BLK_M * BLK_K + BLK_N * BLK_K) * 2  # one CTA's loads per K tile
    SMEM_PER_CTA = 227 * 1024  # the most shared memory one CTA may use (sm_90 and sm_100)
    EPILOGUE_SMEM = NUM_CONSUMER * BLK_M * EPI_N * 2 + 1024  # two Dsmem tiles, and the barriers
    PIPE_DEPTH = (SMEM_PER_CTA - EPILOGUE_SMEM) // TILE_BYTES_ALL  # the most whole stages that fit
    # <<< TODO 10.1

    A_layout = mma_shared_layout(a_type, SwizzleMode.SWIZZLE_128B_ATOM, (PIPE_DEPTH, NUM_CONSUMER, BLK_M, BLK_K))
    B_layout = mma_shared_layout(a_type, SwizzleMode.SWIZZLE_128B_ATOM, (PIPE_DEPTH, BLK_N, BLK_K))
    D_layout = mma_shared_layout(d_type, SwizzleMode.SWIZZLE_128B_ATOM, (NUM_CONSUMER, BLK_M, EPI_N))

    # fmt: off
    @T.prim_func
    def kernel(
        A: T.Buffer((M, K), "float16"),
        B: T.Buffer((N, K), "float16"),
        D: T.Buffer((M, N), "float16"),
    ):
        T.device_entry()
        bx = T.cta_id([sm_count])
        cbx, cby = T.cta_id_in_cluster([CTA_GROUP, 1])
        wg_id = T.warpgroup_id([WG_NUMBER])
        warp_id = T.warp_id_in_wg([4])
        lane_id = T.lane_id([32])

        # ---- shared memory: TMEM address slot + barriers, then the tiles at 1 KiB ----
        pool = T.SMEMPool()
        tmem_pool = T.TMEMPool(pool, total_cols=512, cta_group=CTA_GROUP)  # takes the address slot
        tma2mma = TMABar(pool, PIPE_DEPTH)
        mma2tma = TCGen05Bar(pool, PIPE_DEPTH)
        # >>> TODO 10.2: one accumulator hand-over pair per consumer
        mma2ld = TCGen05Bar(pool, NUM_CONSUMER)
        ld2mma = MBarrier(pool, NUM_CONSUMER)
        # <<< TODO 10.2
        pool.move_base_to(1024)  # 128B-swizzled tiles must start on a 1024-byte boundary
        # >>> TODO 10.3: the tiles in shared memory: one A tile and one Dsmem tile per consumer
        Asmem = pool.alloc((PIPE_DEPTH, NUM_CONSUMER, BLK_M, BLK_K), a_type, layout=A_layout)
        Bsmem = pool.alloc((PIPE_DEPTH, BLK_N, BLK_K), a_type, layout=B_layout)
        Dsmem = pool.alloc((NUM_CONSUMER, BLK_M, EPI_N), d_type, layout=D_layout)
        # <<< TODO 10.3
        pool.commit()

        # ---- TMEM: warp 0 of each CTA allocates all 512 columns; consumer j's accumulator is [256 j, 256 j + 256) ----
        tmem_pool.commit()
        tmem = tmem_pool.alloc((128, 512), "float32")

        # ---- barrier init (thread 0 of each CTA, outside any role branch) ----
        tma2mma.init(1)
        # >>> TODO 10.4: when stage s is free
        mma2tma.init(NUM_CONSUMER)
        # <<< TODO 10.4
        mma2ld.init(1)
        ld2mma.init(WB_THREADS * CTA_GROUP)
        T.ptx.fence.mbarrier_init.release.cluster()
        T.ptx.fence.proxy.async_.shared__cta()
        T.ptx.tcgen05.fence__before_thread_sync()
        T.cuda.cluster_sync()
        T.ptx.tcgen05.fence__after_thread_sync()
        # TMEMPool addresses columns from 0: a 512-column allocation always starts there.
        T.cuda.trap_when_assert_failed(tmem_pool.addr == T.uint32(0))

        # >>> TODO 10.5: the scheduler walks 512x256 cluster tiles
        tile_scheduler = ClusterPersistentScheduler2D(
            "ts", num_m_tiles=M // (MMA_M * NUM_CONSUMER), num_n_tiles=N // MMA_N,
            l2_group_size=8, num_clusters=sm_count // CTA_GROUP)
        tile_scheduler.init(bx // CTA_GROUP)
        m_st = T.meta_var((tile_scheduler.m_idx * NUM_CONSUMER * CTA_GROUP + cbx) * BLK_M)  # + j * 256
        n_st = T.meta_var((tile_scheduler.n_idx * CTA_GROUP + cbx) * BLK_N)
        d_n_st = T.meta_var(tile_scheduler.n_idx * MMA_N)
        # <<< TODO 10.5

        # ---- TMA producer: warpgroup 2, warp 3, one thread, in each CTA ----
        # >>> TODO 10.6: the producer moves to warpgroup 2 and loads one A tile per consumer
        if wg_id == NUM_CONSUMER:
            if warp_id == 3:
                tma_state = PipelineState(PIPE_DEPTH, 1)  # producer: stages start free
                tma2mma_cta0 = tma2mma.remote_view(0)
                if T.cuda.elect_sync():
                    while tile_scheduler.valid():
                        for k in T.serial(K_TILES):
                            s = T.meta_var(tma_state.stage)
                            mma2tma.wait(s, tma_state.phase)
                            if cbx == 0:
                                tma2mma.arrive(s, TILE_BYTES_ALL * CTA_GROUP)
                            bar_cta0 = T.meta_var(tma2mma_cta0.ptr_to([s]))
                            for j in T.unroll(NUM_CONSUMER):
                                a_st = T.meta_var(m_st + j * CTA_GROUP * BLK_M)
                                Tx.copy_async(Asmem[s, j, :, :], A[a_st:a_st + BLK_M, k * BLK_K:(k + 1) * BLK_K],
                                              dispatch="tma_auto", mbar=bar_cta0, cta_group=CTA_GROUP)
                            Tx.copy_async(Bsmem[s, :, :], B[n_st:n_st + BLK_N, k * BLK_K:(k + 1) * BLK_K],
                                          dispatch="tma_auto", mbar=bar_cta0, cta_group=CTA_GROUP)
                            tma_state.advance()
                        tile_scheduler.next_tile()
        # <<< TODO 10.6

        # ---- MMA issuers: warpgroup 2, warps j = 0 and 1, one thread each, in CTA 0 only ----
        # >>> TODO 10.7: two MMA issuers, one accumulator each
        if wg_id == NUM_CONSUMER:
            if warp_id < NUM_CONSUMER:
                mma_state = PipelineState(PIPE_DEPTH, 0)  # consumer of tma2mma
                acc_state = PipelineState(1, 1)  # producer of the accumulator: TMEM starts free
                if cbx == 0:
                    if T.cuda.elect_sync():
                        while tile_scheduler.valid():
                            ld2mma.wait(warp_id, acc_state.phase)
                            acc_state.advance()
                            T.ptx.tcgen05.fence__after_thread_sync()
                            for k in T.serial(K_TILES):
                                s = T.meta_var(mma_state.stage)
                                tma2mma.wait(s, mma_state.phase)
                                T.ptx.tcgen05.fence__after_thread_sync()
                                Tx.gemm_async(tmem[:, warp_id * MMA_N:(warp_id + 1) * MMA_N], Asmem[s, warp_id, :, :],
                                              Bsmem[s, :, :],
                                              accum=(k != 0), dispatch="tcgen05", cta_group=CTA_GROUP)
                                mma2tma.arrive(s, cta_group=CTA_GROUP, cta_mask=3)  # both CTAs' stage s
                                mma_state.advance()
                            mma2ld.arrive(warp_id, cta_group=CTA_GROUP, cta_mask=3)  # both CTAs' accumulators
                            tile_scheduler.next_tile()
        # <<< TODO 10.7

        # ---- writeback j: warpgroup j = 0, 1, 128 threads, thread t owns row t ----
        # >>> TODO 10.8: two writeback warpgroups, one accumulator each
        if wg_id < NUM_CONSUMER:
            wb_state = PipelineState(1, 0)  # consumer of mma2ld
            Dreg = T.alloc_local((EPI_N,), acc_type)
            Dreg_f16 = T.alloc_local((EPI_N,), d_type)
            Dreg_wg = Dreg.view(128, EPI_N, layout=TileLayout(S[(128, EPI_N) : (1@axis_tid_in_wg, 1)]))
            while tile_scheduler.valid():
                mma2ld.wait(wg_id, wb_state.phase)
                wb_state.advance()
                T.ptx.tcgen05.fence__after_thread_sync()
                for c in T.unroll(MMA_N // EPI_N):
                    col = T.meta_var(wg_id * MMA_N + c * EPI_N)
                    Tx.wg.copy_async(Dreg_wg[:, :], tmem[:, col:col + EPI_N])
                    T.ptx.tcgen05.wait__ld.sync.aligned()
                    if c == MMA_N // EPI_N - 1:
                        # all TMEM reads of this tile are done: CTA 0's MMA may overwrite it
                        T.ptx.tcgen05.fence__before_thread_sync()
                        ld2mma.arrive(wg_id, remote=0)
                    Tx.cast(Dreg_f16[:], Dreg[:])
                    # the previous TMA store must have finished reading Dsmem
                    if warp_id == 0:
                        T.ptx.cp.async_.bulk.wait_group.read(0)
                    T.cuda.warpgroup_sync(WB_BARRIER + wg_id)
                    Tx.copy(Dsmem[wg_id, warp_id * 32 + lane_id, :], Dreg_f16[:])
                    T.ptx.fence.proxy.async_.shared__cta()
                    T.cuda.warpgroup_sync(WB_BARRIER + wg_id)
                    if warp_id == 0:
                        if T.cuda.elect_sync():
                            d_m_st = T.meta_var(m_st + wg_id * CTA_GROUP * BLK_M)
                            Tx.copy_async(D[d_m_st:d_m_st + BLK_M, d_n_st + c * EPI_N:d_n_st + (c + 1) * EPI_N],
                                          Dsmem[wg_id, :, :], dispatch="tma_auto")
                            T.ptx.cp.async_.bulk.commit_group()
                tile_scheduler.next_tile()
            # the last TMA store has finished before the CTA frees TMEM and exits
            if warp_id == 0:
                T.ptx.cp.async_.bulk.wait_group(0)
        # <<< TODO 10.8

        # ---- teardown: both CTAs are done; warp 0 of each CTA frees the pair's TMEM ----
        T.cuda.cluster_sync()
        tmem_pool.dealloc()
    # fmt: on

    return kernel
