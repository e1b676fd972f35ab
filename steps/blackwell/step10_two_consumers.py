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

    Hopper twin: solutions/hopper/step10 runs two consumer warpgroups on an H100, fed by one
    producer, plus step 9's cluster. What only Blackwell has here (two MMA issuers and their TMEM
    accumulators) is checked only by the build (sm_100a and sm_103a) and by reading the generated
    code.
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
    #   NUM_CONSUMER: the consumers (MMA threads, accumulators, writeback warpgroups); TILE_BYTES_ALL: the bytes one
    #   CTA's loads bring per K tile now (data path above); step 8's SMEM_PER_CTA, EPILOGUE_SMEM and PIPE_DEPTH for
    #   this step's stage and epilogue.
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
        #   mma2ld and ld2mma from `pool` (the table's mma2ld[j] and ld2mma[j]): each consumer's accumulator is handed
        #   over on its own, whatever the other's is doing.
        todo("10.2 one accumulator hand-over pair per consumer")
        pool.move_base_to(1024)  # 128B-swizzled tiles must start on a 1024-byte boundary
        # TODO 10.3: the tiles in shared memory: one A tile and one Dsmem tile per consumer
        #   Asmem, Bsmem and Dsmem from `pool`, each with its layout above: Asmem[s, j], Bsmem[s] and Dsmem[j] are
        #   what the data path above names.
        todo("10.3 the tiles in shared memory: one A tile and one Dsmem tile per consumer")
        pool.commit()

        # ---- TMEM: warp 0 of each CTA allocates all 512 columns; consumer j's accumulator is [256 j, 256 j + 256) ----
        tmem_pool.commit()
        tmem = tmem_pool.alloc((128, 512), "float32")

        # ---- barrier init (thread 0 of each CTA, outside any role branch) ----
        tma2mma.init(1)
        # TODO 10.4: when stage s is free
        #   mma2tma's count (your table); the other barriers keep step 9's counts, given around this block. A count
        #   that disagrees with the arrivals per phase hangs the producer or frees a stage while an MMA still reads it.
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
        #   Step 9's tile_scheduler, m_st, n_st and d_n_st (T.meta_vars) for cluster tiles of NUM_CONSUMER x MMA_M rows
        #   and MMA_N columns; m_st is this CTA's first row of A and D for consumer 0 (TODOs 10.6 and 10.8 add consumer
        #   j's offset). The rows a consumer's MMA reads from both CTAs must be the rows its writebacks store.
        todo("10.5 the scheduler walks 512x256 cluster tiles")

        # ---- TMA producer: warpgroup 2, warp 3, one thread, in each CTA ----
        # TODO 10.6: the producer moves to warpgroup 2 and loads one A tile per consumer
        #   Step 9's producer for this step's stage: every tile an MMA issuer reads (Asmem[s, j] of consumer j,
        #   Bsmem[s]) has landed, in both CTAs, when its wait on tma2mma[s] passes, and is not refilled while an MMA
        #   may still read it. API family: as in step 9; T.unroll over the consumers.
        todo("10.6 the producer moves to warpgroup 2 and loads one A tile per consumer")

        # ---- MMA issuers: warpgroup 2, warps j = 0 and 1, one thread each, in CTA 0 only ----
        # TODO 10.7: two MMA issuers, one accumulator each
        #   Step 9's MMA role for NUM_CONSUMER consumers (threads and TMEM columns: data path above): consumer j's
        #   accumulator from Asmem[s, j] and the shared Bsmem[s] of every K tile. Both read every stage, and each
        #   accumulator has its own writebacks: how releases and hand-overs reach their waiters is your table.
        todo("10.7 two MMA issuers, one accumulator each")

        # ---- writeback j: warpgroup j = 0, 1, 128 threads, thread t owns row t ----
        # TODO 10.8: two writeback warpgroups, one accumulator each
        #   Step 9's writeback for each consumer j (warpgroup j: data path above): its accumulator, through Dsmem[j],
        #   into this CTA's rows of consumer j in D. The two writeback warpgroups run at the same time; WB_BARRIER is
        #   the first named barrier id they may use (0 is the CTA barrier).
        todo("10.8 two writeback warpgroups, one accumulator each")

        # ---- teardown: both CTAs are done; warp 0 of each CTA frees the pair's TMEM ----
        T.cuda.cluster_sync()
        tmem_pool.dealloc()
    # fmt: on

    return kernel
