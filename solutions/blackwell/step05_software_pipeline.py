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


def hgemm_v5(M, N, K):
    """D = A @ B^T for M, N multiples of 128, K a multiple of 64 (fp16 in, fp32 in TMEM, fp16 out).

    Grid: (M / 128) x (N / 128) CTAs of 128 threads; CTA (bx, by) owns D[bx*128 : +128, by*128 : +128].
    Data path in each CTA (stage s = k % 2):
        prefetch: TMA K tiles 0 and 1 (as far as they exist) into stages 0 and 1;
        for each K tile k: wait tma_bar[s] --> tcgen05.mma (accumulate = k != 0) on Asmem[s],
        Bsmem[s] (128B swizzle) --> accumulator in TMEM (128 lanes x 128 fp32 columns);
        tcgen05.commit onto mma_bar; wait mma_bar (stage s is free again) --> TMA of K tile
        k + 2 into stage s. All of it runs in one elected thread of warp 0; the other threads
        join at the cta_sync after the loop.
    Then once: TMEM --tcgen05.ld (Tx.wg.copy_async) + tcgen05.wait::ld--> registers (thread t
        holds row t) --cast to fp16--> Dsmem (128B swizzle) --fence.proxy.async + cta_sync;
        TMA store by one thread, cp.async.bulk.commit_group + wait_group 0--> D (global).

    Barrier protocol:
        | barrier    | arrival count | who arrives                                | who waits   | starting phase        |
        |------------|---------------|--------------------------------------------|-------------|-----------------------|
        | tma_bar[s] | 1 (+ 32768    | the elected thread: mbarrier.arrive.       | the elected | 0 for each stage;     |
        | s = 0, 1   | tx bytes)     | expect_tx(A + B tile bytes); the two TMA   | thread only | phase_tma[s] flips    |
        |            |               | loads complete_tx their bytes              |             | each time stage s is  |
        |            |               |                                            |             | used                  |
        | mma_bar    | 1             | tcgen05.commit from the thread that issued | the elected | 0; flips after every  |
        |            |               | the MMA (mbarrier::arrive::one), once per  | thread only | K tile (phase_mma ^ 1)|
        |            |               | K tile                                     |             |                       |
        Stage s is refilled only after mma_bar says the MMA that read it has finished. With an
        odd number of K tiles the two stages are used a different number of times, which is why
        each stage keeps its own phase bit.
        Only the thread that drives a barrier's phases waits on it inside the loop: a parity
        wait cannot tell phase n from phase n + 2, so a warp that arrives on nothing could be
        lapped by the elected thread and wait forever. The other threads wait once, at the
        cta_sync after the loop (the elected thread fences with tcgen05.fence::before_thread_sync
        before it), then tcgen05.fence::after_thread_sync before reading TMEM.
        Epilogue: the generic stores to Dsmem are followed by fence.proxy.async.shared::cta and
        cta_sync before the TMA store reads Dsmem; after it, warp 0 waits for its bulk group
        (cp.async.bulk.wait_group 0: only the lane that committed the store has one) before
        the CTA syncs and exits.

    Hopper twin: exercises on an H100 the same tma_bar[s] ring (prefetch, per-stage phases,
    refill rule, odd K tile counts) and the TMA store epilogue; its MMA completion is
    `wgmma.wait_group`, so `tcgen05.commit` onto mma_bar and TMEM are exercised only by
    building this file for sm_100a. The twin lets all 128 threads wait on tma_bar[s] every K
    tile, because there all four warps issue the warpgroup-wide wgmma and stay in step; here
    one thread issues the MMA, so only it waits inside the loop.
    """
    a_type = tvm.DataType("float16")
    d_type = tvm.DataType("float16")
    acc_type = tvm.DataType("float32")
    BLK_M, BLK_N, BLK_K = 128, 128, 64
    K_TILES = K // BLK_K
    TILE_BYTES = (BLK_M * BLK_K + BLK_N * BLK_K) * 2  # what the two TMA loads deliver per K tile
    PIPE_DEPTH = 2

    # >>> TODO 5.1: the ring's shape: its prologue, its trips and its stage layouts
    PRE_NUM = min(PIPE_DEPTH, K_TILES)  # K tiles loaded before the loop starts
    RING = (K_TILES + PIPE_DEPTH - 1) // PIPE_DEPTH  # trips through the stages
    A_layout = mma_shared_layout(a_type, SwizzleMode.SWIZZLE_128B_ATOM, (PIPE_DEPTH, BLK_M, BLK_K))
    B_layout = mma_shared_layout(a_type, SwizzleMode.SWIZZLE_128B_ATOM, (PIPE_DEPTH, BLK_N, BLK_K))
    # <<< TODO 5.1
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
        # >>> TODO 5.2: one TMA barrier per stage
        tma_bar = pool.alloc((PIPE_DEPTH,), "uint64", align=8)
        # <<< TODO 5.2
        pool.move_base_to(1024)  # 128B-swizzled tiles must start on a 1024-byte boundary
        # >>> TODO 5.3: the A and B stage buffers
        Asmem = pool.alloc((PIPE_DEPTH, BLK_M, BLK_K), a_type, layout=A_layout)
        Bsmem = pool.alloc((PIPE_DEPTH, BLK_N, BLK_K), a_type, layout=B_layout)
        # <<< TODO 5.3
        Dsmem = pool.alloc((BLK_M, BLK_N), d_type, layout=D_layout)
        pool.commit()

        # ---- TMEM: warp 0 allocates all 512 columns; the accumulator is columns [0, 128) ----
        tmem_pool.commit()
        tmem = tmem_pool.alloc((128, 512), "float32")

        # ---- barrier init (one thread), made visible to every thread and to the async proxy ----
        if warp_id == 0:
            if lane_id == 0:
                # >>> TODO 5.4: initialise every stage's barrier
                for s in T.unroll(PIPE_DEPTH):
                    T.ptx.mbarrier.init.shared.b64(tma_bar.ptr_to([s]), T.uint32(1))
                # <<< TODO 5.4
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
        # >>> TODO 5.5: the phase bits of the stage barriers
        phase_tma = T.alloc_local((PIPE_DEPTH,), "int32")  # one phase bit per stage
        for s in T.unroll(PIPE_DEPTH):
            phase_tma[s] = 0
        # <<< TODO 5.5

        # one elected thread: arm tma_bar[stage] with the byte count, load K tile k into stage
        @T.inline
        def tma_load(stage, k):
            # >>> TODO 5.6: load K tile k into stage `stage`
            T.ptx.mbarrier.arrive.expect_tx.shared.b64(tma_bar.ptr_to([stage]), T.uint32(TILE_BYTES))
            Tx.copy_async(Asmem[stage, :, :], A[m_st:m_st + BLK_M, k * BLK_K:(k + 1) * BLK_K],
                          dispatch="tma_auto", mbar=tma_bar.ptr_to([stage]))
            Tx.copy_async(Bsmem[stage, :, :], B[n_st:n_st + BLK_N, k * BLK_K:(k + 1) * BLK_K],
                          dispatch="tma_auto", mbar=tma_bar.ptr_to([stage]))
            # <<< TODO 5.6

        # ---- the K loop of one output tile, run by one elected thread of warp 0 alone ----
        @T.inline
        def mma_tile():
            # Only the elected thread waits on tma_bar[s] and mma_bar: it alone makes their next
            # phases possible, so it cannot miss one (see the protocol table).
            if warp_id == 0:
                if T.cuda.elect_sync():
                    # ---- prefetch: fill both stages before the first MMA ----
                    # >>> TODO 5.7: prologue: fill the stages before the first MMA
                    for s in T.unroll(PRE_NUM):
                        tma_load(s, s)
                    # <<< TODO 5.7

                    # the stage loop is unrolled so that `s` (stage and phase index) is a constant
                    # >>> TODO 5.8: the stage ring: wait for stage s, MMA on it, refill it
                    for ring in T.serial(RING):
                        for s in T.unroll(PIPE_DEPTH):
                            k = T.meta_var(ring * PIPE_DEPTH + s)
                            if k < K_TILES:
                                # ---- wait until K tile k has landed in stage s ----
                                T.cuda.mbarrier_wait(tma_bar.ptr_to([s]), phase_tma[s])
                                phase_tma[s] = phase_tma[s] ^ 1
                                T.ptx.tcgen05.fence__after_thread_sync()

                                # ---- MMA on stage s: 4 x tcgen05.mma, then commit ----
                                Tx.gemm_async(tmem[:, 0:BLK_N], Asmem[s, :, :], Bsmem[s, :, :],
                                              accum=(k != 0), dispatch="tcgen05", cta_group=1)
                                T.ptx.tcgen05.commit.cta_group__1.mbarrier__arrive__one.shared__cluster.b64(
                                    mma_bar.ptr_to([0]))

                                # ---- wait for this MMA: TMEM updated, stage s free ----
                                T.cuda.mbarrier_wait(mma_bar.ptr_to([0]), phase_mma)
                                phase_mma = phase_mma ^ 1

                                # ---- refill stage s with K tile k + PIPE_DEPTH ----
                                if k + PIPE_DEPTH < K_TILES:
                                    tma_load(s, k + PIPE_DEPTH)
                    # <<< TODO 5.8
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
