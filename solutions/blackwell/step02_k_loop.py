"""Step 2 (Blackwell): the K loop, one 128x128 output tile with any K that is a multiple of 64.

The accumulator stays in TMEM while the CTA walks over K in 64-wide tiles: load a tile pair,
MMA with accumulate = (k != 0), wait for the MMA, go on. The wait on the commit barrier, whose
phase flips every K tile, is what makes overwriting the shared-memory tiles for the next K
tile safe.
"""

import tvm
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.backend.cuda.tile_primitive.tma_utils import mma_shared_layout, SwizzleMode
from tvm.tirx.layout import TileLayout, S, tid_in_wg as axis_tid_in_wg


def hgemm_v2(M, N, K):
    """D = A @ B^T for M = N = 128, K any multiple of 64 (fp16 in, fp32 in TMEM, fp16 out).

    Data path, for each of the K / 64 K tiles:
        A, B (global) --all 128 threads, ld.global + st.shared--> Asmem, Bsmem (128B swizzle)
        --tcgen05.mma (accumulate = k != 0), issued by one elected thread of warp 0-->
        accumulator in TMEM (128 lanes x 128 fp32 columns).
    Then once: TMEM --tcgen05.ld (Tx.wg.copy_async) + tcgen05.wait::ld--> registers (thread t
        holds row t) --cast to fp16--> D (global), one row per thread.

    Barrier protocol:
        | barrier | arrival count | who arrives                                | who waits   | starting phase        |
        |---------|---------------|--------------------------------------------|-------------|-----------------------|
        | mma_bar | 1             | tcgen05.commit from the thread that issued | all 128     | 0; flips after every  |
        |         |               | the MMA (mbarrier::arrive::one), once per  | threads     | K tile (phase_mma ^ 1)|
        |         |               | K tile                                     |             |                       |
        Waiting on mma_bar before the next K tile's copy is what frees Asmem/Bsmem for reuse.
        Plus, per K tile: fence.proxy.async.shared::cta + cta_sync +
        tcgen05.fence::after_thread_sync between the stores to Asmem/Bsmem and the MMA.

    Hopper twin: runs the same loads and writeback on an H100, but its MMA completion is
    `wgmma.wait_group` with no mbarrier; `tcgen05.commit`, the mbarrier it arrives on, and
    TMEM (alloc, tcgen05.ld, dealloc) are exercised only by building this file for sm_100a.
    """
    a_type = tvm.DataType("float16")
    d_type = tvm.DataType("float16")
    acc_type = tvm.DataType("float32")
    BLK_M, BLK_N, BLK_K = 128, 128, 64

    A_layout = mma_shared_layout(a_type, SwizzleMode.SWIZZLE_128B_ATOM, (BLK_M, BLK_K))
    B_layout = mma_shared_layout(a_type, SwizzleMode.SWIZZLE_128B_ATOM, (BLK_N, BLK_K))

    # fmt: off
    @T.prim_func
    def kernel(
        A: T.Buffer((M, K), "float16"),
        B: T.Buffer((N, K), "float16"),
        D: T.Buffer((M, N), "float16"),
    ):
        T.device_entry()
        bx, by = T.cta_id([1, 1])
        wg_id = T.warpgroup_id([1])
        warp_id = T.warp_id_in_wg([4])
        lane_id = T.lane_id([32])

        # ---- shared memory: TMEM address slot + barrier, then the operand tiles at 1 KiB ----
        pool = T.SMEMPool()
        tmem_pool = T.TMEMPool(pool, total_cols=512, cta_group=1)  # takes the address slot
        mma_bar = pool.alloc((1,), "uint64", align=8)
        pool.move_base_to(1024)  # 128B-swizzled tiles must start on a 1024-byte boundary
        Asmem = pool.alloc((BLK_M, BLK_K), a_type, layout=A_layout)
        Bsmem = pool.alloc((BLK_N, BLK_K), a_type, layout=B_layout)
        pool.commit()

        # ---- TMEM: warp 0 allocates all 512 columns; the accumulator is columns [0, 128) ----
        tmem_pool.commit()
        tmem = tmem_pool.alloc((128, 512), "float32")

        # ---- barrier init (one thread), made visible to every thread and to the async proxy ----
        if warp_id == 0:
            if lane_id == 0:
                T.ptx.mbarrier.init.shared.b64(mma_bar.ptr_to([0]), T.uint32(1))
        T.ptx.fence.mbarrier_init.release.cluster()
        T.ptx.fence.proxy.async_.shared__cta()
        T.ptx.tcgen05.fence__before_thread_sync()
        T.cuda.cta_sync()
        T.ptx.tcgen05.fence__after_thread_sync()
        # TMEMPool addresses columns from 0: a 512-column allocation always starts there.
        T.cuda.trap_when_assert_failed(tmem_pool.addr == T.uint32(0))

        m_st = T.meta_var(0)  # the one tile starts at row 0 of A and D ...
        n_st = T.meta_var(0)  # ... and at row 0 of B, column 0 of D
        phase_mma: T.int32
        phase_mma = 0

        # ---- one K tile in three parts (inline helpers: later steps change what they do) ----
        # every thread copies its part of the K tile that starts at column k_st of A and B
        @T.inline
        def load_k_tile(k_st):
            Tx.cta.copy(Asmem[:, :], A[m_st:m_st + BLK_M, k_st:k_st + BLK_K])
            Tx.cta.copy(Bsmem[:, :], B[n_st:n_st + BLK_N, k_st:k_st + BLK_K])
            # the MMA reads shared memory through the async proxy: fence, then sync
            T.ptx.fence.proxy.async_.shared__cta()
            T.cuda.cta_sync()
            T.ptx.tcgen05.fence__after_thread_sync()

        # one thread issues 4 x tcgen05.mma (K = 16 each) and commits them onto mma_bar
        @T.inline
        def mma_k_tile(accumulate):
            if warp_id == 0:
                if T.cuda.elect_sync():
                    Tx.gemm_async(tmem[:, 0:BLK_N], Asmem[:, :], Bsmem[:, :],
                                  accum=accumulate, dispatch="tcgen05", cta_group=1)
                    T.ptx.tcgen05.commit.cta_group__1.mbarrier__arrive__one.shared__cluster.b64(
                        mma_bar.ptr_to([0]))

        # every thread waits for the MMA: TMEM holds the product, Asmem/Bsmem may be reused
        @T.inline
        def wait_mma():
            T.cuda.mbarrier_wait(mma_bar.ptr_to([0]), phase_mma)
            phase_mma = phase_mma ^ 1
            T.ptx.tcgen05.fence__after_thread_sync()

        # ---- the K loop of one output tile ----
        @T.inline
        def mma_tile():
            # >>> TODO 2.1: the K loop: per K tile, load it, then accumulate it
            for k in T.serial(K // BLK_K):
                load_k_tile(k * BLK_K)
                mma_k_tile(k != 0)
                wait_mma()
            # <<< TODO 2.1

        # ---- writeback: TMEM -> registers (thread t of the warpgroup gets row t) -> D ----
        @T.inline
        def store_tile():
            Dreg = T.alloc_local((BLK_N,), acc_type)
            Dreg_f16 = T.alloc_local((BLK_N,), d_type)
            Dreg_wg = Dreg.view(128, BLK_N, layout=TileLayout(S[(128, BLK_N) : (1@axis_tid_in_wg, 1)]))
            Tx.wg.copy_async(Dreg_wg[:, :], tmem[:, 0:BLK_N])
            T.ptx.tcgen05.wait__ld.sync.aligned()
            T.ptx.tcgen05.fence__before_thread_sync()
            Tx.cast(Dreg_f16[:], Dreg[:])
            m_thr = T.meta_var(m_st + warp_id * 32 + lane_id)
            Tx.copy(D[m_thr, n_st:n_st + BLK_N], Dreg_f16[:])

        mma_tile()
        store_tile()

        # ---- teardown: every TMEM read is finished before warp 0 frees TMEM ----
        T.cuda.cta_sync()
        tmem_pool.dealloc()
    # fmt: on

    return kernel
