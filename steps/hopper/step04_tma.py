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

from kernel_helpers.todo import todo


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
        store reads through the async proxy), cta_sync, then one thread issues the store,
        cp.async.bulk.commit_group and cp.async.bulk.wait_group(0) before the CTA exits.

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
    # TODO 4.1: the number of bytes the TMA loads deliver per K tile
    #   Name TMA_BYTES: the bytes of one A tile plus one B tile (fp16 = 2 bytes). tma_bar's phase
    #   completes only when this many bytes have arrived: too few and wgmma may read a half-written tile,
    #   too many and the wait never ends.
    todo("4.1 the number of bytes the TMA loads deliver per K tile")

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
        # TODO 4.2: initialise tma_bar and make it visible
        #   One thread (warp 0, lane 0) initialises tma_bar with an arrival count of 1 (the expect_tx
        #   arrival). Then every thread fences the init (mbarrier_init fence, release, cluster scope) and the
        #   async proxy (the TMA unit completes bytes on it), and a CTA barrier: no use before the init is visible.
        todo("4.2 initialise tma_bar and make it visible")

        m_st = T.meta_var(bx * BLK_M)
        n_st = T.meta_var(by * BLK_N)
        # TODO 4.3: a phase bit for tma_bar
        #   An int32 local declared with its type, starting at the barrier's initial phase.
        todo("4.3 a phase bit for tma_bar")

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
            # TODO 4.4: one thread arms tma_bar and issues the two TMA loads
            #   ONE elected thread (warp 0, elect_sync) arrives on tma_bar announcing TMA_BYTES (arrive.expect_tx),
            #   then hands the A and B tiles of K tile k to the TMA unit (Tx.copy_async naming tma_bar). Trap:
            #   without dispatch="tma_auto" the copy silently becomes cp.async and never arrives on the barrier.
            todo("4.4 one thread arms tma_bar and issues the two TMA loads")
            # TODO 4.5: every thread waits until the tiles have landed
            #   All 128 threads issue the wgmma that reads the tiles, so all wait on tma_bar for phase_tma and
            #   flip it. No proxy fence or CTA barrier: TMA writes through the async proxy itself. (Safe for all to
            #   wait: every warp must reach the warpgroup-wide wgmma before the next load is issued.)
            todo("4.5 every thread waits until the tiles have landed")

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
            # TODO 4.6: write D through shared memory with one TMA store
            #   Step 3's fragment loops, but into the swizzled Dsmem tile (tile coordinates, no m_st/n_st). The
            #   TMA store reads through the async proxy: proxy fence by every writer, CTA barrier, then ONE
            #   elected thread stores Dsmem to D's tile (tma_auto) and commits the bulk group; TODO 4.7 waits for
            #   it.
            todo("4.6 write D through shared memory with one TMA store")

        mma_tile()
        store_tile()

        # the store must finish reading Dsmem before the CTA (and its shared memory) goes away
        # TODO 4.7: the store is complete before the CTA exits
        #   The CTA's shared memory must outlive the store that reads it: warp 0 waits for its committed bulk
        #   groups to complete (only the lane that committed the store has one; the others pass at once).
        todo("4.7 the store is complete before the CTA exits")

    return kernel
