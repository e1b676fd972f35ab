"""Step 4 (Hopper): TMA loads on an mbarrier, TMA store epilogue.

The tensor memory accelerator (TMA) replaces the 128-thread copy: one thread describes a whole
tile to the copy engine, which writes it into shared memory already 128B-swizzled and counts the
bytes it delivered on an mbarrier; every thread waits on that barrier. The result goes out the
same way: registers -> shared memory -> one TMA store. Loads and MMAs still run in lockstep.
"""

import tvm
from tvm.backend.cuda.tile_primitive.tma_utils import SwizzleMode, mma_shared_layout
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

from kernel_helpers.hopper import acc_col, acc_row, encode_sw128_desc, wgmma_128x128x16


def hgemm_v4(M, N, K):
    """D = A @ B^T on a (M/128) x (N/128) grid of CTAs; TMA moves the tiles in and out.

    Data path (per CTA, tile origin m_st = 128*bx, n_st = 128*by):
        for each K tile k: A[m_st:+128, 64k:+64], B[n_st:+128, 64k:+64] --TMA
        (cp.async.bulk.tensor, issued by one elected thread, completes on tma_bar)--> Asmem,
        Bsmem (128B swizzle) --wgmma.mma_async m64n128k16 x 8--> accumulator registers;
        after the loop: registers --cast to fp16, st.shared--> Dsmem (128B swizzle)
        --TMA store (one thread; cp.async.bulk commit_group + wait_group)--> D[m_st:+128, n_st:+128].

    Barrier protocol:
        | barrier | arrival count | who arrives                                     | who waits         | starting phase |
        |---------|---------------|-------------------------------------------------|-------------------|----------------|
        | tma_bar | 1             | the elected thread (mbarrier.arrive.expect_tx,  | all 128 threads   | 0, flips every |
        |         |               | 32 KiB), then the TMA engine's byte count       |                   | K tile         |
        wgmma still completes through wgmma.commit_group / wait_group(0); that wait (in the
        elected thread too) is what makes issuing the next K tile's TMA into Asmem/Bsmem safe.
        Epilogue: every thread's st.shared to Dsmem, fence.proxy.async.shared::cta (the TMA
        store reads through the async proxy), cta_sync, then one thread issues the store and
        cp.async.bulk.commit_group; warp 0 waits with cp.async.bulk.wait_group(0) before the CTA
        exits (only the lane that committed the store has a group to wait for).

    Blackwell twin: the same tma_bar protocol and TMA store; the MMA is tcgen05.mma with
    tcgen05.commit arriving on a second mbarrier (mma_bar) and the accumulator in TMEM, where
    here wgmma.wait_group replaces mma_bar and the accumulator stays in registers.

    Who waits differs from the Blackwell twin: here all 128 threads wait on tma_bar every K tile,
    which is safe because the barrier's next phase needs the elected thread to issue the next
    TMA after the warpgroup-wide wgmma, and all four warps execute every wgmma (.sync.aligned),
    so none can fall a phase behind. On Blackwell one thread issues the MMA and nothing keeps the
    other warps in step, so there only that thread waits inside the K loop.
    """
    a_type = tvm.DataType("float16")
    b_type = tvm.DataType("float16")
    d_type = tvm.DataType("float16")
    acc_type = tvm.DataType("float32")

    BLK_M, BLK_N, BLK_K = 128, 128, 64
    MMA_K = 16

    A_layout = mma_shared_layout(a_type, SwizzleMode.SWIZZLE_128B_ATOM, (BLK_M, BLK_K))
    B_layout = mma_shared_layout(b_type, SwizzleMode.SWIZZLE_128B_ATOM, (BLK_N, BLK_K))
    D_layout = mma_shared_layout(d_type, SwizzleMode.SWIZZLE_128B_ATOM, (BLK_M, BLK_N))
    # >>> TODO 4.1: the number of bytes the TMA loads deliver per K tile
    TMA_BYTES = (BLK_M * BLK_K + BLK_N * BLK_K) * 2  # one K tile of A and of B, fp16
    # <<< TODO 4.1

    @T.prim_func
    def kernel(
        A: T.Buffer((M, K), a_type),
        B: T.Buffer((N, K), b_type),
        D: T.Buffer((M, N), d_type),
    ):
        # fmt: off
        T.device_entry()
        bx, by = T.cta_id([M // BLK_M, N // BLK_N])
        wg_id = T.warpgroup_id([1])
        warp_id = T.warp_id_in_wg([4])
        lane_id = T.lane_id([32])

        # ---- shared memory: barrier, then the 128B-swizzled tiles on a 1024-byte boundary ----
        pool = T.SMEMPool()
        tma_bar = pool.alloc((1,), "uint64", align=8)
        pool.move_base_to(1024)
        Asmem = pool.alloc((BLK_M, BLK_K), a_type, layout=A_layout)
        Bsmem = pool.alloc((BLK_N, BLK_K), b_type, layout=B_layout)
        Dsmem = pool.alloc((BLK_M, BLK_N), d_type, layout=D_layout)
        pool.commit()

        # ---- barrier init (one thread), made visible to every thread and to the async proxy ----
        # >>> TODO 4.2: initialise tma_bar and make it visible
        if warp_id == 0:
            if lane_id == 0:
                T.ptx.mbarrier.init.shared.b64(tma_bar.ptr_to([0]), T.uint32(1))
        T.ptx.fence.mbarrier_init.release.cluster()
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cta_sync()
        # <<< TODO 4.2

        m_st = T.meta_var(bx * BLK_M)
        n_st = T.meta_var(by * BLK_N)
        # >>> TODO 4.3: a phase bit for tma_bar
        phase_tma: T.int32
        phase_tma = 0
        # <<< TODO 4.3

        # ---- registers: the 128x128 fp32 accumulator (128 per thread), two descriptors ----
        acc = T.alloc_local((BLK_M * BLK_N // 128,), acc_type)
        desc_a = T.alloc_local((1,), "uint64")
        desc_b = T.alloc_local((1,), "uint64")
        # the tiles never move: encode their wgmma descriptors once
        encode_sw128_desc(desc_a[0], Asmem.ptr_to([0, 0]))
        encode_sw128_desc(desc_b[0], Bsmem.ptr_to([0, 0]))

        # ---- one K tile in two parts (inline helpers: later steps change what they do) ----
        # one thread arms tma_bar with the byte count and issues the two TMA loads of the K tile
        # that starts at column k_st; every thread waits until all TMA_BYTES have landed
        @T.inline
        def load_k_tile(k_st):
            # >>> TODO 4.4: arm tma_bar and issue the two TMA loads
            if warp_id == 0:
                if T.cuda.elect_sync():
                    T.ptx.mbarrier.arrive.expect_tx.shared.b64(tma_bar.ptr_to([0]), T.uint32(TMA_BYTES))
                    Tx.copy_async(Asmem[:, :], A[m_st:m_st + BLK_M, k_st:k_st + BLK_K],
                                  dispatch="tma_auto", mbar=tma_bar.ptr_to([0]))
                    Tx.copy_async(Bsmem[:, :], B[n_st:n_st + BLK_N, k_st:k_st + BLK_K],
                                  dispatch="tma_auto", mbar=tma_bar.ptr_to([0]))
            # <<< TODO 4.4
            # >>> TODO 4.5: wait until the tiles have landed
            T.cuda.mbarrier_wait(tma_bar.ptr_to([0]), phase_tma)
            phase_tma = phase_tma ^ 1
            # <<< TODO 4.5

        # the warpgroup multiplies K tile k, held in stage `stage` (here the only one, 0): 4 K-slices
        # x 2 row halves (8 wgmmas), one commit group, and waits for it; only the very first K=16
        # slice of the whole K does not accumulate
        @T.inline
        def mma_k_tile(stage, k):
            T.ptx.wgmma.fence.sync.aligned()
            for kk in T.unroll(BLK_K // MMA_K):
                wgmma_128x128x16(acc, desc_a[stage], desc_b[stage], kk, k * (BLK_K // MMA_K) + kk != 0)
            T.ptx.wgmma.commit_group.sync.aligned()
            T.ptx.wgmma.wait_group.sync.aligned(0)

        # ---- the K loop of one output tile ----
        @T.inline
        def mma_tile():
            for k in range(K // BLK_K):
                load_k_tile(k * BLK_K)
                mma_k_tile(0, k)

        # ---- writeback: registers -> fp16 -> Dsmem (fragment layout), then one TMA store ----
        @T.inline
        def store_tile():
            # >>> TODO 4.6: write D through shared memory with a TMA store
            for h in T.unroll(2):
                for i in T.unroll(64):
                    Dsmem[acc_row(h, warp_id, lane_id, i), acc_col(lane_id, i)] = T.cast(
                        acc[h * 64 + i], d_type)
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

        # the store must finish reading Dsmem before the CTA (and its shared memory) goes away
        # >>> TODO 4.7: the store is complete before the CTA exits
        if warp_id == 0:
            T.ptx.cp.async_.bulk.wait_group(0)
        # <<< TODO 4.7

    return kernel
