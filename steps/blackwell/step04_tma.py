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

from kernel_helpers.todo import todo


def hgemm_v4(M, N, K):
    """D = A @ B^T for M, N multiples of 128, K a multiple of 64 (fp16 in, fp32 in TMEM, fp16 out).

    Grid: (M / 128) x (N / 128) CTAs of 128 threads; CTA (bx, by) owns D[bx*128 : +128, by*128 : +128].
    Data path in each CTA, for each of the K / 64 K tiles:
        A, B (global) --2 TMA loads, completing on tma_bar--> Asmem, Bsmem (128B swizzle)
        --tcgen05.mma (accumulate = k != 0), completing on mma_bar--> accumulator in TMEM
        (128 lanes x 128 fp32 columns).
    Then once: TMEM --tcgen05.ld (Tx.wg.copy_async) + tcgen05.wait::ld--> registers (thread t holds
        row t) --cast to fp16--> Dsmem (128B swizzle) --one TMA store--> D (global).

    Barrier protocol (your first task: fill in the ? cells, then write the code to match):
        | barrier                                     | arrival count | who arrives | who waits | starting phase |
        |---------------------------------------------|---------------|-------------|-----------|----------------|
        | tma_bar ("this K tile's A and B landed")    | ?             | ?           | ?         | ?              |
        | mma_bar ("this K tile's MMA has finished")  | ?             | ?           | ?         | ?              |
        Questions the table must answer: how many arrivals and how many bytes complete a phase
        of tma_bar? Which thread may wait on tma_bar and mma_bar inside the K loop, given that a
        parity wait cannot tell phase n from phase n + 2? How do the other threads learn that
        the accumulator is complete before they read TMEM? What must happen between the generic
        stores to Dsmem and the TMA store that reads it, and before the CTA exits?

    Hopper twin: exercises on an H100 the same tma_bar protocol (expect_tx, byte counts, phase
    flips) and the TMA store epilogue; its MMA completion is `wgmma.wait_group`, so
    `tcgen05.commit` onto mma_bar and TMEM are exercised only by building this file for sm_100a.
    There the whole warpgroup issues the MMA; here one thread does, which changes who may wait.
    """
    a_type = tvm.DataType("float16")
    d_type = tvm.DataType("float16")
    acc_type = tvm.DataType("float32")
    BLK_M, BLK_N, BLK_K = 128, 128, 64
    # TODO 4.1: the number of bytes the TMA loads deliver per K tile
    #   Name TILE_BYTES, computed from the tile constants above: what the two TMA loads of one K tile deliver, which
    #   load_k_tile arms tma_bar with. A count that differs from the bytes that land either completes the phase before
    #   the tiles are in or never completes it.
    todo("4.1 the number of bytes the TMA loads deliver per K tile")

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
        # TODO 4.2: initialise tma_bar and mma_bar and make them visible
        #   Both barriers allocated above are initialised once, each with its arrival count per phase (your protocol
        #   table), and the initialisation is visible to every thread and to the async proxy (the TMA unit completes
        #   bytes on tma_bar) before any arrive, copy or wait. Step 3's tcgen05 fences around the CTA barrier stay.
        #   API family: T.ptx.mbarrier.init, T.ptx.fence.
        todo("4.2 initialise tma_bar and mma_bar and make them visible")
        # TMEMPool addresses columns from 0: a 512-column allocation always starts there.
        T.cuda.trap_when_assert_failed(tmem_pool.addr == T.uint32(0))

        m_st = T.meta_var(bx * BLK_M)
        n_st = T.meta_var(by * BLK_N)
        phase_mma: T.int32
        phase_mma = 0
        # TODO 4.3: a phase bit for tma_bar
        #   Like phase_mma: an int32 local declared with its type, starting at the barrier's initial phase.
        todo("4.3 a phase bit for tma_bar")

        # ---- one K tile: A and B through the TMA unit ----
        @T.inline
        def load_k_tile(k_st):
            # TODO 4.4: one thread loads the K tile with TMA and waits for its bytes
            #   load_k_tile(k_st) brings the A and B tiles of the K tile that starts at column k_st into Asmem and
            #   Bsmem through the TMA unit, with tma_bar as their barrier, and returns once they have landed, with
            #   phase_tma advanced for the next K tile. The MMA that follows reads the tiles: it must be ordered after
            #   the wait. API family: T.ptx.mbarrier.arrive.expect_tx, Tx.copy_async (its dispatch and mbar
            #   arguments), T.cuda.mbarrier_wait, the tcgen05 fences. Trap: a Tx.copy_async without the TMA dispatch
            #   builds as cp.async, which never completes on tma_bar, so the wait hangs.
            todo("4.4 one thread loads the K tile with TMA and waits for its bytes")

        # ---- the K loop of one output tile ----
        @T.inline
        def mma_tile():
            # TODO 4.5: the K loop of one output tile
            #   mma_tile() runs the K loop of the tile: per K tile, load_k_tile, step 3's MMA and commit onto mma_bar
            #   written out here, and a wait on mma_bar before the next load may overwrite Asmem and Bsmem. When it
            #   returns, every thread of the CTA may read the complete accumulator from TMEM (store_tile starts with
            #   tcgen05.ld). Which threads run the loop and which wait where is your protocol table. API family:
            #   T.cuda.elect_sync, T.serial, Tx.gemm_async, the tcgen05 commit and fences, T.cuda.mbarrier_wait,
            #   T.cuda.cta_sync.
            todo("4.5 the K loop of one output tile")

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
            # TODO 4.6: write D through shared memory with one TMA store
            #   Dreg_f16 holds this thread's row of the tile (thread t of the warpgroup, row t). Put the rows into
            #   Dsmem and have the TMA unit store Dsmem to D's tile at (m_st, n_st), as one bulk group that TODO 4.7
            #   waits for. The TMA store reads Dsmem through the async proxy, and only after every row is in. API
            #   family: Tx.copy, T.ptx.fence.proxy, T.cuda.cta_sync, Tx.copy_async (dispatch), T.ptx.cp.async_.bulk.
            todo("4.6 write D through shared memory with one TMA store")

        mma_tile()
        store_tile()

        # ---- teardown: every TMEM read is done; warp 0 frees TMEM ----
        # TODO 4.7: the store is complete before the CTA exits
        #   The shared memory the store reads must outlive it: before the teardown, the bulk group committed in TODO
        #   4.6 has completed. API family: T.ptx.cp.async_.bulk (wait_group waits for the calling thread's own
        #   committed groups).
        todo("4.7 the store is complete before the CTA exits")
        T.cuda.cta_sync()
        tmem_pool.dealloc()
    # fmt: on

    return kernel
