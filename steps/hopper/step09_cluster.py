"""Step 9 (Hopper): a 2-CTA cluster that multicasts the shared operand.

Two CTAs of one cluster compute the two vertically adjacent 128x128 output tiles of a 256x128
cluster tile, so they need the same B tile. Each CTA loads its own A tile and half of the B tile,
and the TMA multicasts that half into the shared memory of both CTAs: B crosses from L2 once per
cluster instead of once per CTA. A CTA's stage is now filled partly by its peer's producer.
"""

import tvm
from tvm.backend.cuda.lang.pipeline import MBarrier, PipelineState, TMABar
from tvm.backend.cuda.lang.tile_scheduler import ClusterPersistentScheduler2D
from tvm.backend.cuda.tile_primitive.tma_utils import SwizzleMode, mma_shared_layout
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

from kernel_helpers.hopper import STAGE_DESC_STEP, acc_col, acc_row, encode_sw128_desc, wgmma_128x128x16

from kernel_helpers.todo import todo


def hgemm_v9(M, N, K, sm_count):
    """D = A @ B^T with sm_count / 2 persistent clusters of 2 CTAs (producer + consumer warpgroups).

    Data path (per 256x128 cluster tile (m_idx, n_idx) from the scheduler; CTA rank r in {0, 1}
    of the cluster owns one 128-row half of it, all 128 columns):
        producer (warpgroup 0, one elected thread): for each K tile, wait until stage s is free,
        then TMA its A tile --> its Asmem[s], and its half of the B tile --> the same rows of
        Bsmem[s] in BOTH CTAs (multicast); every copy completes on the tma2mma[s] of the CTA it
        writes to, so each CTA's tma2mma[s] counts its own A (16 KiB) + both B halves
        (2 x 8 KiB) = 32 KiB, as before;
        consumer (warpgroup 1, 128 threads): as in step 8; when may a stage be refilled now that
        two producers fill it?
        after the last K tile: registers --st.shared--> Dsmem --TMA store--> D.

    Barrier protocol (barriers initialised once per CTA; phases carried across tiles by
    PipelineState, which flips the phase each time the stage index wraps around; your first
    task: fill in the ? cells, then write the code):
        | barrier       | arrival count | who arrives                          | who waits          | starting phase |
        |---------------|---------------|--------------------------------------|--------------------|----------------|
        | tma2mma[s]    | 1 (each)      | producer's elected thread            | all 128 consumer   | consumer: 0    |
        | s < 6 ("full")|               | (arrive.expect_tx, 32 KiB), then the | threads            |                |
        |               |               | TMA engine's byte count              |                    |                |
        | mma2tma[s]    | ?             | ?                                    | ?                  | ?              |
        | ("empty")     |               |                                      |                    |                |
        | named bar 1   | 128 threads   | the consumer warpgroup (bar.sync)    | the same           | -              |
        | (epilogue)    |               | before / after writing Dsmem         |                    |                |
        | cluster       | ?             | ?                                    | ?                  | -              |
        | barrier (both |               |                                      |                    |                |
        | CTAs)         |               |                                      |                    |                |
    Questions to answer first: which threads, in which CTA, read a stage of this CTA, and which
    write it? Who must be done before either producer refills it, and how many arrivals is that
    per phase? For every operation that reaches into the other CTA (a multicast load, an arrive),
    what must already be true of the peer when it starts, and what must stay true of this CTA
    until it is done? The peer's B half may land on
    tma2mma[s] before this CTA's producer has armed it with expect_tx: the transaction count may
    run ahead of the arrival, and the phase cannot complete until that one arrival comes.
    Epilogue hand-off: before a tile's Dsmem writes, consumer warp 0 waits until the previous TMA
    store has read Dsmem (cp.async.bulk.wait_group.read 0), then named barrier 1.

    Expect this step to be a few % slower than step 8 on an H100 (docs/ladder-h100.md): there the
    hardware already combines the loads of CTAs that ask for the same tile at about the same time,
    and combines them better than the multicast does (measured: docs/measurements.md).

    setmaxnreg needs a register cap at kernel entry: `launch_bounds_min_blocks_per_sm` = 1 makes
    TVM emit __launch_bounds__(256, 1); without it ptxas ignores setmaxnreg (warning C7508).

    Blackwell twin: its 2-CTA cluster goes further: one MMA instruction computes the pair's
    256x256 tile from both CTAs' shared memory. Hopper has no cross-CTA MMA: each CTA multiplies
    its own tile, and what the cluster shares is the load of B.
    """
    a_type = tvm.DataType("float16")
    b_type = tvm.DataType("float16")
    d_type = tvm.DataType("float16")
    acc_type = tvm.DataType("float32")

    BLK_M, BLK_N, BLK_K = 128, 128, 64
    CLUSTER = 2  # CTAs per cluster, stacked along M
    B_PART = BLK_N // CLUSTER  # rows of the B tile each CTA loads and multicasts
    MMA_K = 16
    K_TILES = K // BLK_K
    SMEM_PER_CTA = 227 * 1024  # the most shared memory one CTA may use (sm_90 and sm_100)
    EPILOGUE_SMEM = BLK_M * BLK_N * 2 + 1024  # Dsmem, and the 1 KiB the barriers take below the tiles
    PIPE_DEPTH = (SMEM_PER_CTA - EPILOGUE_SMEM) // ((BLK_M + BLK_N) * BLK_K * 2)  # the most whole stages that fit
    PRODUCER_REGS, CONSUMER_REGS = 40, 232  # per thread; 128 * (40 + 232) fits the 64K register file
    EPILOGUE_BAR = 1  # named barrier id of the consumer warpgroup (0 is __syncthreads)

    A_layout = mma_shared_layout(a_type, SwizzleMode.SWIZZLE_128B_ATOM, (PIPE_DEPTH, BLK_M, BLK_K))
    B_layout = mma_shared_layout(b_type, SwizzleMode.SWIZZLE_128B_ATOM, (PIPE_DEPTH, BLK_N, BLK_K))
    D_layout = mma_shared_layout(d_type, SwizzleMode.SWIZZLE_128B_ATOM, (BLK_M, BLK_N))
    TMA_BYTES = (BLK_M * BLK_K + BLK_N * BLK_K) * 2  # what lands in each CTA per K tile: A + both B halves

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
        # TODO 9.1: this CTA's rank in the cluster
        #   rank (the name the code below uses): this CTA's index in its cluster of CLUSTER CTAs, stacked along M.
        #   API: the cluster counterpart of T.cta_id (docs/tirx-facts.md); it also makes the launch a cluster launch.
        todo("9.1 this CTA's rank in the cluster")
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

        # ---- barrier init, visible to both CTAs of the cluster before first use ----
        tma2mma.init(1)
        # TODO 9.2: the empty ring's count
        #   mma2tma.init with your table's count: the arrivals one phase of one stage's empty barrier receives in
        #   your design. A count that disagrees with them hangs the producer or lets it refill a stage still read.
        todo("9.2 the empty ring's count")
        T.ptx.fence.mbarrier_init.release.cluster()
        T.ptx.fence.proxy.async_.shared__cta()
        # TODO 9.3: publish the barriers to the whole cluster
        #   Everything that will touch this CTA's barriers or stages must find them initialised before it starts.
        #   API: the syncs of T.cuda (docs/tirx-facts.md).
        todo("9.3 publish the barriers to the whole cluster")

        # ---- tile scheduler over 256x128 cluster tiles ----
        # TODO 9.4: the scheduler over cluster tiles and this CTA's rows
        #   tile_scheduler (a ClusterPersistentScheduler2D, as in step 8) and m_st (a T.meta_var; n_st follows
        #   below): the cluster tiles this CTA walks and the output rows it computes. The B rows its stages
        #   receive, from either CTA, must be the ones it multiplies, and each output tile is computed once.
        todo("9.4 the scheduler over cluster tiles and this CTA's rows")
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
                            # TODO 9.5: this CTA's half of B, multicast to both CTAs
                            #   This CTA's B_PART rows of the B tile. Afterwards every CTA's Bsmem[s] holds the
                            #   whole B tile and its tma2mma[s] has received TMA_BYTES, as the arrive above
                            #   announces. API: Tx.copy_async (docs/tirx-facts.md, clusters).
                            todo("9.5 this CTA's half of B, multicast to both CTAs")
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
                                # TODO 9.6: release the previous stage
                                #   Step 8's release of `release`'s stage, now under the rule that a producer
                                #   may refill a stage only after every reader of it, in either CTA, is done
                                #   with it (your table's mma2tma row). API: MBarrier.arrive.
                                todo("9.6 release the previous stage")
                        release.advance()
                    consume.advance()
                T.ptx.wgmma.wait_group.sync.aligned(0)
                if warp_id == 0:
                    if lane_id == 0:
                        # TODO 9.7: release the last stage
                        #   The drain's release of step 8, under the rule of TODO 9.6.
                        todo("9.7 release the last stage")
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

        # TODO 9.8: no CTA leaves while its peer may still arrive
        #   A CTA's barriers and shared memory must outlive everything aimed at them in your design. Your
        #   table's cluster-barrier row.
        todo("9.8 no CTA leaves while its peer may still arrive")

    return kernel
