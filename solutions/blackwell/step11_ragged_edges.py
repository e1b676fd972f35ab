"""Step 11 (Blackwell): ragged edges.

Step 10 takes only M a multiple of its 512-row cluster tile, N of 256 and K of 64: 1000 tokens, 77
rows or N = 4100 are refused. Here any M, and N and K multiples of 8 (a TMA descriptor's rows must be a
multiple of 16 bytes), by three changes and no new barrier: tile and K-tile counts round up (ceiling
division); the TMA loads of a tile that hangs over the matrix's edge are filled with zeros by the
hardware (a zero row of A or B adds nothing to a dot product), and still deliver the whole box's
bytes to the mbarrier; the TMA stores of such a tile are clipped to the matrix. The descriptors carry
the matrices' true extents: `dispatch="tma_explicit"` maps each copy to one tensor map of the whole
matrix, at every shape. TIRx's `tma_auto` searches a mapping per shape: with these 64-column boxes it
finds the same tensor maps at most ragged shapes (the same TIR at 1000^3), but refuses a one-row
matrix (M = 1).
"""

import tvm
from tvm.backend.cuda.lang.pipeline import MBarrier, PipelineState, TCGen05Bar, TMABar
from tvm.backend.cuda.lang.tile_scheduler import ClusterPersistentScheduler2D
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.backend.cuda.tile_primitive.tma_utils import mma_shared_layout, SwizzleMode
from tvm.tirx.layout import TileLayout, S, tid_in_wg as axis_tid_in_wg


def hgemm_v11(M, N, K, sm_count):
    """D = A @ B^T for any M >= 1 and N, K multiples of 8 (fp16 in, fp32 in TMEM, fp16 out), with
    sm_count / 2 persistent clusters of 2 CTAs (a TMA thread, two MMA threads and two writeback
    warpgroups each), as step 10.

    Data path: step 10's, over ceil(M / 512) x ceil(N / 256) cluster tiles and ceil(K / 64) K tiles.
    In cluster tile (m_idx, n_idx), consumer j (0 or 1) of CTA cbx owns A and D rows
    a_st(j) = (4 m_idx + 2 j + cbx) * 128, and CTA cbx loads B rows b_st = (2 n_idx + cbx) * 128.
        TMA producer (each CTA): TMA (cta_group::2) A[a_st(j) : +128, 64k : +64] --> Asmem[s, j] for
            j = 0, 1 and B[b_st : +128, 64k : +64] --> Bsmem[s], all three on CTA 0's tma2mma[s]. Rows
            past M or N and columns past K arrive as zeros; a box wholly past the edge arrives as zeros
            too (at M = 1 three of the four A boxes of the cluster tile, at N = 8 CTA 1's B box).
            CTA 0 arms tma2mma[s] with the whole 98304 bytes: the hardware counts a box's full bytes,
            zeros included, so an expect_tx of only the bytes inside the matrix never completes the phase.
        MMA issuers (CTA 0): step 10's tcgen05.mma.cta_group::2 loop; the zero rows and columns give
            zero products in TMEM.
        Writeback j (each CTA): step 10's TMEM --> registers --> Dsmem[j] --> TMA store of
            D[a_st(j) : +128, 256 n_idx + 64c : +64] for each 64-column chunk c (already one 128-byte
            swizzle row, the widest box an explicit tensor map takes); rows and columns past the matrix
            are not written.

    Barrier protocol: step 10's, unchanged (initialised by thread 0 of each CTA, then a cluster-wide
    sync). Every CTA of the cluster walks the same tiles and K tiles, and a CTA whose rows lie wholly
    outside the matrix still loads (zeros) onto CTA 0's tma2mma, waits for its accumulators and hands
    them back on CTA 0's ld2mma, and stores (nothing): skipping its work would leave a barrier of
    CTA 0 short of bytes or arrivals, a hang.
        | barrier     | count | who arrives                          | who waits            | starting phase |
        |-------------|-------|--------------------------------------|----------------------|----------------|
        | tma2mma[s]  | 1     | CTA 0's TMA thread: arrive.expect_tx | both MMA threads of  | 0 (consumer)   |
        | (CTA 0's)   | + tx  | (98304, zeros included); the six TMA | CTA 0                |                |
        |             |       | loads of both CTAs complete_tx on it |                      |                |
        | mma2tma[s]  | 2     | each of CTA 0's two MMA threads:     | each CTA's TMA       | 1 (producer)   |
        | (each CTA)  |       | tcgen05.commit cta_group::2, mask 3  | thread, its own copy |                |
        | mma2ld[j]   | 1     | CTA 0's MMA thread j: tcgen05.commit | writeback warpgroup  | 0 (consumer)   |
        | (each CTA)  |       | cta_group::2, multicast mask 0b11    | j of each CTA (128)  |                |
        | ld2mma[j]   | 256   | the 128 threads of writeback         | CTA 0's MMA thread j | 1 (producer)   |
        | (CTA 0's)   |       | warpgroup j of EACH CTA, remote      |                      |                |
        | named bar   | 128   | writeback warpgroup j, before /      | the same             | -              |
        | 1 + j       |       | after writing Dsmem[j]               |                      |                |
        | cluster barrier | 384 threads x 2 CTAs | everyone, after barrier init and at the end      |

    Speed at tile multiples: the same kernel as step 10. At 4096^3 the sm_100a SASS of the two steps is
    the same instruction for instruction, and the three tensor maps are encoded with the same extents,
    box and swizzle (built, not run: no Blackwell GPU has run this course's kernels). Where the tile grid
    leaves clusters idle (256 tokens: 16 cluster tiles, half of each below M, for 74 clusters) it is as
    slow as step 10.

    Hopper twin: solutions/hopper/step11 makes the same three changes to its step 10 (its stores are
    split into 64-column boxes; Blackwell's 64-column chunks already are). The boxes that hang over the
    edge, the zero fill under cta_group::2 loads and the clipped stores are checked here only by the
    build (sm_100a and sm_103a), by reading the generated code and by the protocol checker's simulation.
    """
    a_type = tvm.DataType("float16")
    d_type = tvm.DataType("float16")
    acc_type = tvm.DataType("float32")
    BLK_M, BLK_N, BLK_K = 128, 128, 64  # per CTA
    # >>> TODO 11.1: K tiles for any K
    K_TILES = -(-K // BLK_K)  # ceiling division: the last K tile may hang over K (its columns load as zeros)
    # <<< TODO 11.1
    EPI_N = 64  # writeback chunk: 64 fp32 registers per thread, one 128B-swizzled Dsmem row
    WG_NUMBER = 3
    WB_THREADS = 128  # the writeback warpgroup
    WB_BARRIER = 1  # named barrier 1 + j for writeback warpgroup j (0 is the CTA barrier)
    CTA_GROUP = 2  # CTAs per cluster, and the tcgen05 cta_group
    MMA_M, MMA_N = BLK_M * CTA_GROUP, BLK_N * CTA_GROUP  # one MMA for the pair: 256 x 256
    NUM_CONSUMER = 2  # MMA threads, accumulators and writeback warpgroups
    TILE_BYTES_ALL = (NUM_CONSUMER * BLK_M * BLK_K + BLK_N * BLK_K) * 2  # one CTA's loads per K tile
    SMEM_PER_CTA = 227 * 1024  # the most shared memory one CTA may use (sm_90 and sm_100)
    EPILOGUE_SMEM = NUM_CONSUMER * BLK_M * EPI_N * 2 + 1024  # two Dsmem tiles, and the barriers
    PIPE_DEPTH = (SMEM_PER_CTA - EPILOGUE_SMEM) // TILE_BYTES_ALL  # the most whole stages that fit

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
        mma2ld = TCGen05Bar(pool, NUM_CONSUMER)
        ld2mma = MBarrier(pool, NUM_CONSUMER)
        pool.move_base_to(1024)  # 128B-swizzled tiles must start on a 1024-byte boundary
        Asmem = pool.alloc((PIPE_DEPTH, NUM_CONSUMER, BLK_M, BLK_K), a_type, layout=A_layout)
        Bsmem = pool.alloc((PIPE_DEPTH, BLK_N, BLK_K), a_type, layout=B_layout)
        Dsmem = pool.alloc((NUM_CONSUMER, BLK_M, EPI_N), d_type, layout=D_layout)
        pool.commit()

        # ---- TMEM: warp 0 of each CTA allocates all 512 columns; consumer j's accumulator is [256 j, 256 j + 256) ----
        tmem_pool.commit()
        tmem = tmem_pool.alloc((128, 512), "float32")

        # ---- barrier init (thread 0 of each CTA, outside any role branch) ----
        tma2mma.init(1)
        mma2tma.init(NUM_CONSUMER)
        mma2ld.init(1)
        ld2mma.init(WB_THREADS * CTA_GROUP)
        T.ptx.fence.mbarrier_init.release.cluster()
        T.ptx.fence.proxy.async_.shared__cta()
        T.ptx.tcgen05.fence__before_thread_sync()
        T.cuda.cluster_sync()
        T.ptx.tcgen05.fence__after_thread_sync()
        # TMEMPool addresses columns from 0: a 512-column allocation always starts there.
        T.cuda.trap_when_assert_failed(tmem_pool.addr == T.uint32(0))

        # >>> TODO 11.2: cluster tiles for any M and N
        tile_scheduler = ClusterPersistentScheduler2D(
            "ts", num_m_tiles=-(-M // (MMA_M * NUM_CONSUMER)), num_n_tiles=-(-N // MMA_N),  # tiles hang over the edges
            l2_group_size=8, num_clusters=sm_count // CTA_GROUP)
        # <<< TODO 11.2
        tile_scheduler.init(bx // CTA_GROUP)
        m_st = T.meta_var((tile_scheduler.m_idx * NUM_CONSUMER * CTA_GROUP + cbx) * BLK_M)  # + j * 256
        n_st = T.meta_var((tile_scheduler.n_idx * CTA_GROUP + cbx) * BLK_N)
        d_n_st = T.meta_var(tile_scheduler.n_idx * MMA_N)

        # ---- TMA producer: warpgroup 2, warp 3, one thread, in each CTA ----
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
                            # >>> TODO 11.3: loads that may hang over the matrix
                            for j in T.unroll(NUM_CONSUMER):
                                a_st = T.meta_var(m_st + j * CTA_GROUP * BLK_M)
                                Tx.copy_async(Asmem[s, j, :, :], A[a_st:a_st + BLK_M, k * BLK_K:(k + 1) * BLK_K],
                                              dispatch="tma_explicit", mbar=bar_cta0, cta_group=CTA_GROUP)
                            Tx.copy_async(Bsmem[s, :, :], B[n_st:n_st + BLK_N, k * BLK_K:(k + 1) * BLK_K],
                                          dispatch="tma_explicit", mbar=bar_cta0, cta_group=CTA_GROUP)
                            # <<< TODO 11.3
                            tma_state.advance()
                        tile_scheduler.next_tile()

        # ---- MMA issuers: warpgroup 2, warps j = 0 and 1, one thread each, in CTA 0 only ----
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

        # ---- writeback j: warpgroup j = 0, 1, 128 threads, thread t owns row t ----
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
                            # >>> TODO 11.4: stores clipped at the matrix's edge
                            Tx.copy_async(D[d_m_st:d_m_st + BLK_M, d_n_st + c * EPI_N:d_n_st + (c + 1) * EPI_N],
                                          Dsmem[wg_id, :, :], dispatch="tma_explicit")
                            # <<< TODO 11.4
                            T.ptx.cp.async_.bulk.commit_group()
                tile_scheduler.next_tile()
            # the last TMA store has finished before the CTA frees TMEM and exits
            if warp_id == 0:
                T.ptx.cp.async_.bulk.wait_group(0)

        # ---- teardown: both CTAs are done; warp 0 of each CTA frees the pair's TMEM ----
        T.cuda.cluster_sync()
        tmem_pool.dealloc()
    # fmt: on

    return kernel
