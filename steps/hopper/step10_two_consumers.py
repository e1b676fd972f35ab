"""Step 10 (Hopper): two consumer warpgroups.

The CTA tile grows to 128x256 and a second consumer warpgroup joins: each consumer multiplies its
own rows of the A tile with the whole B tile, one m64n256k16 wgmma per K=16 slice. Both consumers
read the same B stage, so each byte of B brought into shared memory feeds twice the math, and the
wider wgmma reads fewer shared-memory bytes per FLOP than two m64n128k16 do.
"""

import tvm
from tvm.backend.cuda.lang.pipeline import MBarrier, PipelineState, TMABar
from tvm.backend.cuda.lang.tile_scheduler import ClusterPersistentScheduler2D
from tvm.backend.cuda.tile_primitive.tma_utils import SwizzleMode, mma_shared_layout
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

from kernel_helpers.hopper import (
    ACC_PER_M64, STAGE_DESC_STEP, acc_col, acc_row, encode_sw128_desc, wgmma_64x256x16)

from kernel_helpers.todo import todo


def hgemm_v10(M, N, K, sm_count):
    """D = A @ B^T with sm_count / 2 persistent clusters of 2 CTAs (a producer and 2 consumer warpgroups).

    Data path (per 256x256 cluster tile (m_idx, n_idx) from the scheduler; CTA rank r in {0, 1}
    owns one 128-row half of it, all 256 columns):
        producer (warpgroup 0, one elected thread): for each K tile, wait until stage s is free,
        then TMA its A tile (128 rows) --> its Asmem[s], and its half of the B tile --> the same
        rows of Bsmem[s] in BOTH CTAs (multicast); each CTA's tma2mma[s] counts A (16 KiB) +
        both B halves (2 x 16 KiB) = 48 KiB;
        each consumer (one warpgroup, 128 threads): for each K tile, wait until stage s is full
        --> wgmma m64n256k16 on its rows of Asmem[s] and all of Bsmem[s] --> its accumulator
        registers; release the stages as in step 9;
        then registers --st.shared--> its staging tile in Dsmem --TMA store--> its rows of D.

    Barrier protocol (barriers initialised once per CTA; phases carried across tiles by
    PipelineState, which flips the phase each time the stage index wraps around; your first
    task: fill in the ? cells, then write the code):
        | barrier                 | arrival count | who arrives | who waits | starting phase |
        |-------------------------|---------------|-------------|-----------|----------------|
        | tma2mma[s]              | ?             | ?           | ?         | ?              |
        | s < PIPE_DEPTH ("full") |               |             |           |                |
        | mma2tma[s] ("empty")    | ?             | ?           | ?         | ?              |
        | named bar(s) of the     | ?             | ?           | ?         | -              |
        | consumers' epilogues    |               |             |           |                |
        | cluster barrier         | ?             | ?           | ?         | -              |
        | (both CTAs)             |               |             |           |                |
    Questions to answer first: who must be done with a stage before it may be refilled, now? How
    many stages fit beside the staging tiles, and how large must a staging tile be? Which threads
    take part in one consumer's epilogue barrier, and what does a named barrier count?
    The peer's B half may land on tma2mma[s] before this CTA's producer has armed it with
    expect_tx: the transaction count may run ahead of the arrival, and the phase cannot complete
    until that one arrival comes.

    setmaxnreg needs a register cap at kernel entry: with three warpgroups TVM emits
    __launch_bounds__(384, 1) from the same attribute as before; without it ptxas ignores
    setmaxnreg (warning C7508).

    Blackwell twin: two MMA issuers, each with its own accumulator in TMEM and its own writeback.
    Here each consumer is its own MMA issuer and writeback, and the two share the B stage.
    """
    a_type = tvm.DataType("float16")
    b_type = tvm.DataType("float16")
    d_type = tvm.DataType("float16")
    acc_type = tvm.DataType("float32")

    BLK_M, BLK_N, BLK_K = 128, 256, 64
    CLUSTER = 2  # CTAs per cluster, stacked along M
    B_PART = BLK_N // CLUSTER  # rows of the B tile each CTA loads and multicasts
    MMA_K = 16
    K_TILES = K // BLK_K
    # TODO 10.1: the consumers' rows, staging tiles and registers, and the stages that fit beside them
    #   NUM_CONSUMERS, CONSUMER_ROWS (the rows of the CTA tile each consumer owns), EPI_N (the columns of D
    #   one staging tile holds); step 8's SMEM_PER_CTA, EPILOGUE_SMEM and PIPE_DEPTH for this step's sizes;
    #   the setmaxnreg caps PRODUCER_REGS and CONSUMER_REGS for this step's warpgroups. Every staging byte
    #   is a byte the ring cannot have, and all the caps share the SM's 64K registers.
    todo("10.1 the consumers' rows, staging tiles and registers, and the stages that fit beside them")
    EPILOGUE_BAR = 1  # the first named barrier id the consumers may use (0 is __syncthreads)

    A_layout = mma_shared_layout(a_type, SwizzleMode.SWIZZLE_128B_ATOM, (PIPE_DEPTH, BLK_M, BLK_K))
    B_layout = mma_shared_layout(b_type, SwizzleMode.SWIZZLE_128B_ATOM, (PIPE_DEPTH, BLK_N, BLK_K))
    # TODO 10.2: a staging layout per consumer
    #   D_layout: the layout of Dsmem (TODO 10.4), where each consumer stages its rows for its TMA stores
    #   without touching what the other consumer stages. API: mma_shared_layout, as for A and B.
    todo("10.2 a staging layout per consumer")
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
        rank = T.cta_id_in_cluster([CLUSTER])
        # TODO 10.3: a producer and the consumer warpgroups
        #   wg_id: the code below takes warpgroup 0 as the producer and every other warpgroup as a consumer.
        #   API: T.warpgroup_id, as before.
        todo("10.3 a producer and the consumer warpgroups")
        warp_id = T.warp_id_in_wg([4])
        lane_id = T.lane_id([32])

        # ---- shared memory: the two barrier rings, then the 128B-swizzled tiles ----
        pool = T.SMEMPool()
        tma2mma = TMABar(pool, PIPE_DEPTH)
        mma2tma = MBarrier(pool, PIPE_DEPTH)
        pool.move_base_to(1024)
        Asmem = pool.alloc((PIPE_DEPTH, BLK_M, BLK_K), a_type, layout=A_layout)
        Bsmem = pool.alloc((PIPE_DEPTH, BLK_N, BLK_K), b_type, layout=B_layout)
        # TODO 10.4: the staging buffer
        #   Dsmem from `pool`, in TODO 10.2's layout.
        todo("10.4 the staging buffer")
        pool.commit()

        # ---- barrier init, visible to both CTAs of the cluster before first use ----
        tma2mma.init(1)
        # TODO 10.5: the empty ring's count with two consumers
        #   mma2tma.init with your table's count: the arrivals one phase of one stage's empty barrier receives from
        #   the releases below. A count that disagrees with them hangs the producer or lets it refill a stage still read.
        todo("10.5 the empty ring's count with two consumers")
        T.ptx.fence.mbarrier_init.release.cluster()
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cluster_sync()

        # ---- tile scheduler over 256x256 cluster tiles ----
        tile_scheduler = ClusterPersistentScheduler2D(
            "ts", num_m_tiles=M // (CLUSTER * BLK_M), num_n_tiles=N // BLK_N,
            l2_group_size=8, num_clusters=sm_count // CLUSTER)
        tile_scheduler.init(bx // CLUSTER)
        m_st = T.meta_var(tile_scheduler.m_idx * (CLUSTER * BLK_M) + rank * BLK_M)
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
                            # this CTA's half of the B tile, written into both CTAs' stage
                            Tx.copy_async(Bsmem[produce.stage, rank * B_PART:(rank + 1) * B_PART, :],
                                          B[n_st + rank * B_PART:n_st + (rank + 1) * B_PART,
                                            k * BLK_K:(k + 1) * BLK_K],
                                          dispatch="tma_auto", mbar=tma2mma.ptr_to([produce.stage]),
                                          cta_mask=(1 << CLUSTER) - 1)
                            produce.advance()
                        tile_scheduler.next_tile()
        else:
            # ---- consumer c: wgmma on its rows of full stages, release them, write them back ----
            T.ptx.setmaxnreg.inc.sync.aligned.u32(CONSUMER_REGS)
            # TODO 10.6: which consumer this warpgroup is, and its accumulator
            #   consumer: this warpgroup's index among the consumers, the number that picks its rows, staging tile and
            #   barrier in TODOs 10.7-10.10 (a T.meta_var: an expression substituted where the name is used); acc: the
            #   registers of this consumer's fp32 accumulator.
            todo("10.6 which consumer this warpgroup is, and its accumulator")
            consume = PipelineState(PIPE_DEPTH, 0)
            release = PipelineState(PIPE_DEPTH, 0)  # one K tile behind `consume`: only its stage is used
            desc_a = T.alloc_local((1,), "uint64")
            desc_b = T.alloc_local((1,), "uint64")
            # TODO 10.7: this consumer's rows of A
            #   desc_a: the A descriptor that TODO 10.9 moves to each stage; it must address the rows of A this
            #   consumer multiplies (desc_b is encoded below, as before). API: encode_sw128_desc.
            todo("10.7 this consumer's rows of A")
            encode_sw128_desc(desc_b[0], Bsmem.ptr_to([0, 0, 0]))
            while tile_scheduler.valid():
                for k in range(K_TILES):
                    tma2mma.wait(consume.stage, consume.phase)
                    # TODO 10.8: stage offsets of A and B
                    #   a_offset and b_offset (the names TODO 10.9 uses), as uint64: how far each operand's descriptor
                    #   moves from stage 0 to the state's stage, in descriptor units (STAGE_DESC_STEP, kernel_helpers.hopper).
                    todo("10.8 stage offsets of A and B")
                    T.ptx.wgmma.fence.sync.aligned()
                    for kk in T.unroll(BLK_K // MMA_K):
                        # TODO 10.9: one m64n256 wgmma per K=16 slice
                        #   This consumer's part of the tile for K=16 slice kk, with the m64n256k16 helper of
                        #   kernel_helpers.hopper on the descriptors moved to the state's stage; the first slice of each
                        #   tile overwrites the accumulator, as before.
                        todo("10.9 one m64n256 wgmma per K=16 slice")
                    T.ptx.wgmma.commit_group.sync.aligned()
                    # every group but the one just issued is done: the previous stage is free
                    T.ptx.wgmma.wait_group.sync.aligned(1)
                    if k > 0:
                        if warp_id == 0:
                            if lane_id == 0:
                                for peer in T.unroll(CLUSTER):
                                    mma2tma.arrive(release.stage, remote=peer)
                        release.advance()
                    consume.advance()
                T.ptx.wgmma.wait_group.sync.aligned(0)
                if warp_id == 0:
                    if lane_id == 0:
                        for peer in T.unroll(CLUSTER):
                            mma2tma.arrive(release.stage, remote=peer)
                release.advance()

                # ---- writeback: registers -> fp16 -> this consumer's staging tile -> TMA store ----
                # TODO 10.10: each consumer stores its rows
                #   Step 8's writeback, per consumer: this consumer's rows of D, through its staging tile of TODO 10.2.
                #   EPILOGUE_BAR is the first named barrier id the consumers may use. Trap: a named barrier completes
                #   when its thread count has arrived, whichever threads they are; met by the wrong ones, it releases
                #   the hand-off early and a staging tile is overwritten while still in use.
                todo("10.10 each consumer stores its rows")
                tile_scheduler.next_tile()

            # the last TMA store must finish before the CTA (and its shared memory) goes away
            if warp_id == 0:
                T.ptx.cp.async_.bulk.wait_group(0)

        # no CTA leaves while its peer may still arrive on its barriers
        T.cuda.cluster_sync()

    return kernel
