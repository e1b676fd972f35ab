"""Step 7 (Blackwell): warp specialization.

Step 6 has every thread take every role in turn: load, wait, issue the MMA, wait, write back. Here
each role gets its own warps and runs its own loop: one thread of warp 3 of warpgroup 1 issues the
TMA loads, one thread of warp 0 of warpgroup 1 issues the MMAs, and warpgroup 0 writes the
accumulator back. They hand over stages and the accumulator through four barrier roles, so loads,
MMAs and the writeback of the previous tile overlap instead of taking turns.
"""

import tvm
from tvm.backend.cuda.lang.pipeline import MBarrier, PipelineState, TCGen05Bar, TMABar
from tvm.backend.cuda.lang.tile_scheduler import ClusterPersistentScheduler2D
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.backend.cuda.tile_primitive.tma_utils import mma_shared_layout, SwizzleMode
from tvm.tirx.layout import TileLayout, S, tid_in_wg as axis_tid_in_wg

from kernel_helpers.todo import todo


def hgemm_v7(M, N, K, sm_count):
    """D = A @ B^T for M, N multiples of 128, K a multiple of 64 (fp16 in, fp32 in TMEM, fp16 out).

    Grid: sm_count CTAs of 256 threads (two warpgroups). Each CTA walks its output tiles in
    ClusterPersistentScheduler2D's L2-grouped order, as in step 6; each role keeps its own copy of
    the scheduler and walks the same tiles.
    Roles and data path, per output tile (PIPE_DEPTH = 4 shared-memory stages):
        TMA producer (warpgroup 1, warp 3, one elected thread): A, B (global) --TMA--> Asmem[s],
            Bsmem[s] (128B swizzle), K tile after K tile.
        MMA issuer (warpgroup 1, warp 0, one elected thread): Asmem[s], Bsmem[s]
            --tcgen05.mma (accumulate = k != 0)--> accumulator in TMEM columns [0, 128).
        Writeback (warpgroup 0, 128 threads, thread t owns row t): TMEM --tcgen05.ld + wait::ld,
            in EPI_N = 64 column chunks--> registers --fp16--> Dsmem (128 x 64, 128B swizzle)
            --TMA store by one thread--> D.
        Warpgroup 1's warps 1 and 2 have no role: they go straight to the teardown.
    The roles hand over stages and the accumulator through four barriers, so that loads, MMAs
    and the writeback of the previous tile overlap.

    Barrier protocol (initialised once per CTA by thread 0, before any role starts). Your first
    task: fill in the ? cells, then write the code to match.
        | barrier                                    | arrival count | who arrives | who waits | starting phase |
        |--------------------------------------------|---------------|-------------|-----------|----------------|
        | tma2mma[s] ("stage s has landed")          | ?             | ?           | ?         | ?              |
        | mma2tma[s] ("stage s may be refilled")     | ?             | ?           | ?         | ?              |
        | mma2ld ("the accumulator is complete")     | ?             | ?           | ?         | ?              |
        | ld2mma ("TMEM has been read out: free")    | ?             | ?           | ?         | ?              |
        Questions the table and the code must answer: which side of each barrier produces and
        which consumes, and in which phase must each side's first wait be, given that nothing has
        arrived yet? How many arrivals complete one phase? Which threads may wait on each barrier,
        given that a parity wait cannot tell phase n from phase n + 2? How do the stage index and
        the phases run from one tile to the next when K_TILES is not a multiple of PIPE_DEPTH? What
        orders the tcgen05 operations after each wait, and the TMEM reads before TMEM is handed
        back? How does the writeback warpgroup synchronise on Dsmem while the other warpgroup is
        elsewhere?

    Hopper twin: solutions/hopper/step07 runs the same role split on an H100. What only Blackwell
    has here (the MMA's completion, TMEM and its hand-over between roles) is checked only by the
    build (sm_100a and sm_103a) and by reading the generated code.
    """
    a_type = tvm.DataType("float16")
    d_type = tvm.DataType("float16")
    acc_type = tvm.DataType("float32")
    BLK_M, BLK_N, BLK_K = 128, 128, 64
    K_TILES = K // BLK_K
    TILE_BYTES = (BLK_M * BLK_K + BLK_N * BLK_K) * 2  # what the two TMA loads deliver per K tile
    PIPE_DEPTH = 4  # the ring of the Hopper twin, where two stages starve the consumer
    EPI_N = 64  # writeback chunk: 64 fp32 registers per thread, one 128B-swizzled Dsmem row
    WG_NUMBER = 2
    WB_THREADS = 128  # the writeback warpgroup
    WB_BARRIER = 1  # named barrier id of the writeback warpgroup (0 is the CTA barrier)

    A_layout = mma_shared_layout(a_type, SwizzleMode.SWIZZLE_128B_ATOM, (PIPE_DEPTH, BLK_M, BLK_K))
    B_layout = mma_shared_layout(a_type, SwizzleMode.SWIZZLE_128B_ATOM, (PIPE_DEPTH, BLK_N, BLK_K))
    D_layout = mma_shared_layout(d_type, SwizzleMode.SWIZZLE_128B_ATOM, (BLK_M, EPI_N))

    # fmt: off
    @T.prim_func
    def kernel(
        A: T.Buffer((M, K), "float16"),
        B: T.Buffer((N, K), "float16"),
        D: T.Buffer((M, N), "float16"),
    ):
        T.device_entry()
        bx = T.cta_id([sm_count])
        wg_id = T.warpgroup_id([WG_NUMBER])
        warp_id = T.warp_id_in_wg([4])
        lane_id = T.lane_id([32])

        # ---- shared memory: TMEM address slot + barriers, then the tiles at 1 KiB ----
        pool = T.SMEMPool()
        tmem_pool = T.TMEMPool(pool, total_cols=512, cta_group=1)  # takes the address slot
        # TODO 7.1: the four barrier roles
        #   Four barrier arrays from `pool`, before move_base_to, named tma2mma, mma2tma, mma2ld and ld2mma (meanings
        #   in the table), each with one slot per thing it guards. API: the barrier classes imported above,
        #   class(pool, depth); they differ in what their arrive() issues (docs/tirx-facts.md).
        todo("7.1 the four barrier roles")
        pool.move_base_to(1024)  # 128B-swizzled tiles must start on a 1024-byte boundary
        Asmem = pool.alloc((PIPE_DEPTH, BLK_M, BLK_K), a_type, layout=A_layout)
        Bsmem = pool.alloc((PIPE_DEPTH, BLK_N, BLK_K), a_type, layout=B_layout)
        Dsmem = pool.alloc((BLK_M, EPI_N), d_type, layout=D_layout)
        pool.commit()

        # ---- TMEM: warp 0 allocates all 512 columns; the accumulator is columns [0, 128) ----
        tmem_pool.commit()
        tmem = tmem_pool.alloc((128, 512), "float32")

        # ---- barrier init (thread 0 of the CTA, outside any role branch) ----
        # TODO 7.2: arrival counts
        #   Each barrier's .init(count) with your table's count. The init stays here, outside every role branch
        #   (.init runs on thread 0 only). A count that disagrees with the arrivals per phase hangs the waiters or
        #   releases them early.
        todo("7.2 arrival counts")
        T.ptx.fence.mbarrier_init.release.cluster()
        T.ptx.fence.proxy.async_.shared__cta()
        T.ptx.tcgen05.fence__before_thread_sync()
        T.cuda.cta_sync()
        T.ptx.tcgen05.fence__after_thread_sync()
        # TMEMPool addresses columns from 0: a 512-column allocation always starts there.
        T.cuda.trap_when_assert_failed(tmem_pool.addr == T.uint32(0))

        # ---- tile scheduler: CTA bx takes tiles bx, bx + sm_count, ... in L2-grouped order ----
        tile_scheduler = ClusterPersistentScheduler2D(
            "ts", num_m_tiles=M // BLK_M, num_n_tiles=N // BLK_N,
            l2_group_size=8, num_clusters=sm_count)
        tile_scheduler.init(bx)
        m_st = T.meta_var(tile_scheduler.m_idx * BLK_M)
        n_st = T.meta_var(tile_scheduler.n_idx * BLK_N)

        # TODO 7.3: the TMA producer: warpgroup 1, warp 3, one thread
        #   The producer role: A and B of every K tile of every tile of tile_scheduler (valid(), next_tile()) reach
        #   Asmem and Bsmem by TMA, never into a stage a reader still needs, and the MMA issuer can tell when a stage
        #   has landed (TILE_BYTES per K tile). Trip counts that differ from the MMA issuer's hang one of the two.
        #   API family: PipelineState(depth, phase) (.stage, .phase, .advance()), the barriers' wait(slot, phase)
        #   and arrive, Tx.copy_async (dispatch, mbar = a barrier's ptr_to([slot])).
        todo("7.3 the TMA producer: warpgroup 1, warp 3, one thread")

        # TODO 7.4: the MMA issuer: warpgroup 1, warp 0, one thread
        #   The MMA role: each tile's accumulator in TMEM columns [0, BLK_N) from the K tiles the producer loads (data
        #   path above). No MMA reads a stage before it has landed or writes TMEM the writeback still reads; the
        #   producer refills a stage, and the writeback reads the accumulator, only once the MMAs are done with them.
        #   API family: the barriers' wait and arrive, Tx.gemm_async (dispatch "tcgen05"), the tcgen05 fences.
        todo("7.4 the MMA issuer: warpgroup 1, warp 0, one thread")

        # TODO 7.5: the writeback: warpgroup 0, 128 threads, thread t owns row t
        #   The writeback role: each complete accumulator reaches D by the data path above, through the registers of
        #   step 6's store_tile (Dreg, Dreg_f16, the view Dreg_wg of EPI_N columns) and Dsmem, rewritten per chunk
        #   (step 6's rule); TMEM goes back to the MMA issuer as early as is safe. Only this warpgroup runs here: a
        #   barrier that also waits for other threads hangs (WB_BARRIER is its named barrier id). The teardown below
        #   frees TMEM and ends the CTA. API family: the barriers' wait and arrive, the tcgen05 fences,
        #   T.ptx.fence.proxy, T.ptx.cp.async_.bulk, Tx.wg.copy_async, Tx.copy, Tx.copy_async, T.cuda.warpgroup_sync.
        todo("7.5 the writeback: warpgroup 0, 128 threads, thread t owns row t")

        # ---- teardown: every role is done; warp 0 of the CTA frees TMEM ----
        T.cuda.cta_sync()
        tmem_pool.dealloc()
    # fmt: on

    return kernel
