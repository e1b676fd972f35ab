"""Step 7 (Hopper): warp specialization.

The CTA splits into two warpgroups with one job each. The producer warpgroup gives most of its
registers away (setmaxnreg) and issues every TMA load; the consumer warpgroup takes those
registers and only waits, multiplies and writes back. The two talk through two rings of
mbarriers, one per shared-memory stage: tma2mma[s] ("stage s is full") and mma2tma[s] ("stage s
may be refilled"). The producer runs ahead into the next output tile while the consumer is still
in its epilogue, and the consumer does not wait for its own wgmmas after every K tile: it keeps
work in flight and hands a stage back once it is known to be read.

The grid is one CTA per SM now (the ring fills an SM's shared memory), so nothing else hides a
stall of the consumer: measured on an H100, these roles with a consumer that waits for every
wgmma group ran well below step 6 even with six stages (0.75-0.85x cuBLAS against 0.91-0.96x).
"""

import tvm
from tvm.backend.cuda.lang.pipeline import MBarrier, PipelineState, TMABar
from tvm.backend.cuda.lang.tile_scheduler import ClusterPersistentScheduler2D
from tvm.backend.cuda.tile_primitive.tma_utils import SwizzleMode, mma_shared_layout
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

from kernel_helpers.hopper import STAGE_DESC_STEP, acc_col, acc_row, encode_sw128_desc, wgmma_128x128x16

from kernel_helpers.todo import todo


def hgemm_v7(M, N, K, sm_count):
    """D = A @ B^T with sm_count persistent CTAs of a producer and a consumer warpgroup.

    Data path (per CTA, per output tile (m_idx, n_idx) from the scheduler):
        producer (warpgroup 0): for each K tile, wait until stage s is free, then TMA A and B
        tiles --> Asmem[s], Bsmem[s], completing on tma2mma[s];
        consumer (warpgroup 1, 128 threads): for each K tile, wait until stage s is full -->
        wgmma m64n128k16 x 8 --> accumulator registers; release each stage once its group
        is known to be done;
        after the last K tile: registers --st.shared--> Dsmem --TMA store--> D.

    Barrier protocol (barriers initialised once per CTA; phases carried across tiles by
    PipelineState, which flips the phase each time the stage index wraps around; your first
    task: fill in the ? cells, then write the code):
        | barrier                 | arrival count | who arrives | who waits | starting phase |
        |-------------------------|---------------|-------------|-----------|----------------|
        | tma2mma[s]              | ?             | ?           | ?         | ?              |
        | ("stage s is full")     |               |             |           |                |
        | mma2tma[s]              | ?             | ?           | ?         | ?              |
        | ("stage s may be        |               |             |           |                |
        | refilled": "empty")     |               |             |           |                |
        | named bar EPILOGUE_BAR  | ?             | ?           | ?         | -              |
        | (the consumer's         |               |             |           |                |
        | epilogue)               |               |             |           |                |
    Questions to answer first: a fresh barrier is in phase 0; which phase must the producer's
    first wait on an empty stage name so that it passes, and which the consumer's? When has the
    consumer stopped reading a stage? Can a consumer warp be lapped on tma2mma[s]? How many
    times does each side go around the ring per tile? Which threads reach the epilogue's
    barriers, now that the producer never does?

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
    # TODO 7.1: the ring's depth and each role's registers
    #   PIPE_DEPTH: the stages of both rings. The consumer hands a stage back only once the wgmma group
    #   that read it is known to be done (TODO 7.9); with one CTA per SM nothing else hides a load the
    #   producer could not start early enough. (The depth that fills shared memory is step 8's idea.)
    #   PRODUCER_REGS and CONSUMER_REGS: the per-thread register caps setmaxnreg gives each role (TODOs
    #   7.6 and 7.8). The producer only issues TMA; the consumer holds the 128x128 fp32 accumulator (128
    #   registers a thread) and the epilogue's temporaries. Both warpgroups share one SM's 64K registers
    #   (one CTA per SM); setmaxnreg takes multiples of 8 in 24..256, and a consumer cap below what its
    #   code needs makes ptxas spill to local memory.
    todo("7.1 the ring's depth and each role's registers")
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
        # TODO 7.2: a register cap at launch
        #   setmaxnreg (TODOs 7.6 and 7.8) moves registers only when ptxas knows each thread's budget at
        #   kernel entry: ask TVM for launch bounds with a kernel attribute set right here (T.attr; the key is
        #   in docs/tirx-facts.md). Without it everything still builds, but ptxas warns C7508 and ignores
        #   every setmaxnreg (the grade's USETMAXREG check fails).
        todo("7.2 a register cap at launch")
        bx = T.cta_id([sm_count])
        # TODO 7.3: a producer and a consumer warpgroup
        #   wg_id: the CTA grows from one warpgroup to two; the code below takes wg_id == 0 as the producer
        #   and the other warpgroup as the consumer.
        todo("7.3 a producer and a consumer warpgroup")
        warp_id = T.warp_id_in_wg([4])
        lane_id = T.lane_id([32])

        # ---- shared memory: the two barrier rings, then the 128B-swizzled tiles ----
        pool = T.SMEMPool()
        # TODO 7.4: the full and empty barrier rings
        #   tma2mma and mma2tma (the rest of the kernel uses these names): PIPE_DEPTH barriers each, from
        #   `pool` before move_base_to, with the classes of tvm.backend.cuda.lang.pipeline
        #   (docs/tirx-facts.md). Each class is completed a different way: pick by your table's "who arrives".
        todo("7.4 the full and empty barrier rings")
        pool.move_base_to(1024)
        Asmem = pool.alloc((PIPE_DEPTH, BLK_M, BLK_K), a_type, layout=A_layout)
        Bsmem = pool.alloc((PIPE_DEPTH, BLK_N, BLK_K), b_type, layout=B_layout)
        Dsmem = pool.alloc((BLK_M, BLK_N), d_type, layout=D_layout)
        pool.commit()

        # ---- barrier init, visible to every thread and to the TMA unit before first use ----
        # TODO 7.5: arrival counts of the two rings
        #   Each ring's init takes your table's arrival count. init runs on thread 0 of the CTA only, so it
        #   stays here, outside the role branches, before the fences and the CTA barrier that publish it. A
        #   count that differs from the arrivals one phase receives either hangs or releases a stage early.
        todo("7.5 arrival counts of the two rings")
        T.ptx.fence.mbarrier_init.release.cluster()
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cta_sync()

        # ---- tile scheduler: which output tiles this CTA computes, in which order ----
        tile_scheduler = ClusterPersistentScheduler2D(
            "ts", num_m_tiles=M // BLK_M, num_n_tiles=N // BLK_N,
            l2_group_size=8, num_clusters=sm_count)
        tile_scheduler.init(bx)
        m_st = T.meta_var(tile_scheduler.m_idx * BLK_M)
        n_st = T.meta_var(tile_scheduler.n_idx * BLK_N)

        if wg_id == 0:
            # ---- producer: registers go to the consumer; it issues every TMA ----
            # TODO 7.6: the producer gives its registers away
            #   Lower this warpgroup's per-thread register cap to PRODUCER_REGS (T.ptx.setmaxnreg.*). The
            #   instruction is .sync.aligned: every thread of the warpgroup executes it, together.
            todo("7.6 the producer gives its registers away")
            # TODO 7.7: one producer thread fills free stages, tile after tile
            #   The producer walks every tile the scheduler gives this CTA (valid / next_tile) and every K tile of
            #   it, tracking its ring position with a PipelineState (start: your table). Per K tile: the state's
            #   stage must be empty before it is loaded; then step 5's load into that stage (TMA_BYTES announced
            #   on tma2mma, the A and B copies completing there); the state advances once. The ring runs on
            #   across tiles, so the stage is the state's, not a function of k. From the thread your table names.
            todo("7.7 one producer thread fills free stages, tile after tile")
        else:
            # ---- consumer: wgmma on full stages, release them, write the tile back ----
            # TODO 7.8: the consumer's registers, ring state and descriptors
            #   Raise this warpgroup's cap to CONSUMER_REGS (setmaxnreg). Then what your K loop (TODO 7.9) needs
            #   to know where it is in the ring, for the stages it waits on and for those it hands back (your
            #   table; PipelineState), the 128x128 fp32 accumulator and the wgmma descriptors. The stage is a
            #   runtime value now, and a descriptor array indexed by a runtime value lives in local memory.
            todo("7.8 the consumer's registers, ring state and descriptors")
            while tile_scheduler.valid():
                # TODO 7.9: the K loop: multiply full stages, hand back the ones that are read
                #   For each K tile of this tile (the producer's trip count, or one side waits forever): step 6's
                #   wgmma sequence on a full stage. A stage may go back to the producer (mma2tma, the arrivals of
                #   your table) only once no wgmma still reads it; the consumer must not stall the tensor cores
                #   waiting for its own wgmmas either (wgmma.commit_group / wait_group). Every stage is handed
                #   back exactly once: a stage released while a wgmma reads it gives wrong results, one never
                #   released hangs the producer.
                todo("7.9 the K loop: multiply full stages, hand back the ones that are read")
                # TODO 7.10: before the epilogue
                #   The epilogue reads the accumulator, and the producer needs every stage of this tile back: make
                #   both true here for whatever your K loop left undone.
                todo("7.10 before the epilogue")

                # ---- writeback: registers -> fp16 -> Dsmem, then one TMA store ----
                # the previous tile's TMA store must have finished reading Dsmem
                # TODO 7.11: step 6's writeback, synchronised among the consumer's threads only
                #   The four parts of step 6's writeback (the staging wait, the fragments into Dsmem, the proxy
                #   fence, one TMA store and its commit), but the producer warpgroup never comes here: a CTA-wide
                #   barrier would wait for it forever. Synchronise the consumer's threads only, on the named barrier
                #   EPILOGUE_BAR (T.cuda.warpgroup_sync).
                todo("7.11 step 6's writeback, synchronised among the consumer's threads only")
                tile_scheduler.next_tile()

            # the last TMA store must finish before the CTA (and its shared memory) goes away
            if warp_id == 0:
                T.ptx.cp.async_.bulk.wait_group(0)

    return kernel
