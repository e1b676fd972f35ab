"""Step 5 (Hopper): a two-stage software pipeline.

Shared memory holds PIPE_DEPTH = 2 copies (stages) of the A and B tiles, each completing on its
own mbarrier. A stage is refilled with a later K tile as soon as the wgmmas that read it are done,
so the copy of the next tile overlaps the MMA of this one.
"""

import tvm
from tvm.backend.cuda.tile_primitive.tma_utils import SwizzleMode, mma_shared_layout
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

from kernel_helpers.hopper import acc_col, acc_row, encode_sw128_desc, wgmma_128x128x16

from kernel_helpers.todo import todo


def hgemm_v5(M, N, K):
    """D = A @ B^T on a (M/128) x (N/128) grid of CTAs, TMA loads two K tiles ahead.

    Data path (per CTA, tile origin m_st = 128*bx, n_st = 128*by; stage s = k % 2):
        prefetch: TMA of the first K tiles into the stages;
        for each K tile k: wait tma_bar[s] --> wgmma.mma_async m64n128k16 x 8 on Asmem[s],
        Bsmem[s] --> accumulator registers; commit + wait_group(0) --> a TMA of a later K tile
        into stage s;
        after the loop: registers --st.shared--> Dsmem --TMA store--> D[m_st:+128, n_st:+128].

    Barrier protocol (your first task: fill in the ? cells, then write the code):
        | barrier                      | arrival count | who arrives | who waits | starting phase |
        |------------------------------|---------------|-------------|-----------|----------------|
        | tma_bar[s] ("stage s has     | ?             | ?           | ?         | ?              |
        | landed"), s < PIPE_DEPTH     |               |             |           |                |
        Questions to answer first: when is stage s free to be refilled, and which K tile goes into
        it then? How many times is each stage used when the number of K tiles is odd, and what
        does that mean for the phase a wait names? Epilogue as in step 4.

    Blackwell twin: the same tma_bar[s] ring; the MMA completion that frees a stage is
    tcgen05.commit on an mbarrier (accumulator in TMEM) instead of wgmma.wait_group
    (accumulator in registers).
    """
    a_type = tvm.DataType("float16")
    b_type = tvm.DataType("float16")
    d_type = tvm.DataType("float16")
    acc_type = tvm.DataType("float32")

    BLK_M, BLK_N, BLK_K = 128, 128, 64
    MMA_K = 16
    K_TILES = K // BLK_K
    PIPE_DEPTH = 2
    PRE_NUM = min(PIPE_DEPTH, K_TILES)  # K tiles loaded before the loop starts

    # TODO 5.1: shared-memory layouts with a stage dimension
    #   A_layout and B_layout for PIPE_DEPTH stages of step 4's tiles: each stage a whole 128B-swizzled
    #   tile on a 1 KiB boundary, as TMA and the wgmma descriptors expect (mma_shared_layout).
    todo("5.1 shared-memory layouts with a stage dimension")
    D_layout = mma_shared_layout(d_type, SwizzleMode.SWIZZLE_128B_ATOM, (BLK_M, BLK_N))
    TMA_BYTES = (BLK_M * BLK_K + BLK_N * BLK_K) * 2  # one K tile of A and of B, fp16
    RING = (K_TILES + PIPE_DEPTH - 1) // PIPE_DEPTH  # trips through the stages

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
        # TODO 5.2: the barriers of the stage ring
        #   tma_bar: the barriers of the stage ring, from `pool` before move_base_to; the rest of the kernel
        #   names stage s's barrier tma_bar.ptr_to([s]).
        todo("5.2 the barriers of the stage ring")
        pool.move_base_to(1024)
        # TODO 5.3: the A and B stage buffers
        #   Asmem and Bsmem with the layouts of TODO 5.1, the stage index first: Asmem[s, :, :] is stage s.
        todo("5.3 the A and B stage buffers")
        Dsmem = pool.alloc((BLK_M, BLK_N), d_type, layout=D_layout)
        pool.commit()

        # ---- barrier init, visible to every thread and to the TMA unit before first use ----
        if warp_id == 0:
            if lane_id == 0:
                # TODO 5.4: initialise the ring's barriers
                #   Every barrier of TODO 5.2 initialised with your table's arrival count, inside this one-thread
                #   branch (the fences and the CTA barrier that publish the init follow).
                todo("5.4 initialise the ring's barriers")
        T.ptx.fence.mbarrier_init.release.cluster()
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cta_sync()

        m_st = T.meta_var(bx * BLK_M)
        n_st = T.meta_var(by * BLK_N)
        # TODO 5.5: the phase state of the ring
        #   phase_tma: the phase state that the ring's waits (TODO 5.9) read and flip, starting at your
        #   table's starting phase. A local array (T.alloc_local) or scalar: your design decides which.
        todo("5.5 the phase state of the ring")

        # ---- registers: the 128x128 fp32 accumulator (128 per thread), descriptors per stage ----
        acc = T.alloc_local((BLK_M * BLK_N // 128,), acc_type)
        # TODO 5.6: the wgmma descriptors of the stages
        #   desc_a and desc_b as mma_k_tile(stage, k) uses them (desc_a[stage]): the wgmma descriptor of every
        #   stage's first element, encoded once (encode_sw128_desc).
        todo("5.6 the wgmma descriptors of the stages")

        # TODO 5.7: load K tile k into stage `stage`
        #   An @T.inline helper tma_load(stage, k) for TODOs 5.8 and 5.9: step 4's load of K tile k (columns
        #   from k * BLK_K), aimed at stage `stage` of Asmem, Bsmem and tma_bar, and no wait (the ring waits).
        #   It is called from inside the guard that picks the loading thread. Keep dispatch="tma_auto".
        todo("5.7 load K tile k into stage `stage`")

        # the warpgroup multiplies K tile k, held in stage `stage`: 4 K-slices x 2 row halves
        # (8 wgmmas), one commit group, and waits for it; only the very first K=16 slice of the
        # whole K does not accumulate
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
            # TODO 5.8: prologue: start the first loads
            #   Before the first MMA, start the loads of the first PRE_NUM K tiles with tma_load, so that the
            #   ring finds them in flight; from the thread of your table's "who arrives".
            todo("5.8 prologue: start the first loads")

            # TODO 5.9: the stage ring: wait, multiply, refill
            #   K tile k lives in stage k % PIPE_DEPTH; walk the K tiles as RING trips through the stages (the
            #   last trip may be partial). Where the stage indexes tma_bar, the phase state or the descriptors it
            #   must be a compile-time constant (T.unroll, T.meta_var). Per K tile: wait until its stage has
            #   landed, multiply it (mma_k_tile: it returns when the wgmmas are done reading the stage), and
            #   refill the stage with a later K tile as early as is safe. No load past the last K tile: its bytes
            #   would never be waited for.
            todo("5.9 the stage ring: wait, multiply, refill")

        # ---- writeback: registers -> fp16 -> Dsmem (fragment layout), then one TMA store ----
        @T.inline
        def store_tile():
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

        mma_tile()
        store_tile()

        # the store must finish reading Dsmem before the CTA (and its shared memory) goes away
        if warp_id == 0:
            T.ptx.cp.async_.bulk.wait_group(0)

    return kernel
