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

from kernel_helpers.todo import todo


def hgemm_v9(M, N, K, sm_count):
    """D = A @ B^T for M, N multiples of 256, K a multiple of 64 (fp16 in, fp32 in TMEM, fp16 out).

    Grid: sm_count CTAs of 256 threads, in clusters of 2 (cbx = rank in the cluster, 0 or 1).
    The clusters walk the 256x256 cluster tiles in ClusterPersistentScheduler2D's L2-grouped
    order; both CTAs and all roles walk the same tiles. Of a cluster tile, each CTA loads 128 rows
    of A and 128 rows of B, and writes its 128 rows x 256 columns of D (which rows: TODO 9.5).
    Roles and data path, per cluster tile (stages and phases from PipelineStates, PIPE_DEPTH as
    in step 8):
        TMA producer (each CTA: warpgroup 1, warp 3, one thread): its A and B tiles (global)
            --TMA, cta_group::2--> its own Asmem[s], Bsmem[s].
        MMA issuer (CTA 0: warpgroup 1, warp 0, one thread): Asmem[s], Bsmem[s] of BOTH CTAs
            --tcgen05.mma.cta_group::2, M = 256, N = 256 (accumulate = k != 0)--> TMEM columns
            [0, 256) of both CTAs (rows 0-127 of the pair in CTA 0, 128-255 in CTA 1).
        Writeback (each CTA: warpgroup 0, thread t owns row t of the CTA's 128 rows): TMEM
            --tcgen05.ld, 4 chunks of EPI_N = 64 columns--> registers --fp16--> Dsmem --TMA
            store by one thread--> D.
    Every barrier exists in both CTAs (same shared-memory offset); which copy is armed, arrived
    on and waited on is part of the design.

    Barrier protocol (initialised by thread 0 of each CTA before any role starts). Your first
    task: fill in the ? cells, then write the code to match.
        | barrier                                        | arrival count | who arrives | who waits | starting phase |
        |------------------------------------------------|---------------|-------------|-----------|----------------|
        | tma2mma[s] ("stage s has landed in the pair")  | ?             | ?           | ?         | ?              |
        | mma2tma[s] ("stage s may be refilled")         | ?             | ?           | ?         | ?              |
        | mma2ld ("the pair's accumulator is complete")  | ?             | ?           | ?         | ?              |
        | ld2mma ("TMEM has been read out: free")        | ?             | ?           | ?         | ?              |
        Questions the table and the code must answer: which CTA's copy of each barrier does each
        role arrive on, and which copy does each waiter wait on? How many bytes and arrivals
        complete one phase of each? For every operation that reaches into the other CTA (a load,
        an arrive, a commit), what must already be true of the peer when it starts, and what must
        stay true of this CTA until it is done?
        Stage, phase and accumulator rules as in step 8; the tcgen05 fences as in step 7.

    Hopper twin: solutions/hopper/step09 runs a 2-CTA cluster on an H100; its pair shares B by TMA
    multicast instead of one MMA. What only Blackwell has here (the pair's MMA, its loads, TMEM per
    pair) is checked only by the build (sm_100a and sm_103a) and by reading the generated code.
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
    # TODO 9.1: the pair's MMA shape
    #   CTA_GROUP: the CTAs of a cluster, which is also the tcgen05 cta_group of the pair's MMA; MMA_M, MMA_N: the
    #   shape of that one MMA (the data path above), from the per-CTA tile sizes.
    todo("9.1 the pair's MMA shape")

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
        # TODO 9.2: the cluster
        #   cbx: this CTA's rank in its cluster (0 or 1). The launch takes the cluster shape from this declaration.
        #   API: T.cta_id_in_cluster (one extent per grid dimension; it returns one id per dimension).
        todo("9.2 the cluster")
        wg_id = T.warpgroup_id([WG_NUMBER])
        warp_id = T.warp_id_in_wg([4])
        lane_id = T.lane_id([32])

        # ---- shared memory: TMEM address slot + barriers, then the tiles at 1 KiB ----
        pool = T.SMEMPool()
        # TODO 9.3: TMEM allocated for the pair
        #   tmem_pool: step 8's TMEMPool (it takes the address slot, so it comes first in `pool`), now allocating TMEM
        #   for the pair, since the pair's MMA writes both CTAs' TMEM.
        todo("9.3 TMEM allocated for the pair")
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
        # TODO 9.4: arrival counts for the pair, and the init made visible
        #   Each barrier's arrival count per phase for the pair (your table), with .init. Then the initialisation must
        #   be visible before any role starts, to every thread that arrives on, commits to or loads onto a barrier, in
        #   this CTA or its peer; keep step 8's init fences and tcgen05 fences around that synchronisation. A count
        #   that differs from the arrivals per phase hangs or releases early.
        todo("9.4 arrival counts for the pair, and the init made visible")
        # TMEMPool addresses columns from 0: a 512-column allocation always starts there.
        T.cuda.trap_when_assert_failed(tmem_pool.addr == T.uint32(0))

        # TODO 9.5: the scheduler walks cluster tiles; this CTA's rows of A, B and D
        #   tile_scheduler walks the cluster tiles (MMA_M x MMA_N each); the clusters take turns, each starting at its
        #   own index. Then, as T.meta_vars of the scheduler's m_idx, n_idx and cbx: m_st, this CTA's first row of A
        #   (and of D), n_st, its first row of B, and d_n_st, the first column of D of the cluster tile. The two CTAs'
        #   rows of A together must be the MMA's M rows, their rows of B its N.
        todo("9.5 the scheduler walks cluster tiles; this CTA's rows of A, B and D")

        # ---- TMA producer: warpgroup 1, warp 3, one thread, in each CTA ----
        if wg_id == 1:
            if warp_id == 3:
                tma_state = PipelineState(PIPE_DEPTH, 1)  # producer: stages start free
                # TODO 9.6: the barrier the pair's loads complete on
                #   A handle on the copy of tma2mma that this CTA's loads complete on (your table), made once,
                #   outside the loops, for TODO 9.7's mbar. API family: the barrier classes of
                #   tvm.backend.cuda.lang.pipeline and their views of another CTA's copy (docs/tirx-facts.md).
                todo("9.6 the barrier the pair's loads complete on")
                if T.cuda.elect_sync():
                    while tile_scheduler.valid():
                        for k in T.serial(K_TILES):
                            s = T.meta_var(tma_state.stage)
                            mma2tma.wait(s, tma_state.phase)
                            # TODO 9.7: arm the pair's barrier; the pair's loads
                            #   At the state's stage s (mma2tma already waited on above): the barrier the MMA issuer
                            #   waits on must expect exactly the bytes that land on it in this K tile, and this
                            #   CTA's A and B tiles of the K tile go into its Asmem[s] and Bsmem[s] as loads of the
                            #   pair, completing on TODO 9.6's barrier. API family: TMABar, Tx.copy_async. Trap: a byte
                            #   count that differs from what lands completes the phase early (stale tiles) or never.
                            todo("9.7 arm the pair's barrier; the pair's loads")
                            tma_state.advance()
                        tile_scheduler.next_tile()

        # ---- MMA issuer: warpgroup 1, warp 0, one thread, in CTA 0 only ----
        if wg_id == 1:
            if warp_id == 0:
                mma_state = PipelineState(PIPE_DEPTH, 0)  # consumer of tma2mma
                acc_state = PipelineState(1, 1)  # producer of the accumulator: TMEM starts free
                # TODO 9.8: the pair's MMA loop
                #   The MMA loop of step 8, for the pair: the MMAs of the data path into TMEM columns [0, MMA_N),
                #   each K tile's stage and each tile's accumulator handed on to the waiters of your table.
                #   API family: Tx.gemm_async, TCGen05Bar (docs/tirx-facts.md). A waiter whose barrier no
                #   commit completes hangs; one completed early reads a stage or TMEM still being written.
                todo("9.8 the pair's MMA loop")

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
                    # TODO 9.9: release the accumulator to the MMA issuer
                    #   Once per tile, after this thread's last TMEM read of the tile (this TODO sits inside the
                    #   chunk loop): hand the accumulator back to its waiter of your table, the TMEM reads ordered
                    #   before the hand-back. API family: MBarrier, the tcgen05 fences (docs/tirx-facts.md).
                    todo("9.9 release the accumulator to the MMA issuer")
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
        # TODO 9.10: the pair is done before TMEM is freed
        #   Before the dealloc, and before this CTA exits, nothing may still write its TMEM or arrive on its
        #   barriers. API family: T.cuda's synchronisations.
        todo("9.10 the pair is done before TMEM is freed")
        tmem_pool.dealloc()
    # fmt: on

    return kernel
