"""Step 7 (Hopper): warp specialization.

The CTA splits into two warpgroups with one job each. The producer warpgroup gives most of its
registers away (setmaxnreg) and one elected thread of it issues every TMA load; the consumer
warpgroup takes those registers and only waits, multiplies and writes back. The two talk through
two rings of mbarriers, one per shared-memory stage: tma2mma[s] ("stage s is full") and
mma2tma[s] ("stage s may be refilled"). The producer runs ahead into the next output tile while
the consumer is still in its epilogue, and the consumer keeps one wgmma group in flight: it
releases a stage one K tile late, once the group that read it is known to be done.

Warp specialization pays only with that asynchronous release: with one CTA per SM, a consumer
that waits for its own wgmmas after every K tile (wait_group(0)) idles the tensor cores while the
next wgmmas could already run. Measured on an H100 (one run, interleaved with cuBLAS, L2
flushed): the roles with wait_group(0) ran at 0.75-0.85x cuBLAS even with six stages, below
step 6's 0.91-0.96x; with the late release and four stages they run as fast as step 6 or faster,
and step 8 deepens the ring.
"""

import tvm
from tvm.backend.cuda.lang.pipeline import MBarrier, PipelineState, TMABar
from tvm.backend.cuda.lang.tile_scheduler import ClusterPersistentScheduler2D
from tvm.backend.cuda.tile_primitive.tma_utils import SwizzleMode, mma_shared_layout
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

from kernel_helpers.hopper import STAGE_DESC_STEP, acc_col, acc_row, encode_sw128_desc, wgmma_128x128x16


def hgemm_v7(M, N, K, sm_count):
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
    PipelineState, which flips the phase each time the stage index wraps around):
        | barrier       | arrival count | who arrives                          | who waits          | starting phase |
        |---------------|---------------|--------------------------------------|--------------------|----------------|
        | tma2mma[s]    | 1 (each)      | producer's elected thread            | all 128 consumer   | consumer: 0    |
        | s < 4 ("full")|               | (arrive.expect_tx, 32 KiB), then the | threads            |                |
        |               |               | TMA engine's byte count              |                    |                |
        | mma2tma[s]    | 1 (each)      | consumer thread 0, after the         | producer's elected | producer: 1    |
        | ("empty")     |               | wait_group that retires stage s's    | thread             | (passes at     |
        |               |               | group (one K tile later)             |                    |                |
        |               |               |                                      |                    | once: stages   |
        |               |               |                                      |                    | start empty)   |
        | named bar 1   | 128 threads   | the consumer warpgroup (bar.sync)    | the same           | -              |
        | (epilogue)    |               | before / after writing Dsmem         |                    |                |
    The producer and the consumer walk the same tiles and the same K tiles, so both rings see the
    same number of uses: a different trip count on either side is a hang. No consumer warp can be
    lapped on tma2mma[s]: its next phase needs a refill, which needs mma2tma[s], which needs the
    warpgroup-wide wgmma that every consumer warp issues after its wait.
    Epilogue hand-off: before a tile's Dsmem writes, consumer warp 0 waits until the previous TMA
    store has read Dsmem (cp.async.bulk.wait_group.read 0), then named barrier 1.

    setmaxnreg needs a register cap at kernel entry: `launch_bounds_min_blocks_per_sm` = 1 makes
    TVM emit __launch_bounds__(256, 1); without it ptxas ignores setmaxnreg (warning C7508).

    Blackwell twin: the same tma2mma / mma2tma rings and PipelineState phases, with a TMA warp and
    an MMA warp in one warpgroup (the MMA is issued by one thread and frees a stage by
    tcgen05.commit) and a writeback warpgroup fed from TMEM through two more barriers; here the
    accumulator lives in the consumer's registers, so the consumer is its own writeback.
    """
    a_type = tvm.DataType("float16")
    b_type = tvm.DataType("float16")
    d_type = tvm.DataType("float16")
    acc_type = tvm.DataType("float32")

    BLK_M, BLK_N, BLK_K = 128, 128, 64
    MMA_K = 16
    K_TILES = K // BLK_K
    # >>> TODO 7.1: the ring's depth and each role's registers
    # A stage comes free one K tile after it was read: with 2 stages the producer never gets ahead
    # (0.41x cuBLAS on an H100), with 3 it barely does (0.67x); 4 keep up with step 6.
    PIPE_DEPTH = 4
    PRODUCER_REGS, CONSUMER_REGS = 40, 232  # per thread; 128 * (40 + 232) fits the 64K register file
    # <<< TODO 7.1
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
        # >>> TODO 7.2: a register cap at launch
        T.attr({"tirx.launch_bounds_min_blocks_per_sm": 1})
        # <<< TODO 7.2
        bx = T.cta_id([sm_count])
        # >>> TODO 7.3: a producer and a consumer warpgroup
        wg_id = T.warpgroup_id([2])
        # <<< TODO 7.3
        warp_id = T.warp_id_in_wg([4])
        lane_id = T.lane_id([32])

        # ---- shared memory: the two barrier rings, then the 128B-swizzled tiles ----
        pool = T.SMEMPool()
        # >>> TODO 7.4: the full and empty barrier rings
        tma2mma = TMABar(pool, PIPE_DEPTH)
        mma2tma = MBarrier(pool, PIPE_DEPTH)
        # <<< TODO 7.4
        pool.move_base_to(1024)
        Asmem = pool.alloc((PIPE_DEPTH, BLK_M, BLK_K), a_type, layout=A_layout)
        Bsmem = pool.alloc((PIPE_DEPTH, BLK_N, BLK_K), b_type, layout=B_layout)
        Dsmem = pool.alloc((BLK_M, BLK_N), d_type, layout=D_layout)
        pool.commit()

        # ---- barrier init (thread 0), made visible to every thread and to the async proxy ----
        # >>> TODO 7.5: arrival counts of the two rings
        tma2mma.init(1)
        mma2tma.init(1)
        # <<< TODO 7.5
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
            # >>> TODO 7.6: the producer gives its registers away
            T.ptx.setmaxnreg.dec.sync.aligned.u32(PRODUCER_REGS)
            # <<< TODO 7.6
            # >>> TODO 7.7: one producer thread fills free stages, tile after tile
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
            # <<< TODO 7.7
        else:
            # ---- consumer: wgmma on full stages, release them, write the tile back ----
            # >>> TODO 7.8: the consumer's registers, ring state and descriptors
            T.ptx.setmaxnreg.inc.sync.aligned.u32(CONSUMER_REGS)
            consume = PipelineState(PIPE_DEPTH, 0)
            release = PipelineState(PIPE_DEPTH, 0)  # one K tile behind `consume`: only its stage is used
            acc = T.alloc_local((BLK_M * BLK_N // 128,), acc_type)
            desc_a = T.alloc_local((1,), "uint64")
            desc_b = T.alloc_local((1,), "uint64")
            encode_sw128_desc(desc_a[0], Asmem.ptr_to([0, 0, 0]))
            encode_sw128_desc(desc_b[0], Bsmem.ptr_to([0, 0, 0]))
            # <<< TODO 7.8
            while tile_scheduler.valid():
                # >>> TODO 7.9: the K loop: multiply full stages, hand back the ones that are read
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
                # <<< TODO 7.9
                # >>> TODO 7.10: before the epilogue
                T.ptx.wgmma.wait_group.sync.aligned(0)
                if warp_id == 0:
                    if lane_id == 0:
                        mma2tma.arrive(release.stage)
                release.advance()
                # <<< TODO 7.10

                # ---- writeback: registers -> fp16 -> Dsmem, then one TMA store ----
                # the previous tile's TMA store must have finished reading Dsmem
                # >>> TODO 7.11: step 6's writeback, synchronised among the consumer's threads only
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
                # <<< TODO 7.11
                tile_scheduler.next_tile()

            # the last TMA store must finish before the CTA (and its shared memory) goes away
            if warp_id == 0:
                T.ptx.cp.async_.bulk.wait_group(0)

    return kernel
