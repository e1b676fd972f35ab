"""Step 10 (Hopper): two consumer warpgroups.

The CTA tile grows to 128x256 and a second consumer warpgroup joins: consumer c multiplies rows
64c..64c+63 of the A tile with the whole B tile, one m64n256k16 wgmma per K=16 slice. Both
consumers read the same B stage, so each byte of B brought into shared memory feeds twice the
math, and the wider wgmma reads fewer shared-memory bytes per FLOP than two m64n128k16 do. A stage
is free only when both consumers of both CTAs have released it.
"""

import tvm
from tvm.backend.cuda.lang.pipeline import MBarrier, PipelineState, TMABar
from tvm.backend.cuda.lang.tile_scheduler import ClusterPersistentScheduler2D
from tvm.backend.cuda.tile_primitive.tma_utils import SwizzleMode, mma_shared_layout
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

from kernel_helpers.hopper import (
    ACC_PER_M64, STAGE_DESC_STEP, acc_col, acc_row, encode_sw128_desc, wgmma_64x256x16)


def hgemm_v11(M, N, K, sm_count):
    """D = A @ B^T with sm_count / 2 persistent clusters of 2 CTAs (a producer and 2 consumer warpgroups).

    Data path (per 256x256 cluster tile (m_idx, n_idx) from the scheduler; CTA rank r in {0, 1}
    owns output rows m_st = 256*m_idx + 128*r, columns n_st = 256*n_idx):
        producer (warpgroup 0, one elected thread): for each K tile, wait until stage s is free
        in both CTAs, then TMA its A tile (128 rows) --> its Asmem[s], and rows 128r..128r+127
        of the B tile --> Bsmem[s, 128r:128r+128] of BOTH CTAs (multicast); each CTA's
        tma2mma[s] counts A (16 KiB) + both B halves (2 x 16 KiB) = 48 KiB;
        consumer c (warpgroup 1 + c, 128 threads each): for each K tile, wait until stage s is
        full --> wgmma m64n256k16 x 4 on Asmem[s, 64c:64c+64] and Bsmem[s] --> its 128
        accumulator registers; wait_group(1), release the previous stage; after the last K tile
        wait_group(0), release the last stage;
        then, for each 128-column half h: registers --st.shared--> Dsmem[c] --TMA store-->
        D[m_st+64c : +64, n_st+128h : +128].

    Barrier protocol (barriers initialised once per CTA; phases carried across tiles by
    PipelineState, which flips the phase each time the stage index wraps around):
        | barrier       | arrival count | who arrives                          | who waits          | starting phase |
        |---------------|---------------|--------------------------------------|--------------------|----------------|
        | tma2mma[s]    | 1 (each)      | producer's elected thread            | all 256 threads of | consumer: 0    |
        | s < 4 ("full")|               | (arrive.expect_tx, 48 KiB), then the | both consumers     |                |
        |               |               | TMA engine's byte count              |                    |                |
        | mma2tma[s]    | 4 (each)      | thread 0 of each of the 2 consumers  | producer's elected | producer: 1    |
        | ("empty")     |               | of EACH CTA of the cluster (local +  | thread             | (passes at     |
        |               |               | arrive), after the wait_group that   |                    |                |
        |               |               | retires stage s's group              |                    |                |
        |               |               |                                      |                    | once: stages   |
        |               |               |                                      |                    | start empty)   |
        | named bar 1+c | 128 threads   | consumer c (bar.sync), before /      | the same           | -              |
        | (epilogue)    |               | after writing Dsmem[c]               |                    |                |
    | cluster barrier | 384 threads x 2 CTAs | everyone, after barrier init and at the end      |
    The first cluster sync makes each CTA's initialised barriers visible to its peer before any
    multicast or remote arrive reaches them; the last keeps a CTA alive until its peer can no
    longer arrive on its barriers. The peer's B half may land on tma2mma[s] before this CTA's
    producer has armed it with expect_tx: the transaction count may run ahead of the arrival,
    and the phase cannot complete until that one arrival comes.
    The producer and the consumer walk the same tiles and the same K tiles, so both rings see the
    same number of uses: a different trip count on either side is a hang. No consumer warp can be
    lapped on tma2mma[s]: its next phase needs a refill, which needs mma2tma[s], which needs the
    warpgroup-wide wgmma that every consumer warp issues after its wait.
    Epilogue hand-off: before each half's Dsmem[c] writes, consumer c's warp 0 waits until its
    previous TMA store has read Dsmem[c] (cp.async.bulk.wait_group.read 0), then named barrier 1 + c. Each
    consumer has its own barrier id: sharing one id between two warpgroups of 128 threads makes a
    bar.sync complete with a mix of both, so one consumer could overwrite Dsmem too early.

    setmaxnreg needs a register cap at kernel entry: `launch_bounds_min_blocks_per_sm` = 1 makes
    TVM emit __launch_bounds__(384, 1); without it ptxas ignores setmaxnreg (warning C7508).
    Shared memory: a stage is now 48 KiB, so the ring shrinks from 6 to 4 stages (192 KiB); a whole 64x256 staging tile
    per consumer (64 KiB for two) would not fit beside them in the 227 KiB a CTA may use, so each
    consumer stages and stores its rows in two 128-column halves (2 x 16 KiB). Measured on an H100
    (4096^3, one run, interleaved): 3 stages with whole-tile staging 0.973x cuBLAS, 4 stages with
    half-tile staging 1.000x.

    The cluster this step inherits from step 9 still costs on an H100: the same kernel without it
    (CTA tiles 128x256 each loading all of B, no cluster launch) measured 1.00 / 1.00 / 1.02x cuBLAS
    against this step's 0.95 / 1.00 / 0.99x at 2048^3, 4096^3 and 8192x4096x1024 in the same run
    (docs/measurements.md, 2026-11-26). As in step 9, the hardware combines the plain loads of CTAs
    that share a tile better than the multicast does: at 4096^3 the kernel without the cluster sends
    the L2 53% of the sectors it asks for, this one 92%. The course keeps the cluster for the
    Blackwell track's sake and for the diff from step 9. cuBLAS runs this design in 2x1 clusters and
    sends the L2 as few sectors as our kernel without one (ncu, 2048^3 and 4096^3): how is not known.

    Blackwell twin: two MMA warps of one warpgroup each issue a cta_group=2 MMA into their own
    TMEM columns, and two writeback warpgroups each drain one of them, with its own Dsmem and
    named-barrier id. Here each consumer is its own MMA issuer and writeback, and the two share the
    B stage instead of TMEM.
    """
    a_type = tvm.DataType("float16")
    b_type = tvm.DataType("float16")
    d_type = tvm.DataType("float16")
    acc_type = tvm.DataType("float32")

    BLK_M, BLK_N, BLK_K = 128, 256, 64
    CLUSTER = 2  # CTAs per cluster, stacked along M
    B_PART = BLK_N // CLUSTER  # rows of the B tile each CTA loads and multicasts
    MMA_K = 16
    K_TILES = T.ceildiv(K, BLK_K) if False else -(-K // BLK_K)
    NUM_CONSUMERS = 2
    CONSUMER_ROWS = BLK_M // NUM_CONSUMERS  # rows of the CTA tile each consumer owns
    EPI_N = 128  # columns per TMA store: each consumer writes its 64x256 rows in two halves
    SMEM_PER_CTA = 227 * 1024  # the most shared memory one CTA may use (sm_90 and sm_100)
    EPILOGUE_SMEM = NUM_CONSUMERS * CONSUMER_ROWS * EPI_N * 2 + 1024  # two staging tiles, and the barriers
    PIPE_DEPTH = (SMEM_PER_CTA - EPILOGUE_SMEM) // ((BLK_M + BLK_N) * BLK_K * 2)  # the most whole stages that fit
    PRODUCER_REGS, CONSUMER_REGS = 40, 232  # per thread; 128 * (40 + 2 * 232) fits the 64K register file
    EPILOGUE_BAR = 1  # named barrier id of consumer 0; consumer c uses EPILOGUE_BAR + c

    A_layout = mma_shared_layout(a_type, SwizzleMode.SWIZZLE_128B_ATOM, (PIPE_DEPTH, BLK_M, BLK_K))
    B_layout = mma_shared_layout(b_type, SwizzleMode.SWIZZLE_128B_ATOM, (PIPE_DEPTH, BLK_N, BLK_K))
    D_layout = mma_shared_layout(d_type, SwizzleMode.SWIZZLE_128B_ATOM, (NUM_CONSUMERS, CONSUMER_ROWS, EPI_N))
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
        wg_id = T.warpgroup_id([1 + NUM_CONSUMERS])
        warp_id = T.warp_id_in_wg([4])
        lane_id = T.lane_id([32])

        # ---- shared memory: the two barrier rings, then the 128B-swizzled tiles ----
        pool = T.SMEMPool()
        tma2mma = TMABar(pool, PIPE_DEPTH)
        mma2tma = MBarrier(pool, PIPE_DEPTH)
        pool.move_base_to(1024)
        Asmem = pool.alloc((PIPE_DEPTH, BLK_M, BLK_K), a_type, layout=A_layout)
        Bsmem = pool.alloc((PIPE_DEPTH, BLK_N, BLK_K), b_type, layout=B_layout)
        Dsmem = pool.alloc((NUM_CONSUMERS, CONSUMER_ROWS, EPI_N), d_type, layout=D_layout)
        pool.commit()

        # ---- barrier init (thread 0), made visible to both CTAs of the cluster ----
        tma2mma.init(1)
        mma2tma.init(CLUSTER * NUM_CONSUMERS)
        T.ptx.fence.mbarrier_init.release.cluster()
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cluster_sync()

        # ---- tile scheduler over 256x256 cluster tiles: both CTAs of a cluster get the same ----
        tile_scheduler = ClusterPersistentScheduler2D(
            "ts", num_m_tiles=-(-M // (CLUSTER * BLK_M)), num_n_tiles=-(-N // BLK_N),
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
                                          dispatch="tma_explicit", mbar=tma2mma.ptr_to([produce.stage]))
                            # this CTA's half of the B tile, written into both CTAs' stage
                            Tx.copy_async(Bsmem[produce.stage, rank * B_PART:(rank + 1) * B_PART, :],
                                          B[n_st + rank * B_PART:n_st + (rank + 1) * B_PART,
                                            k * BLK_K:(k + 1) * BLK_K],
                                          dispatch="tma_explicit", mbar=tma2mma.ptr_to([produce.stage]),
                                          cta_mask=(1 << CLUSTER) - 1)
                            produce.advance()
                        tile_scheduler.next_tile()
        else:
            # ---- consumer c: wgmma on its rows of full stages, release them, write them back ----
            T.ptx.setmaxnreg.inc.sync.aligned.u32(CONSUMER_REGS)
            consumer = T.meta_var(wg_id - 1)
            acc = T.alloc_local((CONSUMER_ROWS * BLK_N // 128,), acc_type)
            consume = PipelineState(PIPE_DEPTH, 0)
            release = PipelineState(PIPE_DEPTH, 0)  # one K tile behind `consume`: only its stage is used
            desc_a = T.alloc_local((1,), "uint64")
            desc_b = T.alloc_local((1,), "uint64")
            encode_sw128_desc(desc_a[0], Asmem.ptr_to([0, consumer * CONSUMER_ROWS, 0]))
            encode_sw128_desc(desc_b[0], Bsmem.ptr_to([0, 0, 0]))
            while tile_scheduler.valid():
                for k in range(K_TILES):
                    tma2mma.wait(consume.stage, consume.phase)
                    a_offset = T.meta_var(T.Cast("uint64", consume.stage * STAGE_DESC_STEP))
                    b_offset = T.meta_var(T.Cast("uint64", consume.stage * (2 * STAGE_DESC_STEP)))
                    T.ptx.wgmma.fence.sync.aligned()
                    for kk in T.unroll(BLK_K // MMA_K):
                        wgmma_64x256x16(acc, desc_a[0] + a_offset, desc_b[0] + b_offset, kk,
                                        k * (BLK_K // MMA_K) + kk != 0)
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

                # ---- writeback: registers -> fp16 -> Dsmem, then one TMA store ----
                # the previous tile's TMA store must have finished reading Dsmem
                for half in T.unroll(BLK_N // EPI_N):
                    if warp_id == 0:
                        T.ptx.cp.async_.bulk.wait_group.read(0)
                    T.cuda.warpgroup_sync(EPILOGUE_BAR + consumer)
                    for i in T.unroll(EPI_N // 2):
                        Dsmem[consumer, acc_row(0, warp_id, lane_id, i), acc_col(lane_id, i)] = T.cast(
                            acc[half * (EPI_N // 2) + i], d_type)
                    T.ptx.fence.proxy.async_.shared__cta()
                    T.cuda.warpgroup_sync(EPILOGUE_BAR + consumer)
                    if warp_id == 0:
                        if T.cuda.elect_sync():
                            row = T.meta_var(m_st + consumer * CONSUMER_ROWS)
                            for part in T.unroll(EPI_N // 64):
                                col = T.meta_var(n_st + half * EPI_N + part * 64)
                                Tx.copy_async(D[row:row + CONSUMER_ROWS, col:col + 64],
                                              Dsmem[consumer, :, part * 64:(part + 1) * 64], dispatch="tma_explicit")
                            T.ptx.cp.async_.bulk.commit_group()
                tile_scheduler.next_tile()

            # the last TMA store must finish before the CTA (and its shared memory) goes away
            if warp_id == 0:
                T.ptx.cp.async_.bulk.wait_group(0)

        # no CTA leaves while its peer may still arrive on its barriers
        T.cuda.cluster_sync()

    return kernel
