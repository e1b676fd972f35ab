"""Step 9 (Hopper): a 2-CTA cluster that multicasts the shared operand.

Two CTAs of one cluster compute vertically adjacent output tiles (rows m and m + 128 of a 256x128
cluster tile), so they need the same B tile. Each CTA loads its own A tile and half of the B
tile, and the TMA multicasts that half into the shared memory of both CTAs: B crosses from L2
once per cluster instead of once per CTA. Because a CTA's stage is now filled partly by its peer,
a stage may be refilled only when the consumers of BOTH CTAs have released it, so the empty
barriers count arrivals from across the cluster.
"""

import tvm
from tvm.backend.cuda.lang.pipeline import MBarrier, PipelineState, TMABar
from tvm.backend.cuda.lang.tile_scheduler import ClusterPersistentScheduler2D
from tvm.backend.cuda.tile_primitive.tma_utils import SwizzleMode, mma_shared_layout
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

from kernel_helpers.hopper import STAGE_DESC_STEP, acc_col, acc_row, encode_sw128_desc, wgmma_128x128x16


def hgemm_v9(M, N, K, sm_count):
    """D = A @ B^T with sm_count / 2 persistent clusters of 2 CTAs (producer + consumer warpgroups).

    Data path (per cluster tile (m_idx, n_idx) from the scheduler; CTA rank r in {0, 1} of the
    cluster owns output rows m_st = 256*m_idx + 128*r, columns n_st = 128*n_idx):
        producer (warpgroup 0, one elected thread): for each K tile, wait until stage s is free
        in both CTAs, then TMA its A tile --> its Asmem[s], and rows 64r..64r+63 of the B tile
        --> Bsmem[s, 64r:64r+64] of BOTH CTAs (multicast, cta_mask 0b11); every copy completes
        on the tma2mma[s] of the CTA it writes to, so each CTA's tma2mma[s] counts its own A
        (16 KiB) + both B halves (2 x 8 KiB) = 32 KiB, as before;
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
        | s < 6 ("full")|               | (arrive.expect_tx, 32 KiB), then the | threads            |                |
        |               |               | TMA engine's byte count              |                    |                |
        | mma2tma[s]    | 2 (each)      | consumer thread 0 of EACH CTA of the | producer's elected | producer: 1    |
        | ("empty")     |               | cluster (one local, one remote       | thread             | (passes at     |
        |               |               | arrive), after the wait_group that   |                    |                |
        |               |               | retires stage s's group              |                    |                |
        |               |               |                                      |                    | once: stages   |
        |               |               |                                      |                    | start empty)   |
        | named bar 1   | 128 threads   | the consumer warpgroup (bar.sync)    | the same           | -              |
        | (epilogue)    |               | before / after writing Dsmem         |                    |                |
    | cluster barrier | 256 threads x 2 CTAs | everyone, after barrier init and at the end      |
    The first cluster sync makes each CTA's initialised barriers visible to its peer before any
    multicast or remote arrive reaches them; the last keeps a CTA alive until its peer can no
    longer arrive on its barriers. The peer's B half may land on tma2mma[s] before this CTA's
    producer has armed it with expect_tx: the transaction count may run ahead of the arrival,
    and the phase cannot complete until that one arrival comes.
    The producer and the consumer walk the same tiles and the same K tiles, so both rings see the
    same number of uses: a different trip count on either side is a hang. No consumer warp can be
    lapped on tma2mma[s]: its next phase needs a refill, which needs mma2tma[s], which needs the
    warpgroup-wide wgmma that every consumer warp issues after its wait.
    Epilogue hand-off: before a tile's Dsmem writes, consumer warp 0 waits until the previous TMA
    store has read Dsmem (cp.async.bulk.wait_group.read 0), then named barrier 1.

    On an H100 this step does not pay: 0.94-0.99x step 8's speed over the bench shapes
    (docs/ladder-h100.md). ncu says why (docs/measurements.md, 2026-11-26): when CTAs load the same
    tile at about the same time, the hardware already combines their loads, so step 8's CTAs send
    the L2 only 54% of the sectors they ask for at 4096^3; the multicast loads are combined far less
    (95%), and step 9 sends the L2 33% more sectors than step 8 for 25% fewer bytes asked. No tile
    order or launch shape tried changes that. The same holds for step 10: without the cluster it is
    as fast or faster at every bench shape. The cluster is taught here for its protocol (a ring
    shared by two CTAs), which the Blackwell track needs: there one cta_group=2 MMA spans both CTAs.

    setmaxnreg needs a register cap at kernel entry: `launch_bounds_min_blocks_per_sm` = 1 makes
    TVM emit __launch_bounds__(256, 1); without it ptxas ignores setmaxnreg (warning C7508).

    Blackwell twin: its 2-CTA cluster goes further. With cta_group=2 one MMA instruction, issued
    by CTA 0, computes a 256x256 tile from both CTAs' shared memory (A from each, B from each),
    the TMA loads of both CTAs complete on CTA 0's barrier, and the MMA's commit is multicast to
    both CTAs. Hopper has no cross-CTA MMA: each CTA multiplies its own tile, and what the
    cluster shares is the load (TMA multicast) and the release of a stage (remote arrive).
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
        # >>> TODO 9.1: this CTA's rank in the cluster
        rank = T.cta_id_in_cluster([CLUSTER])
        # <<< TODO 9.1
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

        # ---- barrier init (thread 0), made visible to both CTAs of the cluster ----
        tma2mma.init(1)
        # >>> TODO 9.2: the empty ring's count
        mma2tma.init(CLUSTER)
        # <<< TODO 9.2
        T.ptx.fence.mbarrier_init.release.cluster()
        T.ptx.fence.proxy.async_.shared__cta()
        # >>> TODO 9.3: publish the barriers to the whole cluster
        T.cuda.cluster_sync()
        # <<< TODO 9.3

        # ---- tile scheduler over 256x128 cluster tiles: both CTAs of a cluster get the same ----
        # >>> TODO 9.4: the scheduler over cluster tiles and this CTA's rows
        tile_scheduler = ClusterPersistentScheduler2D(
            "ts", num_m_tiles=M // (CLUSTER * BLK_M), num_n_tiles=N // BLK_N,
            l2_group_size=8, num_clusters=sm_count // CLUSTER)
        tile_scheduler.init(bx // CLUSTER)
        m_st = T.meta_var(tile_scheduler.m_idx * (CLUSTER * BLK_M) + rank * BLK_M)
        # <<< TODO 9.4
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
                            # >>> TODO 9.5: this CTA's half of B, multicast to both CTAs
                            # this CTA's half of the B tile, written into both CTAs' stage
                            Tx.copy_async(Bsmem[produce.stage, rank * B_PART:(rank + 1) * B_PART, :],
                                          B[n_st + rank * B_PART:n_st + (rank + 1) * B_PART,
                                            k * BLK_K:(k + 1) * BLK_K],
                                          dispatch="tma_auto", mbar=tma2mma.ptr_to([produce.stage]),
                                          cta_mask=(1 << CLUSTER) - 1)
                            # <<< TODO 9.5
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
                                # >>> TODO 9.6: release the previous stage
                                for peer in T.unroll(CLUSTER):
                                    mma2tma.arrive(release.stage, remote=peer)
                                # <<< TODO 9.6
                        release.advance()
                    consume.advance()
                T.ptx.wgmma.wait_group.sync.aligned(0)
                if warp_id == 0:
                    if lane_id == 0:
                        # >>> TODO 9.7: release the last stage
                        for peer in T.unroll(CLUSTER):
                            mma2tma.arrive(release.stage, remote=peer)
                        # <<< TODO 9.7
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

        # no CTA leaves while its peer may still arrive on its barriers
        # >>> TODO 9.8: no CTA leaves while its peer may still arrive
        T.cuda.cluster_sync()
        # <<< TODO 9.8

    return kernel
