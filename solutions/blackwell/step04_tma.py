"""Step 4 (Blackwell): TMA loads on an mbarrier with an expected byte count, TMA store epilogue.

Instead of 128 threads copying A and B element by element, one thread hands each tile to the
Tensor Memory Accelerator: it arms `tma_bar` with the number of bytes to expect
(`mbarrier.arrive.expect_tx`) and issues the two TMA loads, which count their bytes down on
that barrier. The barrier's phase completes when the arrival and all the bytes are in. The
result goes out the same way: registers -> a swizzled shared D tile -> one TMA store.
"""

import tvm
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.backend.cuda.tile_primitive.tma_utils import mma_shared_layout, SwizzleMode
from tvm.tirx.layout import TileLayout, S, tid_in_wg as axis_tid_in_wg


def hgemm_v4(M, N, K):
    """D = A @ B^T for M, N multiples of 128, K a multiple of 64 (fp16 in, fp32 in TMEM, fp16 out).

    Grid: (M / 128) x (N / 128) CTAs of 128 threads; CTA (bx, by) owns D[bx*128 : +128, by*128 : +128].
    Data path in each CTA, for each of the K / 64 K tiles, all in one elected thread of warp 0
    (lockstep: load, wait, MMA, wait):
        A, B (global) --2 TMA loads, completing on tma_bar--> Asmem, Bsmem (128B swizzle)
        --tcgen05.mma (accumulate = k != 0)--> accumulator in TMEM (128 lanes x 128 fp32 columns).
    Then once, after a cta_sync that lets the other threads join: TMEM --tcgen05.ld
        (Tx.wg.copy_async) + tcgen05.wait::ld--> registers (thread t holds row t) --cast to
        fp16--> Dsmem (128B swizzle) --fence.proxy.async + cta_sync; TMA store by one thread,
        cp.async.bulk.commit_group + wait_group 0--> D (global).

    Barrier protocol:
        | barrier | arrival count | who arrives                                | who waits   | starting phase        |
        |---------|---------------|--------------------------------------------|-------------|-----------------------|
        | tma_bar | 1 (+ 32768    | the elected thread: mbarrier.arrive.       | the elected | 0; flips after every  |
        |         | tx bytes)     | expect_tx(A + B tile bytes); the two TMA   | thread only | K tile (phase_tma ^ 1)|
        |         |               | loads complete_tx their bytes              |             |                       |
        | mma_bar | 1             | tcgen05.commit from the thread that issued | the elected | 0; flips after every  |
        |         |               | the MMA (mbarrier::arrive::one), once per  | thread only | K tile (phase_mma ^ 1)|
        |         |               | K tile                                     |             |                       |
        Waiting on mma_bar before issuing the next K tile's TMA is what frees Asmem/Bsmem.
        Only a thread whose progress gates a barrier's next phase may wait on it in a loop: a
        parity wait cannot tell phase n from phase n + 2, and the elected thread, which alone
        drives tma_bar and mma_bar, could complete phases n and n + 1 while a waiting warp that
        arrives on nothing was still descheduled; that warp would then wait forever. So warps
        1-3 (and lanes 1-31 of warp 0) wait once, at the cta_sync after the loop, followed by
        tcgen05.fence::after_thread_sync before they read TMEM; the elected thread issues
        tcgen05.fence::before_thread_sync before that cta_sync.
        Epilogue: the generic stores to Dsmem are followed by fence.proxy.async.shared::cta and
        cta_sync before the TMA store reads Dsmem; after it, warp 0 waits for its bulk group
        (cp.async.bulk.wait_group 0: only the lane that committed the store has one) before
        the CTA syncs and exits.

    Hopper twin: exercises on an H100 the same tma_bar protocol (expect_tx, byte counts, phase
    flips) and the TMA store epilogue; its MMA completion is `wgmma.wait_group`, so
    `tcgen05.commit` onto mma_bar and TMEM are exercised only by building this file for sm_100a.
    The twin lets all 128 threads wait on tma_bar every K tile: there all four warps issue the
    warpgroup-wide wgmma, so no warp can run a phase ahead of another. Here one thread issues
    the MMA, which is why only it waits inside the loop.
    """
    a_type = tvm.DataType("float16")
    d_type = tvm.DataType("float16")
    acc_type = tvm.DataType("float32")
    BLK_M, BLK_N, BLK_K = 128, 128, 64
    # >>> TODO 4.1: the number of bytes the TMA loads deliver per K tile
    TILE_BYTES = (BLK_M * BLK_K + BLK_N * BLK_K) * 2  # what the two TMA loads deliver per K tile
    # <<< TODO 4.1

    A_layout = mma_shared_layout(a_type, SwizzleMode.SWIZZLE_128B_ATOM, (BLK_M, BLK_K))
    B_layout = mma_shared_layout(a_type, SwizzleMode.SWIZZLE_128B_ATOM, (BLK_N, BLK_K))
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
        tma_bar = pool.alloc((1,), "uint64", align=8)
        pool.move_base_to(1024)  # 128B-swizzled tiles must start on a 1024-byte boundary
        Asmem = pool.alloc((BLK_M, BLK_K), a_type, layout=A_layout)
        Bsmem = pool.alloc((BLK_N, BLK_K), a_type, layout=B_layout)
        Dsmem = pool.alloc((BLK_M, BLK_N), d_type, layout=D_layout)
        pool.commit()

        # ---- TMEM: warp 0 allocates all 512 columns; the accumulator is columns [0, 128) ----
        tmem_pool.commit()
        tmem = tmem_pool.alloc((128, 512), "float32")

        # ---- barrier init (one thread), made visible to every thread and to the async proxy ----
        # >>> TODO 4.2: initialise tma_bar and mma_bar and make them visible
        if warp_id == 0:
            if lane_id == 0:
                T.ptx.mbarrier.init.shared.b64(tma_bar.ptr_to([0]), T.uint32(1))
                T.ptx.mbarrier.init.shared.b64(mma_bar.ptr_to([0]), T.uint32(1))
        T.ptx.fence.mbarrier_init.release.cluster()
        T.ptx.fence.proxy.async_.shared__cta()
        T.ptx.tcgen05.fence__before_thread_sync()
        T.cuda.cta_sync()
        T.ptx.tcgen05.fence__after_thread_sync()
        # <<< TODO 4.2
        # TMEMPool addresses columns from 0: a 512-column allocation always starts there.
        T.cuda.trap_when_assert_failed(tmem_pool.addr == T.uint32(0))

        m_st = T.meta_var(bx * BLK_M)
        n_st = T.meta_var(by * BLK_N)
        phase_mma: T.int32
        phase_mma = 0
        # >>> TODO 4.3: a phase bit for tma_bar
        phase_tma: T.int32
        phase_tma = 0
        # <<< TODO 4.3

        # ---- one K tile, now all of it in one elected thread of warp 0 ----
        # the thread arms tma_bar with the tile's byte count, issues the two TMA loads onto it
        # and waits until the bytes have landed
        @T.inline
        def load_k_tile(k_st):
            # >>> TODO 4.4: one thread loads the K tile with TMA and waits for its bytes
            T.ptx.mbarrier.arrive.expect_tx.shared.b64(tma_bar.ptr_to([0]), T.uint32(TILE_BYTES))
            Tx.copy_async(Asmem[:, :], A[m_st:m_st + BLK_M, k_st:k_st + BLK_K],
                          dispatch="tma_auto", mbar=tma_bar.ptr_to([0]))
            Tx.copy_async(Bsmem[:, :], B[n_st:n_st + BLK_N, k_st:k_st + BLK_K],
                          dispatch="tma_auto", mbar=tma_bar.ptr_to([0]))
            T.cuda.mbarrier_wait(tma_bar.ptr_to([0]), phase_tma)
            phase_tma = phase_tma ^ 1
            T.ptx.tcgen05.fence__after_thread_sync()
            # <<< TODO 4.4

        # ---- the K loop of one output tile, run by one elected thread of warp 0 alone ----
        @T.inline
        def mma_tile():
            # Only the elected thread waits on tma_bar and mma_bar: it alone makes their next
            # phases possible, so it cannot miss one (see the protocol table).
            # >>> TODO 4.5: the K loop of one output tile
            if warp_id == 0:
                if T.cuda.elect_sync():
                    for k in T.serial(K // BLK_K):
                        load_k_tile(k * BLK_K)
                        # 4 x tcgen05.mma (K = 16 each), then commit onto mma_bar
                        Tx.gemm_async(tmem[:, 0:BLK_N], Asmem[:, :], Bsmem[:, :],
                                      accum=(k != 0), dispatch="tcgen05", cta_group=1)
                        T.ptx.tcgen05.commit.cta_group__1.mbarrier__arrive__one.shared__cluster.b64(
                            mma_bar.ptr_to([0]))
                        # this K tile's MMA is done: TMEM updated, Asmem/Bsmem free for the next load
                        T.cuda.mbarrier_wait(mma_bar.ptr_to([0]), phase_mma)
                        phase_mma = phase_mma ^ 1
                    T.ptx.tcgen05.fence__before_thread_sync()
            # the other threads join here: the accumulator in TMEM is complete
            T.cuda.cta_sync()
            T.ptx.tcgen05.fence__after_thread_sync()
            # <<< TODO 4.5

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
            # >>> TODO 4.6: write D through shared memory with one TMA store
            Tx.copy(Dsmem[warp_id * 32 + lane_id, :], Dreg_f16[:])
            # the TMA store reads Dsmem through the async proxy: fence, then sync
            T.ptx.fence.proxy.async_.shared__cta()
            T.cuda.cta_sync()
            if warp_id == 0:
                if T.cuda.elect_sync():
                    Tx.copy_async(D[m_st:m_st + BLK_M, n_st:n_st + BLK_N], Dsmem[:, :],
                                  dispatch="tma_auto")
                    T.ptx.cp.async_.bulk.commit_group()
            # <<< TODO 4.6

        mma_tile()
        store_tile()

        # ---- teardown: the store has completed and every TMEM read is done; warp 0 frees TMEM ----
        # >>> TODO 4.7: the store is complete before the CTA exits
        if warp_id == 0:
            T.ptx.cp.async_.bulk.wait_group(0)
        # <<< TODO 4.7
        T.cuda.cta_sync()
        tmem_pool.dealloc()
    # fmt: on

    return kernel
