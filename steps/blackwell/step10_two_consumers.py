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

from kernel_helpers.todo import todo


def hgemm_v10(M, N, K, sm_count):
    """D = A @ B^T for M a multiple of 512, N of 256, K of 64 (fp16 in, fp32 in TMEM, fp16 out).

    Grid: sm_count CTAs of 384 threads (three warpgroups), in clusters of 2 (cbx = rank, 0 or 1).
    The clusters walk the 512x256 cluster tiles in ClusterPersistentScheduler2D's L2-grouped order;
    both CTAs and all roles walk the same tiles. Consumer j (0 or 1) owns 256 rows of the cluster
    tile, 128 in each CTA (which rows: TODO 10.5), and all 256 columns.
    Roles and data path, per cluster tile (stages and phases from PipelineStates; PIPE_DEPTH:
    TODO 10.1):
        TMA producer (each CTA: warpgroup 2, warp 3, one thread): this CTA's A tile of each
            consumer and its B tile (global) --TMA, cta_group::2--> Asmem[s, 0], Asmem[s, 1],
            Bsmem[s].
        MMA issuers (CTA 0: warpgroup 2, warps j = 0 and 1, one thread each): Asmem[s, j] and
            Bsmem[s] of both CTAs --tcgen05.mma.cta_group::2, M = 256, N = 256--> TMEM columns
            [256 j, 256 j + 256) of both CTAs.
        Writeback j (each CTA: warpgroup j = 0, 1, thread t owns row t): TMEM columns
            [256 j, 256 j + 256) --tcgen05.ld, 4 chunks of EPI_N = 64 columns--> registers
            --fp16--> Dsmem[j] (its own staging buffer) --TMA store by one thread--> D.

    Barrier protocol (initialised by thread 0 of each CTA before any role starts). Your first
    task: fill in the ? cells, then write the code to match.
        | barrier                                          | arrival count | who arrives | who waits | starting phase |
        |--------------------------------------------------|---------------|-------------|-----------|----------------|
        | tma2mma[s] ("stage s has landed in the pair")    | ?             | ?           | ?         | ?              |
        | mma2tma[s] ("stage s may be refilled")           | ?             | ?           | ?         | ?              |
        | mma2ld[j] ("accumulator j is complete")          | ?             | ?           | ?         | ?              |
        | ld2mma[j] ("accumulator j has been read out")    | ?             | ?           | ?         | ?              |
        Questions the table and the code must answer: how many bytes land on the pair's barrier
        per K tile now? Two MMAs read every stage: when is a stage free, and how many commits
        does that take? Which barrier slots does each consumer and each writeback warpgroup use?
        The two writeback warpgroups run at the same time: how do their named-barrier syncs stay
        apart? Does every waiter still gate the next phase of what it waits on?
        Stage, phase and accumulator rules as in step 8; the tcgen05 fences as in step 7;
        initialisation and teardown as in step 9.

    Hopper twin: solutions/hopper/step10 runs two consumer warpgroups on an H100, each with its own
    accumulator and Dsmem staging buffer, fed by one producer; plus step 9's cluster. The two
    tcgen05 MMA issuers, their accumulators in two halves of TMEM, the multicast commits and the
    cta_group::2 parts are checked here only by the build (sm_100a and sm_103a) and by reading the
    generated code.
    """
    a_type = tvm.DataType("float16")
    d_type = tvm.DataType("float16")
    acc_type = tvm.DataType("float32")
    BLK_M, BLK_N, BLK_K = 128, 128, 64  # per CTA
    K_TILES = K // BLK_K
    EPI_N = 64  # writeback chunk: 64 fp32 registers per thread, one 128B-swizzled Dsmem row
    WG_NUMBER = 3
    WB_THREADS = 128  # the writeback warpgroup
    WB_BARRIER = 1  # the first named barrier id of the writeback warpgroups (0 is the CTA barrier)
    CTA_GROUP = 2  # CTAs per cluster, and the tcgen05 cta_group
    MMA_M, MMA_N = BLK_M * CTA_GROUP, BLK_N * CTA_GROUP  # one MMA for the pair: 256 x 256
    # TODO 10.1: two consumers: what each K tile and the epilogue take, and the stages left
    #   NUM_CONSUMER: the consumers (MMA threads, accumulators, writeback warpgroups). TILE_BYTES_ALL: the bytes one
    #   CTA's loads bring per K tile now (the data path above). Then step 8's sizing (SMEM_PER_CTA, EPILOGUE_SMEM,
    #   PIPE_DEPTH) for this step's stage and epilogue: PIPE_DEPTH is the most whole stages that fit beside everything
    #   else.
    todo("10.1 two consumers: what each K tile and the epilogue take, and the stages left")

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
        # TODO 10.2: one accumulator hand-over pair per consumer
        #   mma2ld and ld2mma from `pool`, with the classes of step 9, for the accumulators of the consumers: slot j
        #   belongs to consumer j.
        todo("10.2 one accumulator hand-over pair per consumer")
        pool.move_base_to(1024)  # 128B-swizzled tiles must start on a 1024-byte boundary
        # TODO 10.3: the tiles in shared memory: one A tile and one Dsmem tile per consumer
        #   Asmem (per stage, one 128x64 tile per consumer: consumer j multiplies the j-th), Bsmem (per stage, the one
        #   tile both consumers read) and Dsmem (one writeback chunk per consumer, so the two writeback warpgroups
        #   never share a buffer), from `pool` in that order, each with its layout above (the layouts already have
        #   those shapes).
        todo("10.3 the tiles in shared memory: one A tile and one Dsmem tile per consumer")
        pool.commit()

        # ---- TMEM: warp 0 of each CTA allocates all 512 columns; consumer j's accumulator is [256 j, 256 j + 256) ----
        tmem_pool.commit()
        tmem = tmem_pool.alloc((128, 512), "float32")

        # ---- barrier init (thread 0 of each CTA, outside any role branch) ----
        tma2mma.init(1)
        # TODO 10.4: when stage s is free
        #   mma2tma's arrival count per phase (your table); the other barriers keep step 9's counts, given around this
        #   block. A count below the commits per phase frees a stage at its first commit, and the producer overwrites
        #   A and B while the other consumer's MMA may still read them.
        todo("10.4 when stage s is free")
        mma2ld.init(1)
        ld2mma.init(WB_THREADS * CTA_GROUP)
        T.ptx.fence.mbarrier_init.release.cluster()
        T.ptx.fence.proxy.async_.shared__cta()
        T.ptx.tcgen05.fence__before_thread_sync()
        T.cuda.cluster_sync()
        T.ptx.tcgen05.fence__after_thread_sync()
        # TMEMPool addresses columns from 0: a 512-column allocation always starts there.
        T.cuda.trap_when_assert_failed(tmem_pool.addr == T.uint32(0))

        # TODO 10.5: the scheduler walks 512x256 cluster tiles
        #   Step 9's scheduler and row origins for cluster tiles of NUM_CONSUMER x MMA_M rows and MMA_N columns:
        #   tile_scheduler, m_st (this CTA's first row of A and D for consumer 0; TODOs 10.6 and 10.8 add consumer j's
        #   offset), n_st and d_n_st, as T.meta_vars. Each consumer's MMA covers MMA_M contiguous rows of the cluster
        #   tile: its 128 rows in CTA 0 and its 128 rows in CTA 1 together.
        todo("10.5 the scheduler walks 512x256 cluster tiles")

        # ---- TMA producer: warpgroup 2, warp 3, one thread, in each CTA ----
        # TODO 10.6: the producer moves to warpgroup 2 and loads one A tile per consumer
        #   Step 9's producer (TODOs 9.6 and 9.7), in warp 3 of warpgroup NUM_CONSUMER: per K tile, this CTA's A tile
        #   of each consumer j into Asmem[s, j] and its B tile into Bsmem[s], all completing on the barrier the MMA
        #   issuers wait on, which is armed for everything that lands there in both CTAs. API family: as in step 9;
        #   T.unroll over the consumers.
        todo("10.6 the producer moves to warpgroup 2 and loads one A tile per consumer")

        # ---- MMA issuers: warpgroup 2, warps j = 0 and 1, one thread each, in CTA 0 only ----
        # TODO 10.7: two MMA issuers, one accumulator each
        #   Two MMA issuers in warpgroup NUM_CONSUMER of the issuing CTA (warps 0 and 1: consumer j = warp_id), each
        #   step 9's MMA loop with its own PipelineStates on its own accumulator: A from Asmem[s, j], the shared B,
        #   into TMEM columns [j x MMA_N, (j + 1) x MMA_N), with slot j of mma2ld and ld2mma. Both read every stage:
        #   how each stage's release and each accumulator's hand-over reach their waiters is your table.
        todo("10.7 two MMA issuers, one accumulator each")

        # ---- writeback j: warpgroup j = 0, 1, 128 threads, thread t owns row t ----
        # TODO 10.8: two writeback warpgroups, one accumulator each
        #   Writeback warpgroups 0 and 1 (j = wg_id): step 9's writeback for consumer j, on its accumulator's TMEM
        #   columns, its barrier slots, Dsmem[j] and its own rows of D (this CTA's rows of consumer j). The two
        #   warpgroups run at the same time and must not join each other's named-barrier syncs: WB_BARRIER is the
        #   first named barrier id they may use (0 is the CTA barrier).
        todo("10.8 two writeback warpgroups, one accumulator each")

        # ---- teardown: both CTAs are done; warp 0 of each CTA frees the pair's TMEM ----
        T.cuda.cluster_sync()
        tmem_pool.dealloc()
    # fmt: on

    return kernel
