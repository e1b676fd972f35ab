"""Step 5 (Blackwell): a two-stage software pipeline.

Shared memory holds PIPE_DEPTH = 2 stages of the A and B tiles, each stage with its own TMA
barrier and its own phase bit. Two K tiles are loaded before the first MMA, and a stage is
refilled with K tile k + 2 as soon as the MMA of K tile k has released it (its commit arrived
on mma_bar), so the TMA of the next K tile is in flight while the tensor core works on this one.
"""

import tvm
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.backend.cuda.tile_primitive.tma_utils import mma_shared_layout, SwizzleMode
from tvm.tirx.layout import TileLayout, S, tid_in_wg as axis_tid_in_wg

from kernel_helpers.todo import todo


def hgemm_v5(M, N, K):
    """D = A @ B^T for M, N multiples of 128, K a multiple of 64 (fp16 in, fp32 in TMEM, fp16 out).

    Grid: (M / 128) x (N / 128) CTAs of 128 threads; CTA (bx, by) owns D[bx*128 : +128, by*128 : +128].
    Data path in each CTA (K tile k lives in stage s = k % PIPE_DEPTH):
        A, B (global) --2 TMA loads, completing on tma_bar[s]--> Asmem[s], Bsmem[s] (128B swizzle)
        --tcgen05.mma (accumulate = k != 0), completing on mma_bar--> accumulator in TMEM
        (128 lanes x 128 fp32 columns). As in step 4, one elected thread of warp 0 runs the K loop
        and waits inside it; the other threads join at the cta_sync after the loop.
    Then once, as in step 4: TMEM --tcgen05.ld + wait::ld--> registers (thread t holds row t)
        --fp16--> Dsmem --fence.proxy.async + cta_sync; TMA store by one thread, commit_group and
        wait_group 0--> D (global).

    Barrier protocol (your first task: fill in the ? cells, then write the code to match):
        | barrier    | arrival count | who arrives                                | who waits   | starting phase        |
        |------------|---------------|--------------------------------------------|-------------|-----------------------|
        | tma_bar[s] | ?             | ?                                          | ?           | ?                     |
        | ("stage s  |               |                                            |             |                       |
        |  landed")  |               |                                            |             |                       |
        | mma_bar    | 1             | tcgen05.commit from the thread that issued | the elected | 0; flips after every  |
        |            |               | the MMA (mbarrier::arrive::one), once per  | thread only | K tile (phase_mma ^ 1)|
        |            |               | K tile                                     |             |                       |
        Questions the table and the code must answer: how many K tiles are in flight before the
        first MMA? When may stage s be loaded again, and with which K tile? With an odd number of
        K tiles, are the stages used the same number of times, and what does that mean for the
        phase bits? Which loads must never be issued?

    Hopper twin: exercises on an H100 the same tma_bar[s] ring (prefetch, per-stage phases,
    refill rule, odd K tile counts) and the TMA store epilogue; its MMA completion is
    `wgmma.wait_group`, so `tcgen05.commit` onto mma_bar and TMEM are exercised only by
    building this file for sm_100a.
    """
    a_type = tvm.DataType("float16")
    d_type = tvm.DataType("float16")
    acc_type = tvm.DataType("float32")
    BLK_M, BLK_N, BLK_K = 128, 128, 64
    K_TILES = K // BLK_K
    TILE_BYTES = (BLK_M * BLK_K + BLK_N * BLK_K) * 2  # what the two TMA loads deliver per K tile
    PIPE_DEPTH = 2

    # TODO 5.1: the ring's shape: its prologue, its trips and its stage layouts
    #   PRE_NUM: the K tiles loaded before the K loop starts; RING: the loop's trips through the PIPE_DEPTH
    #   stages (TODO 5.8 walks them, stage by stage, skipping K tiles past K_TILES). Any K is a multiple of
    #   BLK_K, one K tile included. A_layout and B_layout: the 128B-swizzled MMA layouts of step 4 for A and B
    #   in PIPE_DEPTH stages, each stage a whole tile on a 1 KiB boundary. API: mma_shared_layout.
    todo("5.1 the ring's shape: its prologue, its trips and its stage layouts")
    D_layout = mma_shared_layout(d_type, SwizzleMode.SWIZZLE_128B_ATOM, (BLK_M, BLK_N))

    # fmt: off
    @T.prim_func
    def kernel(
        A: T.Buffer((M, K), "float16"),
        B: T.Buffer((N, K), "float16"),
        D: T.Buffer((M, N), "float16"),
    ):
        T.device_entry()
        bx, by = T.cta_id([M // BLK_M, N // BLK_N])
        wg_id = T.warpgroup_id([1])
        warp_id = T.warp_id_in_wg([4])
        lane_id = T.lane_id([32])

        # ---- shared memory: TMEM address slot + barriers, then the tiles at 1 KiB ----
        pool = T.SMEMPool()
        tmem_pool = T.TMEMPool(pool, total_cols=512, cta_group=1)  # takes the address slot
        mma_bar = pool.alloc((1,), "uint64", align=8)
        # TODO 5.2: one TMA barrier per stage
        #   tma_bar: the barriers the stages' loads complete on, from `pool` like mma_bar, one 8-byte mbarrier per
        #   stage.
        todo("5.2 one TMA barrier per stage")
        pool.move_base_to(1024)  # 128B-swizzled tiles must start on a 1024-byte boundary
        # TODO 5.3: the A and B stage buffers
        #   Asmem and Bsmem with the stage dimension first, using the layouts of TODO 5.1, from `pool`.
        todo("5.3 the A and B stage buffers")
        Dsmem = pool.alloc((BLK_M, BLK_N), d_type, layout=D_layout)
        pool.commit()

        # ---- TMEM: warp 0 allocates all 512 columns; the accumulator is columns [0, 128) ----
        tmem_pool.commit()
        tmem = tmem_pool.alloc((128, 512), "float32")

        # ---- barrier init (one thread), made visible to every thread and to the async proxy ----
        if warp_id == 0:
            if lane_id == 0:
                # TODO 5.4: initialise every stage's barrier
                #   This thread (warp 0, lane 0, as in step 4) initialises every stage's tma_bar with its arrival
                #   count per phase from your table. The stage index must be a compile-time constant.
                todo("5.4 initialise every stage's barrier")
                T.ptx.mbarrier.init.shared.b64(mma_bar.ptr_to([0]), T.uint32(1))
        T.ptx.fence.mbarrier_init.release.cluster()
        T.ptx.fence.proxy.async_.shared__cta()
        T.ptx.tcgen05.fence__before_thread_sync()
        T.cuda.cta_sync()
        T.ptx.tcgen05.fence__after_thread_sync()
        # TMEMPool addresses columns from 0: a 512-column allocation always starts there.
        T.cuda.trap_when_assert_failed(tmem_pool.addr == T.uint32(0))

        m_st = T.meta_var(bx * BLK_M)
        n_st = T.meta_var(by * BLK_N)
        phase_mma: T.int32
        phase_mma = 0
        # TODO 5.5: the phase bits of the stage barriers
        #   phase_tma: the phase bits the waiter on tma_bar keeps, an int32 local array indexed by stage
        #   (T.alloc_local), each starting at its barrier's initial phase. Whether one bit could serve all stages is a
        #   question your table answers.
        todo("5.5 the phase bits of the stage barriers")

        # load K tile k into stage `stage` through the TMA unit
        @T.inline
        def tma_load(stage, k):
            # TODO 5.6: load K tile k into stage `stage`
            #   tma_load(stage, k): step 4's load of one K tile, without the wait, aimed at stage `stage` of Asmem,
            #   Bsmem and tma_bar, for K tile k (columns k * BLK_K onwards). The MMA side waits on tma_bar[stage]
            #   later.
            todo("5.6 load K tile k into stage `stage`")

        # ---- the K loop of one output tile, run by one elected thread of warp 0 alone ----
        @T.inline
        def mma_tile():
            if warp_id == 0:
                if T.cuda.elect_sync():
                    # TODO 5.7: prologue: fill the stages before the first MMA
                    #   Before the first MMA, the loads of the first K tiles are in flight, one per stage, as many as
                    #   exist (PRE_NUM), issued through tma_load.
                    todo("5.7 prologue: fill the stages before the first MMA")

                    # TODO 5.8: the stage ring: wait for stage s, MMA on it, refill it
                    #   The K loop over the stages: every K tile k (in stage s = k % PIPE_DEPTH) is waited for on its
                    #   stage's barrier, multiplied into the accumulator (step 4's MMA and commit on stage s, and the
                    #   mma_bar wait), and the stage is refilled with a later K tile as soon as it is free, so that a
                    #   load is in flight while the tensor core works. RING trips of PIPE_DEPTH stages cover the K
                    #   tiles; the last trip may be partial. The stage and phase index must be compile-time constants
                    #   (unroll the stage loop). API family: T.serial, T.unroll, T.meta_var, T.cuda.mbarrier_wait, the
                    #   tcgen05 fences, tma_load.
                    todo("5.8 the stage ring: wait for stage s, MMA on it, refill it")
                    T.ptx.tcgen05.fence__before_thread_sync()

            # the other threads join here: the accumulator in TMEM is complete
            T.cuda.cta_sync()
            T.ptx.tcgen05.fence__after_thread_sync()

        # ---- writeback: TMEM -> registers (thread t gets row t) -> Dsmem -> TMA store -> D ----
        @T.inline
        def store_tile():
            Dreg = T.alloc_local((BLK_N,), acc_type)
            Dreg_f16 = T.alloc_local((BLK_N,), d_type)
            Dreg_wg = Dreg.view(128, BLK_N, layout=TileLayout(S[(128, BLK_N) : (1@axis_tid_in_wg, 1)]))
            Tx.wg.copy_async(Dreg_wg[:, :], tmem[:, 0:BLK_N])
            T.ptx.tcgen05.wait__ld.sync.aligned()
            T.ptx.tcgen05.fence__before_thread_sync()
            Tx.cast(Dreg_f16[:], Dreg[:])
            Tx.copy(Dsmem[warp_id * 32 + lane_id, :], Dreg_f16[:])
            # the TMA store reads Dsmem through the async proxy: fence, then sync
            T.ptx.fence.proxy.async_.shared__cta()
            T.cuda.cta_sync()
            if warp_id == 0:
                if T.cuda.elect_sync():
                    Tx.copy_async(D[m_st:m_st + BLK_M, n_st:n_st + BLK_N], Dsmem[:, :],
                                  dispatch="tma_auto")
                    T.ptx.cp.async_.bulk.commit_group()

        mma_tile()
        store_tile()

        # ---- teardown: the store has completed and every TMEM read is done; warp 0 frees TMEM ----
        if warp_id == 0:
            T.ptx.cp.async_.bulk.wait_group(0)
        T.cuda.cta_sync()
        tmem_pool.dealloc()
    # fmt: on

    return kernel
