"""Step 11 (Hopper): ragged edges.

Step 10 takes only M and N that are multiples of its 256x256 cluster tile. Make it take any M >= 1,
and N and K multiples of 8 (a TMA descriptor's rows must be a multiple of 16 bytes): 1000 tokens, 77
rows, K = 8. The kernel is step 10's solution; the TODOs are the places where a shape that is not a
multiple of the tile matters. `make grade STEP=11` runs it at ragged shapes (1x8x8, 7x264x72, primes).
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


def hgemm_v11(M, N, K, sm_count):
    """D = A @ B^T for any M >= 1 and N, K multiples of 8, as step 10 computes it for tile multiples.

    Contract: the output D is written everywhere inside the matrix and nowhere outside it; every CTA of
    a cluster takes part in every barrier and multicast of its tiles, also a CTA whose rows lie wholly
    past M; at shapes that are multiples of the tile the kernel is as fast as step 10. Step 10's
    barrier protocol does not change.
    """
    a_type = tvm.DataType("float16")
    b_type = tvm.DataType("float16")
    d_type = tvm.DataType("float16")
    acc_type = tvm.DataType("float32")

    BLK_M, BLK_N, BLK_K = 128, 256, 64
    CLUSTER = 2  # CTAs per cluster, stacked along M
    B_PART = BLK_N // CLUSTER  # rows of the B tile each CTA loads and multicasts
    MMA_K = 16
    # TODO 11.1: K tiles for any K
    #   K_TILES: how many K tiles of BLK_K columns the K loops walk when K is any multiple of 8. Every column
    #   of K must be in some K tile; what the last one holds past K must add nothing to the products.
    todo("11.1 K tiles for any K")
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
        # TODO 11.2: cluster tiles for any M and N
        #   tile_scheduler: step 10's scheduler over the cluster tiles that cover the whole of D when M and N
        #   are not multiples of the cluster tile (same L2 group and cluster count). Both CTAs of a cluster
        #   take part in every tile, also one whose rows lie wholly past M.
        todo("11.2 cluster tiles for any M and N")
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
                            # TODO 11.3: loads that may hang over the matrix
                            #   Step 10's two TMA loads (A into this CTA's stage, this CTA's half of B multicast
                            #   into both), for a box that may reach past M, N or K. The TMA engine reads what is
                            #   inside the matrix and fills the rest with zeros, given a tensor map that knows the
                            #   matrix's true extents. tma2mma keeps its byte count.
                            #   API: Tx.copy_async's dispatch (docs/tirx-facts.md).
                            todo("11.3 loads that may hang over the matrix")
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
                            # TODO 11.4: stores clipped at the matrix's edge
                            #   This consumer's staged rows (Dsmem[consumer], EPI_N columns) to D at (row, the
                            #   half's first column), as TMA stores the engine clips to D. A box of such a
                            #   store spans at most one 128-byte swizzle row.
                            todo("11.4 stores clipped at the matrix's edge")
                            T.ptx.cp.async_.bulk.commit_group()
                tile_scheduler.next_tile()

            # the last TMA store must finish before the CTA (and its shared memory) goes away
            if warp_id == 0:
                T.ptx.cp.async_.bulk.wait_group(0)

        # no CTA leaves while its peer may still arrive on its barriers
        T.cuda.cluster_sync()

    return kernel
