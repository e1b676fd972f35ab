"""Step 8 (Hopper): a deeper pipeline.

Step 7 with as many stages in the rings as shared memory holds. The more stages, the further the
producer can run ahead of the consumer, and the more of the TMA latency it hides than step 7's
four stages could.
"""

import tvm
from tvm.backend.cuda.lang.pipeline import MBarrier, PipelineState, TMABar
from tvm.backend.cuda.lang.tile_scheduler import ClusterPersistentScheduler2D
from tvm.backend.cuda.tile_primitive.tma_utils import SwizzleMode, mma_shared_layout
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

from kernel_helpers.hopper import STAGE_DESC_STEP, acc_col, acc_row, encode_sw128_desc, wgmma_128x128x16

from kernel_helpers.todo import todo


def hgemm_v8(M, N, K, sm_count):
    """D = A @ B^T with sm_count persistent CTAs of a producer and a consumer warpgroup.

    Data path (per CTA, per output tile (m_idx, n_idx) from the scheduler):
        producer (warpgroup 0, one elected thread): for each K tile, wait until stage s is free,
        then TMA A and B tiles --> Asmem[s], Bsmem[s], completing on tma2mma[s];
        consumer (warpgroup 1, 128 threads): for each K tile, wait until stage s is full -->
        wgmma m64n128k16 x 8 --> accumulator registers; wait_group(1): the previous K tile's
        group is done, so release the previous stage; after the last K tile, wait_group(0)
        and release the last stage;
        after the last K tile: registers --st.shared--> Dsmem --TMA store--> D.

    Barrier protocol (barriers initialised once per CTA; phases carried across tiles by
    PipelineState, which flips the phase each time the stage index wraps around; your first
    task: fill in the ? cells, then write the code):
        | barrier       | arrival count | who arrives                          | who waits          | starting phase |
        |---------------|---------------|--------------------------------------|--------------------|----------------|
        | tma2mma[s]    | 1 (each)      | producer's elected thread            | all 128 consumer   | consumer: 0    |
        | s < PIPE_DEPTH|               | (arrive.expect_tx, 32 KiB), then the | threads            |                |
        | ("full")      |               | TMA engine's byte count              |                    |                |
        | mma2tma[s]    | 1 (each)      | consumer thread 0, after the         | producer's elected | producer: 1    |
        | ("empty")     |               | wait_group that retires stage s's    | thread             | (passes at     |
        |               |               | group (one K tile later)             |                    |                |
        |               |               |                                      |                    | once: stages   |
        |               |               |                                      |                    | start empty)   |
        | named bar 1   | 128 threads   | the consumer warpgroup (bar.sync)    | the same           | -              |
        | (epilogue)    |               | before / after writing Dsmem         |                    |                |
    Questions to answer first: how many stages fit in the shared memory one CTA may use, beside
    Dsmem and the barriers? How far ahead of the consumer can the producer then be, with one
    wgmma group left running?
    Epilogue hand-off: before a tile's Dsmem writes, consumer warp 0 waits until the previous TMA
    store has read Dsmem (cp.async.bulk.wait_group.read 0), then named barrier 1.

    setmaxnreg needs a register cap at kernel entry: `launch_bounds_min_blocks_per_sm` = 1 makes
    TVM emit __launch_bounds__(256, 1); without it ptxas ignores setmaxnreg (warning C7508).

    Blackwell twin: the same two rings between a loading role and an MMA role; its accumulator
    lives in TMEM, so a separate writeback role drains it. Here the accumulator lives in the
    consumer's registers, so the consumer is its own writeback.
    """
    a_type = tvm.DataType("float16")
    b_type = tvm.DataType("float16")
    d_type = tvm.DataType("float16")
    acc_type = tvm.DataType("float32")

    BLK_M, BLK_N, BLK_K = 128, 128, 64
    MMA_K = 16
    K_TILES = K // BLK_K
    # TODO 8.1: as many stages as shared memory holds
    #   PIPE_DEPTH: as many stages as fit. Name the budget (SMEM_PER_CTA: the shared memory one CTA may
    #   use) and what the epilogue and the barriers take of it (EPILOGUE_SMEM: the Dsmem tile, and what
    #   the barriers below the 1024-aligned tiles occupy), and derive PIPE_DEPTH from them and the bytes
    #   of one stage, so that a later step that changes a tile changes the depth with it. Everything that
    #   is sized by PIPE_DEPTH (layouts, buffers, rings, PipelineStates) follows.
    todo("8.1 as many stages as shared memory holds")
    PRODUCER_REGS, CONSUMER_REGS = 40, 232  # per thread; 128 * (40 + 232) fits the 64K register file
    EPILOGUE_BAR = 1  # named barrier id of the consumer warpgroup (0 is __syncthreads)

    A_layout = mma_shared_layout(a_type, SwizzleMode.SWIZZLE_128B_ATOM, (PIPE_DEPTH, BLK_M, BLK_K))
    B_layout = mma_shared_layout(b_type, SwizzleMode.SWIZZLE_128B_ATOM, (PIPE_DEPTH, BLK_N, BLK_K))
    D_layout = mma_shared_layout(d_type, SwizzleMode.SWIZZLE_128B_ATOM, (BLK_M, BLK_N))
    TMA_BYTES = (BLK_M * BLK_K + BLK_N * BLK_K) * 2  # one K tile of A and of B, fp16

    @T.prim_func
    def kernel(
        A: T.Buffer((M, K), a_type),
        B: T.Buffer((N, K), b_type),
        D: T.Buffer((M, N), d_type),
    ):
        # fmt: off
        T.device_entry()
        T.attr({"tirx.launch_bounds_min_blocks_per_sm": 1})
        bx = T.cta_id([sm_count])
        wg_id = T.warpgroup_id([2])
        warp_id = T.warp_id_in_wg([4])
        lane_id = T.lane_id([32])

        # ---- shared memory: the two barrier rings, then the 128B-swizzled tiles ----
        pool = T.SMEMPool()
        tma2mma = TMABar(pool, PIPE_DEPTH)
        mma2tma = MBarrier(pool, PIPE_DEPTH)
        pool.move_base_to(1024)
        Asmem = pool.alloc((PIPE_DEPTH, BLK_M, BLK_K), a_type, layout=A_layout)
        Bsmem = pool.alloc((PIPE_DEPTH, BLK_N, BLK_K), b_type, layout=B_layout)
        Dsmem = pool.alloc((BLK_M, BLK_N), d_type, layout=D_layout)
        pool.commit()

        # ---- barrier init (thread 0), made visible to every thread and to the async proxy ----
        tma2mma.init(1)
        mma2tma.init(1)
        T.ptx.fence.mbarrier_init.release.cluster()
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cta_sync()

        # ---- tile scheduler: CTA bx takes tiles bx, bx + sm_count, ... in L2-grouped order ----
        tile_scheduler = ClusterPersistentScheduler2D(
            "ts", num_m_tiles=M // BLK_M, num_n_tiles=N // BLK_N,
            l2_group_size=8, num_clusters=sm_count)
        tile_scheduler.init(bx)
        m_st = T.meta_var(tile_scheduler.m_idx * BLK_M)
        n_st = T.meta_var(tile_scheduler.n_idx * BLK_N)

        if wg_id == 0:
            # ---- producer: registers go to the consumer; one thread issues every TMA ----
            T.ptx.setmaxnreg.dec.sync.aligned.u32(PRODUCER_REGS)
            if warp_id == 0:
                if T.cuda.elect_sync():
                    produce = PipelineState(PIPE_DEPTH, 1)  # stages start empty: first waits pass
                    while tile_scheduler.valid():
                        for k in range(K_TILES):
                            mma2tma.wait(produce.stage, produce.phase)
                            tma2mma.arrive(produce.stage, TMA_BYTES)
                            Tx.copy_async(Asmem[produce.stage, :, :],
                                          A[m_st:m_st + BLK_M, k * BLK_K:(k + 1) * BLK_K],
                                          dispatch="tma_auto", mbar=tma2mma.ptr_to([produce.stage]))
                            Tx.copy_async(Bsmem[produce.stage, :, :],
                                          B[n_st:n_st + BLK_N, k * BLK_K:(k + 1) * BLK_K],
                                          dispatch="tma_auto", mbar=tma2mma.ptr_to([produce.stage]))
                            produce.advance()
                        tile_scheduler.next_tile()
        else:
            # ---- consumer: wgmma on full stages, release them, write the tile back ----
            T.ptx.setmaxnreg.inc.sync.aligned.u32(CONSUMER_REGS)
            consume = PipelineState(PIPE_DEPTH, 0)
            release = PipelineState(PIPE_DEPTH, 0)  # one K tile behind `consume`: only its stage is used
            acc = T.alloc_local((BLK_M * BLK_N // 128,), acc_type)
            desc_a = T.alloc_local((1,), "uint64")
            desc_b = T.alloc_local((1,), "uint64")
            encode_sw128_desc(desc_a[0], Asmem.ptr_to([0, 0, 0]))
            encode_sw128_desc(desc_b[0], Bsmem.ptr_to([0, 0, 0]))
            while tile_scheduler.valid():
                for k in range(K_TILES):
                    tma2mma.wait(consume.stage, consume.phase)
                    stage_offset = T.meta_var(T.Cast("uint64", consume.stage * STAGE_DESC_STEP))
                    T.ptx.wgmma.fence.sync.aligned()
                    for kk in T.unroll(BLK_K // MMA_K):
                        wgmma_128x128x16(acc, desc_a[0] + stage_offset, desc_b[0] + stage_offset, kk,
                                         k * (BLK_K // MMA_K) + kk != 0)
                    T.ptx.wgmma.commit_group.sync.aligned()
                    # every group but the one just issued is done: the previous stage is free
                    T.ptx.wgmma.wait_group.sync.aligned(1)
                    if k > 0:
                        if warp_id == 0:
                            if lane_id == 0:
                                mma2tma.arrive(release.stage)
                        release.advance()
                    consume.advance()
                T.ptx.wgmma.wait_group.sync.aligned(0)
                if warp_id == 0:
                    if lane_id == 0:
                        mma2tma.arrive(release.stage)
                release.advance()

                # ---- writeback: registers -> fp16 -> Dsmem, then one TMA store ----
                # the previous tile's TMA store must have finished reading Dsmem
                if warp_id == 0:
                    T.ptx.cp.async_.bulk.wait_group.read(0)
                T.cuda.warpgroup_sync(EPILOGUE_BAR)
                for h in T.unroll(2):
                    for i in T.unroll(64):
                        Dsmem[acc_row(h, warp_id, lane_id, i), acc_col(lane_id, i)] = T.cast(
                            acc[h * 64 + i], d_type)
                T.ptx.fence.proxy.async_.shared__cta()
                T.cuda.warpgroup_sync(EPILOGUE_BAR)
                if warp_id == 0:
                    if T.cuda.elect_sync():
                        Tx.copy_async(D[m_st:m_st + BLK_M, n_st:n_st + BLK_N], Dsmem[:, :],
                                      dispatch="tma_auto")
                        T.ptx.cp.async_.bulk.commit_group()
                tile_scheduler.next_tile()

            # the last TMA store must finish before the CTA (and its shared memory) goes away
            if warp_id == 0:
                T.ptx.cp.async_.bulk.wait_group(0)

    return kernel
