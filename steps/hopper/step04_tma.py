"""Step 4 (Hopper): TMA loads on an mbarrier, TMA store epilogue.

The tensor memory accelerator (TMA) replaces the 128-thread copy: a thread describes a whole
tile to the copy engine, which writes it into shared memory already 128B-swizzled and counts the
bytes it delivered on an mbarrier; the threads that read the tile wait on that barrier. The
result goes out the same way: registers -> shared memory -> one TMA store. Loads and MMAs still
run in lockstep.
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
        (cp.async.bulk.tensor, completes on tma_bar)--> Asmem, Bsmem (128B swizzle)
        --wgmma.mma_async m64n128k16 x 8--> accumulator registers;
        after the loop: registers --cast to fp16, st.shared--> Dsmem (128B swizzle)
        --TMA store (cp.async.bulk, commit_group + wait_group)--> D[m_st:+128, n_st:+128].

    Barrier protocol (your first task: fill in the ? cells, then write the code):
        | barrier                  | arrival count | who arrives | who waits | starting phase |
        |--------------------------|---------------|-------------|-----------|----------------|
        | tma_bar ("the K tile has | ?             | ?           | ?         | ?              |
        | landed in Asmem, Bsmem") |               |             |           |                |
        wgmma still completes through wgmma.commit_group / wait_group(0). Questions to answer
        first: which threads read the tiles, and so must wait? Which thread's wait makes it safe
        to issue the next K tile's TMA into the same Asmem/Bsmem? What does the TMA store need
        before it reads Dsmem through the async proxy, and before the CTA's shared memory goes away?

    Blackwell twin: the same tma_bar and TMA store; the MMA is tcgen05.mma with tcgen05.commit
    arriving on a second mbarrier (mma_bar) and the accumulator in TMEM, where here
    wgmma.wait_group replaces mma_bar and the accumulator stays in registers. Who waits on tma_bar
    differs between the two tracks: compare who issues the MMA here and there.
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
    #   Name TMA_BYTES (a Python integer from the tile constants and the element size): what the loads
    #   of one K tile write into shared memory. tma_bar's phase completes only when the bytes announced
    #   for it have arrived, so this number must equal what the copies deliver.
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

        # ---- barrier init, visible to every thread and to the TMA unit before first use ----
        # TODO 4.2: initialise tma_bar and make it visible
        #   tma_bar must be initialised once, with your table's arrival count, and the init must be visible
        #   to every thread and to the async proxy (the TMA unit completes bytes on it) before anyone uses
        #   the barrier. API: T.ptx.mbarrier.init.*, the fences of docs/tirx-facts.md, T.cuda's syncs.
        todo("4.2 initialise tma_bar and make it visible")

        m_st = T.meta_var(bx * BLK_M)
        n_st = T.meta_var(by * BLK_N)
        # TODO 4.3: a phase bit for tma_bar
        #   phase_tma: an int32 local (declared with its type) that the waits of TODO 4.5 read and flip; it
        #   starts at your table's starting phase.
        todo("4.3 a phase bit for tma_bar")

        # ---- registers: the 128x128 fp32 accumulator (128 per thread), two descriptors ----
        acc = T.alloc_local((BLK_M * BLK_N // 128,), acc_type)
        desc_a = T.alloc_local((1,), "uint64")
        desc_b = T.alloc_local((1,), "uint64")
        # the tiles never move: encode their wgmma descriptors once
        encode_sw128_desc(desc_a[0], Asmem.ptr_to([0, 0]))
        encode_sw128_desc(desc_b[0], Bsmem.ptr_to([0, 0]))

        # ---- one K tile in two parts (inline helpers: later steps change what they do) ----
        # load_k_tile(k_st): the K tile that starts at column k_st goes into Asmem and Bsmem, and
        # has landed there when the helper returns
        @T.inline
        def load_k_tile(k_st):
            # TODO 4.4: arm tma_bar and issue the two TMA loads
            #   Inside load_k_tile(k_st): announce TMA_BYTES on tma_bar (the arrival of your table) and hand the
            #   A and B tiles of the K tile that starts at column k_st to the TMA unit, into Asmem and Bsmem,
            #   completing on tma_bar. API: T.ptx.mbarrier.arrive.expect_tx.*, Tx.copy_async; the thread
            #   guards of docs/tirx-facts.md. Trap: without dispatch="tma_auto" the copy silently becomes
            #   cp.async and never arrives on the barrier.
            todo("4.4 arm tma_bar and issue the two TMA loads")
            # TODO 4.5: wait until the tiles have landed
            #   After load_k_tile returns, the wgmma of mma_k_tile reads Asmem and Bsmem: the threads of your
            #   table's "who waits" cell block on tma_bar until the K tile's bytes have landed, and keep their
            #   phase bit in step with the barrier's phases. API: T.cuda.mbarrier_wait(ptr, phase).
            todo("4.5 wait until the tiles have landed")

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
            # TODO 4.6: write D through shared memory with a TMA store
            #   store_tile: the accumulator, cast to fp16, into Dsmem (step 3's fragment loops, tile coordinates),
            #   then from Dsmem to D[m_st:+128, n_st:+128] with one TMA store (Tx.copy_async with
            #   dispatch="tma_auto", then a bulk commit group). The store reads Dsmem through the async proxy:
            #   what must stand between the threads' writes and the store? TODO 4.7 waits for the store.
            todo("4.6 write D through shared memory with a TMA store")

        mma_tile()
        store_tile()

        # the store must finish reading Dsmem before the CTA (and its shared memory) goes away
        # TODO 4.7: the store is complete before the CTA exits
        #   The CTA's shared memory must outlive the TMA store that reads it: wait for the bulk group
        #   committed in TODO 4.6 before the kernel ends (a bulk group belongs to the thread that committed
        #   it). API: T.ptx.cp.async_.bulk.wait_group.
        todo("4.7 the store is complete before the CTA exits")

    return kernel
