"""Step 9 (Blackwell): a 2-CTA cluster with cta_group=2.

Two CTAs on neighbouring SMs form a cluster and compute one 256x256 output tile together. Each
CTA loads its own 128 rows of A and its own 128 rows of B; one thread of CTA 0 issues a single
tcgen05.mma with cta_group=2 (M = 256, N = 256) that reads A and B from both CTAs' shared memory
and accumulates into both CTAs' TMEM (rows 0-127 in CTA 0, 128-255 in CTA 1). Each CTA fetches
half of the B tile it multiplies, so the pair moves half as many B bytes per FLOP as two
independent CTAs, and every MMA instruction does twice the work.
"""

import tvm
from tvm.backend.cuda.lang.pipeline import MBarrier, PipelineState, TCGen05Bar, TMABar
from tvm.backend.cuda.lang.tile_scheduler import ClusterPersistentScheduler2D
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.backend.cuda.tile_primitive.tma_utils import mma_shared_layout, SwizzleMode
from tvm.tirx.layout import TileLayout, S, tid_in_wg as axis_tid_in_wg


def hgemm_v9(M, N, K, sm_count):
    """D = A @ B^T for M, N multiples of 256, K a multiple of 64 (fp16 in, fp32 in TMEM, fp16 out).

    Grid: sm_count CTAs of 256 threads, in clusters of 2 (cbx = rank in the cluster, 0 or 1).
    Cluster c = bx // 2 walks the 256x256 cluster tiles c, c + sm_count / 2, ... in
    ClusterPersistentScheduler2D's L2-grouped order; both CTAs and all roles walk the same tiles.
    In cluster tile (m_idx, n_idx) CTA cbx loads A rows a_st = (2 m_idx + cbx) * 128 and B rows
    b_st = (2 n_idx + cbx) * 128, and writes D[a_st : +128, n_idx * 256 : +256].
    Roles and data path, per cluster tile (stage s and phases from PipelineStates as in step 8,
    PIPE_DEPTH = 6, the most that fit as in step 8):
        TMA producer (each CTA: warpgroup 1, warp 3, one thread): for each K tile: wait its own
            mma2tma[s] --> CTA 0 only: mbarrier.arrive.expect_tx(tma2mma[s], 65536 = the bytes of
            BOTH CTAs' loads) --> TMA (cta_group::2) of its A and B tiles --> its Asmem[s],
            Bsmem[s]; the loads signal CTA 0's tma2mma[s] (address mapped into CTA 0 with mapa).
        MMA issuer (CTA 0 only: warpgroup 1, warp 0, one thread): wait ld2mma (both CTAs'
            writebacks have read the previous tile) --> for each K tile: wait tma2mma[s] -->
            tcgen05.mma.cta_group::2, M = 256, N = 256 (accumulate = k != 0), A and B read from
            both CTAs --> TMEM columns [0, 256) of both CTAs --> tcgen05.commit.cta_group::2
            multicast (mask 0b11) onto mma2tma[s] of both CTAs; after the last K tile: the same
            multicast commit onto mma2ld of both CTAs.
        Writeback (each CTA: warpgroup 0, thread t owns row t of the CTA's 128 rows): wait its
            own mma2ld --> 4 chunks of EPI_N = 64 columns: TMEM --tcgen05.ld--> registers; after
            the last chunk's load arrive on CTA 0's ld2mma (remote arrive, mapa) --> fp16 -->
            Dsmem --fence.proxy.async + named barrier 1--> TMA store by one thread --> D.

    Barrier protocol (initialised by thread 0 of each CTA; then a CLUSTER-wide sync, because CTA 1
    arrives on CTA 0's barriers and CTA 0 commits onto CTA 1's, before any role starts):
        | barrier     | count | who arrives                          | who waits            | starting phase |
        |-------------|-------|--------------------------------------|----------------------|----------------|
        | tma2mma[s]  | 1     | CTA 0's TMA thread: arrive.expect_tx | CTA 0's MMA thread   | 0 (consumer)   |
        | (CTA 0's)   | + tx  | (65536); the four TMA loads of BOTH  |                      |                |
        |             |       | CTAs complete_tx on CTA 0's barrier  |                      |                |
        |             |       | (CTA 1's copy is initialised, unused)|                      |                |
        | mma2tma[s]  | 1     | CTA 0's MMA thread: tcgen05.commit   | each CTA's TMA       | 1 (producer)   |
        | (each CTA)  |       | cta_group::2, multicast mask 0b11    | thread, its own copy |                |
        | mma2ld      | 1     | CTA 0's MMA thread: tcgen05.commit   | each CTA's 128       | 0 (consumer)   |
        | (each CTA)  |       | cta_group::2, multicast mask 0b11    | writeback threads    |                |
        | ld2mma      | 256   | all 128 writeback threads of EACH    | CTA 0's MMA thread   | 1 (producer)   |
        | (CTA 0's)   |       | CTA (128 x 2): mbarrier.arrive.      |                      |                |
        |             |       | shared::cluster to CTA 0             |                      |                |
        The arrival count of ld2mma is 128 per CTA x 2 CTAs: with 128 the MMA would overwrite the
        accumulator while one CTA is still reading it; the bytes armed on tma2mma are those of
        both CTAs, or the phase completes before CTA 1's tiles have landed.
        No waiter can be lapped (a parity wait cannot tell phase n from phase n + 2): tma2mma[s]'s next phase needs CTA 0's MMA thread to
        commit mma2tma[s]; each CTA's mma2tma[s] next phase needs a tma2mma[s] phase that needs
        bytes from both CTAs' TMA threads, each loading only after its own mma2tma[s] wait;
        mma2ld's next phase needs ld2mma, which needs all 256 writeback threads.
        Stage, phase and accumulator rules as in step 8; the tcgen05 fences as in step 7.
        Teardown: each writeback warp 0 waits for its last store; then a cluster-wide sync (no CTA
        may exit or free TMEM while its peer can still arrive on its barriers or the MMA can
        still write its TMEM); warp 0 of each CTA frees TMEM (tcgen05.dealloc.cta_group::2).

    Hopper twin: solutions/hopper/step09 runs a 2-CTA cluster on an H100 with the cluster launch,
    cta_id_in_cluster, the cluster-wide sync after barrier init and before exit, and remote
    mbarrier arrives onto the peer CTA (mapa + mbarrier.arrive.shared::cluster); its pair shares
    B by TMA multicast instead. The cta_group::2 MMA, its multicast tcgen05.commit, cta_group::2
    TMA loads completing on the peer's barrier, and TMEM allocated per pair are checked here
    only by the build (sm_100a and sm_103a) and by reading the generated code.
    """
    a_type = tvm.DataType("float16")
    d_type = tvm.DataType("float16")
    acc_type = tvm.DataType("float32")
    BLK_M, BLK_N, BLK_K = 128, 128, 64  # per CTA
    K_TILES = K // BLK_K
    TILE_BYTES = (BLK_M * BLK_K + BLK_N * BLK_K) * 2  # what the two TMA loads deliver per K tile
    EPI_N = 64  # writeback chunk: 64 fp32 registers per thread, one 128B-swizzled Dsmem row
    WG_NUMBER = 2
    WB_THREADS = 128  # the writeback warpgroup
    WB_BARRIER = 1  # named barrier id of the writeback warpgroup (0 is the CTA barrier)
    SMEM_PER_CTA = 227 * 1024  # the most shared memory one CTA may use (sm_90 and sm_100)
    EPILOGUE_SMEM = BLK_M * EPI_N * 2 + 1024  # Dsmem, and the 1 KiB the barriers take below the tiles
    PIPE_DEPTH = (SMEM_PER_CTA - EPILOGUE_SMEM) // TILE_BYTES  # the most whole stages that fit
    # >>> TODO 9.1: the pair's MMA shape
    CTA_GROUP = 2  # CTAs per cluster, and the tcgen05 cta_group
    MMA_M, MMA_N = BLK_M * CTA_GROUP, BLK_N * CTA_GROUP  # one MMA for the pair: 256 x 256
    # <<< TODO 9.1

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
        # >>> TODO 9.2: the cluster
        cbx, cby = T.cta_id_in_cluster([CTA_GROUP, 1])
        # <<< TODO 9.2
        wg_id = T.warpgroup_id([WG_NUMBER])
        warp_id = T.warp_id_in_wg([4])
        lane_id = T.lane_id([32])

        # ---- shared memory: TMEM address slot + barriers, then the tiles at 1 KiB ----
        pool = T.SMEMPool()
        # >>> TODO 9.3: TMEM allocated for the pair
        tmem_pool = T.TMEMPool(pool, total_cols=512, cta_group=CTA_GROUP)  # takes the address slot
        # <<< TODO 9.3
        tma2mma = TMABar(pool, PIPE_DEPTH)
        mma2tma = TCGen05Bar(pool, PIPE_DEPTH)
        mma2ld = TCGen05Bar(pool, 1)
        ld2mma = MBarrier(pool, 1)
        pool.move_base_to(1024)  # 128B-swizzled tiles must start on a 1024-byte boundary
        Asmem = pool.alloc((PIPE_DEPTH, BLK_M, BLK_K), a_type, layout=A_layout)
        Bsmem = pool.alloc((PIPE_DEPTH, BLK_N, BLK_K), a_type, layout=B_layout)
        Dsmem = pool.alloc((BLK_M, EPI_N), d_type, layout=D_layout)
        pool.commit()

        # ---- TMEM: warp 0 of each CTA allocates all 512 columns; the accumulator is [0, 256) ----
        tmem_pool.commit()
        tmem = tmem_pool.alloc((128, 512), "float32")

        # ---- barrier init (thread 0 of each CTA, outside any role branch) ----
        # >>> TODO 9.4: arrival counts for the pair, and the init made visible
        tma2mma.init(1)
        mma2tma.init(1)
        mma2ld.init(1)
        ld2mma.init(WB_THREADS * CTA_GROUP)
        T.ptx.fence.mbarrier_init.release.cluster()
        T.ptx.fence.proxy.async_.shared__cta()
        T.ptx.tcgen05.fence__before_thread_sync()
        T.cuda.cluster_sync()
        T.ptx.tcgen05.fence__after_thread_sync()
        # <<< TODO 9.4
        # TMEMPool addresses columns from 0: a 512-column allocation always starts there.
        T.cuda.trap_when_assert_failed(tmem_pool.addr == T.uint32(0))

        # >>> TODO 9.5: the scheduler walks cluster tiles; this CTA's rows of A, B and D
        tile_scheduler = ClusterPersistentScheduler2D(
            "ts", num_m_tiles=M // MMA_M, num_n_tiles=N // MMA_N,
            l2_group_size=8, num_clusters=sm_count // CTA_GROUP)
        tile_scheduler.init(bx // CTA_GROUP)
        m_st = T.meta_var((tile_scheduler.m_idx * CTA_GROUP + cbx) * BLK_M)
        n_st = T.meta_var((tile_scheduler.n_idx * CTA_GROUP + cbx) * BLK_N)
        d_n_st = T.meta_var(tile_scheduler.n_idx * MMA_N)
        # <<< TODO 9.5

        # ---- TMA producer: warpgroup 1, warp 3, one thread, in each CTA ----
        if wg_id == 1:
            if warp_id == 3:
                tma_state = PipelineState(PIPE_DEPTH, 1)  # producer: stages start free
                # >>> TODO 9.6: the barrier the pair's loads complete on
                tma2mma_cta0 = tma2mma.remote_view(0)
                # <<< TODO 9.6
                if T.cuda.elect_sync():
                    while tile_scheduler.valid():
                        for k in T.serial(K_TILES):
                            s = T.meta_var(tma_state.stage)
                            mma2tma.wait(s, tma_state.phase)
                            # >>> TODO 9.7: arm the pair's barrier; the pair's loads
                            if cbx == 0:
                                tma2mma.arrive(s, TILE_BYTES * CTA_GROUP)
                            bar_cta0 = T.meta_var(tma2mma_cta0.ptr_to([s]))
                            Tx.copy_async(Asmem[s, :, :], A[m_st:m_st + BLK_M, k * BLK_K:(k + 1) * BLK_K],
                                          dispatch="tma_auto", mbar=bar_cta0, cta_group=CTA_GROUP)
                            Tx.copy_async(Bsmem[s, :, :], B[n_st:n_st + BLK_N, k * BLK_K:(k + 1) * BLK_K],
                                          dispatch="tma_auto", mbar=bar_cta0, cta_group=CTA_GROUP)
                            # <<< TODO 9.7
                            tma_state.advance()
                        tile_scheduler.next_tile()

        # ---- MMA issuer: warpgroup 1, warp 0, one thread, in CTA 0 only ----
        if wg_id == 1:
            if warp_id == 0:
                mma_state = PipelineState(PIPE_DEPTH, 0)  # consumer of tma2mma
                acc_state = PipelineState(1, 1)  # producer of the accumulator: TMEM starts free
                # >>> TODO 9.8: the pair's MMA loop
                if cbx == 0:
                    if T.cuda.elect_sync():
                        while tile_scheduler.valid():
                            ld2mma.wait(0, acc_state.phase)
                            acc_state.advance()
                            T.ptx.tcgen05.fence__after_thread_sync()
                            for k in T.serial(K_TILES):
                                s = T.meta_var(mma_state.stage)
                                tma2mma.wait(s, mma_state.phase)
                                T.ptx.tcgen05.fence__after_thread_sync()
                                Tx.gemm_async(tmem[:, 0:MMA_N], Asmem[s, :, :], Bsmem[s, :, :],
                                              accum=(k != 0), dispatch="tcgen05", cta_group=CTA_GROUP)
                                mma2tma.arrive(s, cta_group=CTA_GROUP, cta_mask=3)  # both CTAs' stage s
                                mma_state.advance()
                            mma2ld.arrive(0, cta_group=CTA_GROUP, cta_mask=3)  # both CTAs' accumulators
                            tile_scheduler.next_tile()
                # <<< TODO 9.8

        # ---- writeback: warpgroup 0, 128 threads, thread t owns row t of this CTA ----
        if wg_id == 0:
            wb_state = PipelineState(1, 0)  # consumer of mma2ld
            Dreg = T.alloc_local((EPI_N,), acc_type)
            Dreg_f16 = T.alloc_local((EPI_N,), d_type)
            Dreg_wg = Dreg.view(128, EPI_N, layout=TileLayout(S[(128, EPI_N) : (1@axis_tid_in_wg, 1)]))
            while tile_scheduler.valid():
                mma2ld.wait(0, wb_state.phase)
                wb_state.advance()
                T.ptx.tcgen05.fence__after_thread_sync()
                for c in T.unroll(MMA_N // EPI_N):
                    Tx.wg.copy_async(Dreg_wg[:, :], tmem[:, c * EPI_N:(c + 1) * EPI_N])
                    T.ptx.tcgen05.wait__ld.sync.aligned()
                    # >>> TODO 9.9: release the accumulator to the MMA issuer
                    if c == MMA_N // EPI_N - 1:
                        # all TMEM reads of this tile are done: CTA 0's MMA may overwrite it
                        T.ptx.tcgen05.fence__before_thread_sync()
                        ld2mma.arrive(0, remote=0)
                    # <<< TODO 9.9
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
                            Tx.copy_async(D[m_st:m_st + BLK_M, d_n_st + c * EPI_N:d_n_st + (c + 1) * EPI_N],
                                          Dsmem[:, :], dispatch="tma_auto")
                            T.ptx.cp.async_.bulk.commit_group()
                tile_scheduler.next_tile()
            # the last TMA store has finished before the CTA frees TMEM and exits
            if warp_id == 0:
                T.ptx.cp.async_.bulk.wait_group(0)

        # ---- teardown: both CTAs are done; warp 0 of each CTA frees the pair's TMEM ----
        # >>> TODO 9.10: the pair is done before TMEM is freed
        T.cuda.cluster_sync()
        # <<< TODO 9.10
        tmem_pool.dealloc()
    # fmt: on

    return kernel
