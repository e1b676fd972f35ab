"""Step 7 (Hopper): warp specialization.

The CTA splits into two warpgroups with one job each. The producer warpgroup gives most of its
registers away (setmaxnreg) and one elected thread of it issues every TMA load; the consumer
warpgroup takes those registers and only waits, multiplies and writes back. The two talk through
two rings of mbarriers, one per shared-memory stage: tma2mma[s] ("stage s is full") and
mma2tma[s] ("stage s may be refilled"). The producer runs ahead into the next output tile while
the consumer is still in its epilogue, which is what step 6 could not do.

Expect this step to be only a little faster than step 6 (H100, 4096^3, one run: 441 against
432 TFLOP/s): with two stages and wait_group(0) after every K tile, the consumer still waits for
each load the producer could only start when a stage came free. The roles are in place; step 8
gives them a ring deep enough to run ahead (0.94x cuBLAS).
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
        producer (warpgroup 0, one elected thread): for each K tile, wait until stage s is free,
        then TMA A and B tiles --> Asmem[s], Bsmem[s], completing on tma2mma[s];
        consumer (warpgroup 1, 128 threads): for each K tile, wait until stage s is full -->
        wgmma m64n128k16 x 8 --> accumulator registers; wait_group(0), then release stage s;
        after the last K tile: registers --st.shared--> Dsmem --TMA store--> D.

    Barrier protocol (barriers initialised once per CTA; phases carried across tiles by
    PipelineState, which flips the phase each time the stage index wraps around):
        | barrier       | arrival count | who arrives                          | who waits          | starting phase |
        |---------------|---------------|--------------------------------------|--------------------|----------------|
        | tma2mma[s]    | 1 (each)      | producer's elected thread            | all 128 consumer   | consumer: 0    |
        | s < 2 ("full")|               | (arrive.expect_tx, 32 KiB), then the | threads            |                |
        |               |               | TMA engine's byte count              |                    |                |
        | mma2tma[s]    | 1 (each)      | consumer thread 0, after             | producer's elected | producer: 1    |
        | ("empty")     |               | wgmma.wait_group(0) on stage s       | thread             | (passes at     |
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
    PIPE_DEPTH = 2
    # TODO 7.1: how many registers each role's threads get
    #   The producer warpgroup only issues TMA; the consumer holds the 128x128 fp32 accumulator (128 registers per
    #   thread) and the epilogue. Split the SM's 64K registers between them (128 threads each, one CTA per SM), each
    #   count a multiple of 8 that setmaxnreg accepts; too few for the consumer and ptxas spills it to local memory.
    todo("7.1 how many registers each role's threads get")
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
        #   setmaxnreg (TODOs 7.6 and 7.8) only moves registers when ptxas knows each thread's budget at kernel
        #   entry: ask TVM, with a kernel attribute set right here (T.attr), for launch bounds of one CTA per SM.
        #   Trap: without it everything still builds, but ptxas warns C7508 and drops every setmaxnreg (the
        #   grader looks for USETMAXREG in the SASS).
        todo("7.2 a register cap at launch")
        bx = T.cta_id([sm_count])
        # TODO 7.3: a producer and a consumer warpgroup
        #   The CTA grows to two warpgroups (256 threads): warpgroup 0 will load, warpgroup 1 will multiply
        #   and write back. Same index as before, new extent.
        todo("7.3 a producer and a consumer warpgroup")
        warp_id = T.warp_id_in_wg([4])
        lane_id = T.lane_id([32])

        # ---- shared memory: the two barrier rings, then the 128B-swizzled tiles ----
        pool = T.SMEMPool()
        # TODO 7.4: the full and empty barrier rings
        #   Two rings of PIPE_DEPTH mbarriers from `pool`, before move_base_to, with the classes of
        #   tvm.backend.cuda.lang.pipeline: tma2mma ("stage s is full": completed by the TMA's bytes, so the
        #   class that can arm a byte count) and mma2tma ("stage s may be refilled": a plain arrival).
        #   Keep these two names: the rest of the kernel uses them.
        todo("7.4 the full and empty barrier rings")
        pool.move_base_to(1024)
        Asmem = pool.alloc((PIPE_DEPTH, BLK_M, BLK_K), a_type, layout=A_layout)
        Bsmem = pool.alloc((PIPE_DEPTH, BLK_N, BLK_K), b_type, layout=B_layout)
        Dsmem = pool.alloc((BLK_M, BLK_N), d_type, layout=D_layout)
        pool.commit()

        # ---- barrier init (thread 0), made visible to every thread and to the async proxy ----
        # TODO 7.5: arrival counts of the two rings
        #   Each ring's init takes the number of arrivals that completes one phase of every stage: who
        #   arrives on tma2mma per K tile (the bytes are counted separately), and on mma2tma (TODO 7.9)?
        #   Keep the init here, outside the role branches (it runs on thread 0 only). Trap: a count above
        #   the arrivals per phase hangs; below it, a stage is refilled while it is still being read.
        todo("7.5 arrival counts of the two rings")
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
            # TODO 7.6: the producer gives its registers away
            #   One thread of this warpgroup needs a few dozen registers; the consumer's 128 accumulators need
            #   about 200. Lower this warpgroup's per-thread cap to PRODUCER_REGS (setmaxnreg, the decreasing
            #   form). All 128 threads of the warpgroup execute it (.sync.aligned), before any branch on the warp.
            todo("7.6 the producer gives its registers away")
            # TODO 7.7: one producer thread fills free stages, tile after tile
            #   One elected thread of warp 0 walks every tile the scheduler gives (valid / next_tile) and every
            #   K tile of it, with a PipelineState(PIPE_DEPTH, <start phase>) for its stage and phase. Per K tile:
            #   wait on mma2tma until the stage is empty; arm tma2mma there with TMA_BYTES (TMABar.arrive with a
            #   byte count); TMA the A and B tiles into that stage, completing on that barrier; advance.
            #   Traps: the producer starts on phase 1 (a fresh barrier passes a wait for phase 1 at once: every
            #   stage starts empty) and the consumer on 0; the same start on both sides hangs. The slot is the
            #   state's stage, not k % PIPE_DEPTH: the ring runs on across tiles.
            todo("7.7 one producer thread fills free stages, tile after tile")
        else:
            # ---- consumer: wgmma on full stages, release them, write the tile back ----
            # TODO 7.8: the consumer's registers, phase and descriptors
            #   Raise this warpgroup's cap to CONSUMER_REGS (setmaxnreg, the increasing form), then: its own
            #   PipelineState, starting on the phase that tma2mma completes first; the 128x128 fp32 accumulator
            #   (128 registers a thread); ONE descriptor pair, for stage 0. The stage is a runtime value now, so
            #   the descriptor of stage s is stage 0's plus s * STAGE_DESC_STEP (kernel_helpers.hopper) rather
            #   than an array indexed by an unrolled constant.
            todo("7.8 the consumer's registers, phase and descriptors")
            while tile_scheduler.valid():
                # TODO 7.9: wait for a full stage, multiply it, release it
                #   For each K tile of the tile (the producer's trip count exactly, or one side waits forever): all
                #   128 threads wait on tma2mma at the state's stage and phase; step 6's wgmma sequence on that
                #   stage's descriptors (offset as a uint64); once wait_group(0) says the wgmmas have read the stage,
                #   ONE thread arrives on mma2tma there (as many arrivals as its init count); advance the state.
                #   Trap: a release before the wait_group lets the producer overwrite operands a wgmma still reads.
                todo("7.9 wait for a full stage, multiply it, release it")

                # ---- writeback: registers -> fp16 -> Dsmem, then one TMA store ----
                # the previous tile's TMA store must have finished reading Dsmem
                # TODO 7.10: step 6's writeback, synchronised among the consumer's threads only
                #   The same four parts as step 6's writeback (TODOs 6.4 and 6.5): wait until the previous tile's
                #   store has read Dsmem, write the fp16 fragments into Dsmem, make them visible to the async proxy,
                #   and have one thread issue and commit the TMA store. What changes is every CTA-wide barrier in it:
                #   the producer warpgroup never reaches them, so they would hang. Sync only the consumer's 128
                #   threads, on the named barrier EPILOGUE_BAR (T.cuda's warpgroup sync; id 0 is the CTA-wide one).
                todo("7.10 step 6's writeback, synchronised among the consumer's threads only")
                tile_scheduler.next_tile()

            # the last TMA store must finish before the CTA (and its shared memory) goes away
            if warp_id == 0:
                T.ptx.cp.async_.bulk.wait_group(0)

    return kernel
