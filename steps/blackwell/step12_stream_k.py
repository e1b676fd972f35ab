"""Step 12 (Blackwell): a decomposition that fills the GPU.

Step 11 gives each cluster whole 512x256 tiles. Where the tiles are fewer than the clusters (256
tokens through a 4096-wide layer: 16 tiles for 74 clusters), or leave the last wave mostly empty,
most SMs idle. Make the unit of work (cluster tile, range of K tiles), and let the host choose per
shape, before the kernel is built, how each tile's K tiles are dealt to the clusters: whole, or cut
into ranges whose partial sums clusters add up through an fp32 workspace in global memory. The
cluster tile stays step 11's: a CTA pair, one cta_group::2 MMA per consumer, 512x256 (Hopper's step
12 also chooses narrower tiles and lone CTAs; here there is nothing else to choose).

The kernel is step 11's solution; the TODOs are the host's choice (12.1-12.3), a cluster's walk over its units
(12.4-12.6) and the places in the kernel where a unit, not a tile, matters, or a ragged edge costs time
(12.7-12.15).
`make grade STEP=12` runs it at shapes where it deals whole tiles and where it must share them
(257x264x4104: 2 tiles of 65 K tiles for 74 clusters).
"""

import dataclasses

import tvm
from tvm.backend.cuda.lang.pipeline import MBarrier, PipelineState, TCGen05Bar, TMABar
from tvm.backend.cuda.lang.tile_scheduler import ClusterPersistentScheduler2D
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.backend.cuda.tile_primitive.tma_utils import mma_shared_layout, SwizzleMode
from tvm.tirx.layout import TileLayout, S, tid_in_wg as axis_tid_in_wg

from kernel_helpers.todo import todo

CTA_ROWS = 256  # rows of D one CTA computes per unit: its two consumers' 128 each
CLUSTER_SIZES = (2,)  # CTAs per cluster along M: the pair of one tcgen05 cta_group::2 MMA (as steps 9-11)
TILE_WIDTHS = (256,)  # the columns a cluster tile has: the pair's 256-wide MMA (as steps 9-11)
BLK_K = 64
# What the host's choice weighs: the time of one K iteration of a cluster tile, and of one unit's
# fixup (its partial sums stored, or read and added). NOT MEASURED on Blackwell (no Blackwell GPU has
# run this course's kernels): these are Hopper step 12's H200 values for its 256-wide tiles
# (experiments/every_shape/run2.json), a documented guess. With one tile width only their ratio
# matters: a unit's fixup costs about 27 K iterations.
ITERATION_COST = {256: 2.6}
FIXUP_COST = {256: 70.0}


# TODO 12.1: a plan: what the host decides for one shape
#   A frozen dataclass `Decomposition`: what the host decides for one shape before the kernel is built, and what it
#   costs. The kernel reads it (TODO 12.7: the K tiles of a tile; its tile width and CTAs per cluster must be step 11's,
#   the only values of TILE_WIDTHS and CLUSTER_SIZES), and so does your WorkUnits. Its cost is the busiest cluster's
#   time in the units of ITERATION_COST, and a cluster that shares a tile with others pays FIXUP_COST on top: the host
#   compares plans by it.
todo("12.1 a plan: what the host decides for one shape")


# TODO 12.2: the host's choice
#   plan_decomposition(M, N, K, sm_count): the plan the kernel runs when `plan` is None. Weigh whole tiles against
#   stream-K (for each cluster size and tile width there are: one of each here) by their cost; stream-K only where it
#   promises a clear margin (its cost grows with K faster than the model counts); of equal costs keep the earlier. The
#   grid is sm_count CTAs, one per SM, in clusters of two.
todo("12.2 the host's choice")


# TODO 12.3: stream-K over the last waves
#   A helper of TODO 12.2 (the reference calls it stream_k): the plan that cuts the K iterations of the last tiles into
#   one contiguous range per cluster, so that the clusters finish together, or whole tiles where that does not pay (a
#   range so short that its fixup costs more than it saves does not).
todo("12.3 stream-K over the last waves")


@T.meta_class
class WorkUnits:
    """One cluster's work: a sequence of units (tile, k_begin, k_end), the K tiles k_begin..k_end-1 of a tile.

    What the given kernel code uses: work.valid() (a TIR condition: a unit is left), work.k_begin and
    work.k_end (the current unit's K tiles) and work.next(cluster) (go on to the next unit); TODOs
    12.9-12.15 use whatever else you give it. The TMA thread, both MMA threads and both writeback
    warpgroups of both CTAs walk the same units, so every barrier ring sees as many uses on each side.
    Every K tile of every tile belongs to exactly one unit of one cluster. The order in which a cluster
    walks its units is yours: it decides whether a cluster can end up waiting on one that is waiting on it.
    """

    # TODO 12.4: a cluster's units: the state, a piece of a range, a whole tile
    #   __init__(self, plan, tile_order) and the state a cluster's walk needs: the current unit's tile, k_begin and
    #   k_end as TIR scalars (T.local_scalar: they change at run time), and what finds the next unit. Then @T.inline
    #   helpers that make the current unit a piece of a stream-K range or a whole tile, pointing tile_order at its tile
    #   (update_current_m_n_idx).
    todo("12.4 a cluster's units: the state, a piece of a range, a whole tile")

    # TODO 12.5: the order of a cluster's units: the first, the next, the end
    #   init(cluster), next(cluster) and valid(): the unit this cluster starts with, the one after the current one, and
    #   a TIR condition (valid() is a plain Python method) that is false once the cluster has no unit left. `cluster` is
    #   a TIR expression (bx // CTA_GROUP). Contract: a cluster's first unit never waits on another cluster, and no two
    #   clusters can end up waiting on each other.
    todo("12.5 the order of a cluster's units: the first, the next, the end")

    # TODO 12.6: the cluster that holds a tile's first K tile
    #   first_unit(): for the current tile, the first cluster whose partial sum the tile's final unit adds (a TIR
    #   expression over self.tile, used by TODO 12.15). It is evaluated while the kernel is built, also for plans with
    #   no stream-K tiles.
    todo("12.6 the cluster that holds a tile's first K tile")


def box_rows(first, rows, tail, extent, boxes=1, past=0):
    """The rows TMA loads for `boxes` boxes of `rows` rows side by side from row `first` of a matrix `extent` rows
    tall: all of a box inside it, `tail` of the box that holds its last row, `past` of a box wholly past it."""
    return sum(T.Select(first + (i + 1) * rows <= extent, rows, T.Select(first + i * rows < extent, tail, past))
               for i in range(boxes))


def hgemm_v12(M, N, K, sm_count, plan: Decomposition | None = None):
    """D = A @ B^T for any M >= 1 and N, K multiples of 8 (fp16 in, fp32 in TMEM, fp16 out), with the
    work dealt so that every SM has some.

    Contract: the host decides per shape (plan_decomposition, TODO 12.2; `plan`, when given, replaces its
    choice) and the kernel computes exactly what the plan says: every K tile of every tile once. A tile
    whose K tiles several clusters share is added up in fp32 through `partials`, in an order that does
    not depend on timing, so that a shape gives the same bits on every run. `partials` and `locks` are
    allocated once by the host and zeroed (build.launcher: every parameter after D); a launch must leave
    them as the next launch needs them, since no memset runs between calls. A cluster may wait only on
    clusters that are running (the grid is sm_count CTAs, one per SM, in pairs: all of them at once) and
    that can never be waiting on it. At shapes where whole tiles fill the GPU the kernel is as fast as
    step 11.

    Data path: step 11's, per work unit instead of per tile. The TMA thread loads the unit's K tiles,
    each MMA thread multiplies them into its accumulator in TMEM, each writeback warpgroup reads its
    accumulator out of TMEM; then a unit that covers its whole tile is written back as in step 11, and
    the others are the fixup's: where the partial sums go, who adds them and when (and when TMEM goes
    back to the MMA) is your design.

    Barrier protocol: step 11's barriers (tma2mma, mma2tma, mma2ld, ld2mma), named barriers and
    cluster barrier, unchanged. The fixup adds a lock in global memory (fill in the design cells, "?",
    before the code):
        | lock or barrier                            | counts | who adds or arrives | who waits | starts at |
        |--------------------------------------------|--------|---------------------|-----------|-----------|
        | locks (int32, global memory)               | ?      | ?                   | ?         | ?         |
        | writeback j's named barrier (step 11's)    | ?      | ?                   | ?         | -         |
    Why it cannot deadlock: ?
    What a writeback warpgroup that waits on a lock holds up (its own unit's loads and MMAs, the next
    unit's): ?
    Memory the host allocates (partials, locks), at 148 SMs: ?
    """
    a_type = tvm.DataType("float16")
    d_type = tvm.DataType("float16")
    acc_type = tvm.DataType("float32")
    BLK_M, BLK_N, BLK_K = 128, 128, 64  # per CTA
    # TODO 12.7: the plan in the kernel
    #   `plan`, when given, replaces the host's choice (TODO 12.2); K_TILES, the K tiles of a tile, is the name the
    #   kernel below uses for what it decided. This kernel has one cluster tile, step 11's 512x256 pair: a plan for
    #   another cluster or tile width must stop the build with a message, not build a wrong kernel. And A_TAIL and
    #   B_TAIL, which TODO 12.10 uses: the rows of A in the box that holds A's last row, and of B in the one that
    #   holds B's last row.
    todo("12.7 the plan in the kernel")
    EPI_N = 64  # writeback chunk: 64 fp32 registers per thread, one 128B-swizzled Dsmem row
    WG_NUMBER = 3
    WB_THREADS = 128  # the writeback warpgroup
    WB_BARRIER = 1  # named barrier 1 + j for writeback warpgroup j (0 is the CTA barrier)
    CTA_GROUP = 2  # CTAs per cluster, and the tcgen05 cta_group
    MMA_M, MMA_N = BLK_M * CTA_GROUP, BLK_N * CTA_GROUP  # one MMA for the pair: 256 x 256
    NUM_CONSUMER = 2  # MMA threads, accumulators and writeback warpgroups
    TILE_BYTES_ALL = (NUM_CONSUMER * BLK_M * BLK_K + BLK_N * BLK_K) * 2  # one CTA's stage of the ring
    SMEM_PER_CTA = 227 * 1024  # the most shared memory one CTA may use (sm_90 and sm_100)
    EPILOGUE_SMEM = NUM_CONSUMER * BLK_M * EPI_N * 2 + 1024  # two Dsmem tiles, and the barriers
    PIPE_DEPTH = (SMEM_PER_CTA - EPILOGUE_SMEM) // TILE_BYTES_ALL  # the most whole stages that fit

    A_layout = mma_shared_layout(a_type, SwizzleMode.SWIZZLE_128B_ATOM, (PIPE_DEPTH, NUM_CONSUMER, BLK_M, BLK_K))
    B_layout = mma_shared_layout(a_type, SwizzleMode.SWIZZLE_128B_ATOM, (PIPE_DEPTH, BLK_N, BLK_K))
    D_layout = mma_shared_layout(d_type, SwizzleMode.SWIZZLE_128B_ATOM, (NUM_CONSUMER, BLK_M, EPI_N))
    # TODO 12.8: the workspace and the locks
    #   PARTIALS and LOCKS: the shapes of the two buffers the kernel takes after D. The grader allocates them once,
    #   zeroed, and passes the same ones to every launch. partials (fp32): room for every partial sum a launch leaves
    #   for a final unit, laid out so that a warp's 32 stores of one register are contiguous; locks (int32): one counter
    #   per thing a final unit waits on. Neither may be empty.
    todo("12.8 the workspace and the locks")

    # fmt: off
    @T.prim_func
    def kernel(
        A: T.Buffer((M, K), "float16"),
        B: T.Buffer((N, K), "float16"),
        D: T.Buffer((M, N), "float16"),
        partials: T.Buffer(PARTIALS, acc_type),
        locks: T.Buffer(LOCKS, "int32"),
    ):
        T.device_entry()
        bx = T.cta_id([sm_count])
        cbx, cby = T.cta_id_in_cluster([CTA_GROUP, 1])
        wg_id = T.warpgroup_id([WG_NUMBER])
        warp_id = T.warp_id_in_wg([4])
        lane_id = T.lane_id([32])

        # ---- shared memory: TMEM address slot + barriers, then the tiles at 1 KiB ----
        pool = T.SMEMPool()
        tmem_pool = T.TMEMPool(pool, total_cols=512, cta_group=CTA_GROUP)  # takes the address slot
        tma2mma = TMABar(pool, PIPE_DEPTH)
        mma2tma = TCGen05Bar(pool, PIPE_DEPTH)
        mma2ld = TCGen05Bar(pool, NUM_CONSUMER)
        ld2mma = MBarrier(pool, NUM_CONSUMER)
        pool.move_base_to(1024)  # 128B-swizzled tiles must start on a 1024-byte boundary
        Asmem = pool.alloc((PIPE_DEPTH, NUM_CONSUMER, BLK_M, BLK_K), a_type, layout=A_layout)
        Bsmem = pool.alloc((PIPE_DEPTH, BLK_N, BLK_K), a_type, layout=B_layout)
        Dsmem = pool.alloc((NUM_CONSUMER, BLK_M, EPI_N), d_type, layout=D_layout)
        pool.commit()

        # ---- TMEM: warp 0 of each CTA allocates all 512 columns; consumer j's accumulator is [256 j, 256 j + 256) ----
        tmem_pool.commit()
        tmem = tmem_pool.alloc((128, 512), "float32")

        # ---- barrier init (thread 0 of each CTA, outside any role branch) ----
        tma2mma.init(1)
        mma2tma.init(NUM_CONSUMER)
        mma2ld.init(1)
        ld2mma.init(WB_THREADS * CTA_GROUP)
        T.ptx.fence.mbarrier_init.release.cluster()
        T.ptx.fence.proxy.async_.shared__cta()
        T.ptx.tcgen05.fence__before_thread_sync()
        T.cuda.cluster_sync()
        T.ptx.tcgen05.fence__after_thread_sync()
        # TMEMPool addresses columns from 0: a 512-column allocation always starts there.
        T.cuda.trap_when_assert_failed(tmem_pool.addr == T.uint32(0))

        # TODO 12.9: the units this cluster walks
        #   cluster (this CTA's cluster index), the tile order (step 11's ClusterPersistentScheduler2D over the 512x256
        #   cluster tiles), work (your WorkUnits at its first unit), and step 11's m_st, n_st and d_n_st: where this
        #   CTA's part of the current unit's tile begins. Both CTAs of a cluster walk the same units.
        todo("12.9 the units this cluster walks")

        # ---- TMA producer: warpgroup 2, warp 3, one thread, in each CTA ----
        if wg_id == NUM_CONSUMER:
            if warp_id == 3:
                tma_state = PipelineState(PIPE_DEPTH, 1)  # producer: stages start free
                tma2mma_cta0 = tma2mma.remote_view(0)
                if T.cuda.elect_sync():
                    while work.valid():
                        for k in T.serial(work.k_begin, work.k_end):
                            s = T.meta_var(tma_state.stage)
                            mma2tma.wait(s, tma_state.phase)
                            # TODO 12.10: a K tile's boxes, cut at the matrix's edges
                            #   Step 11's loads of K tile k (this CTA's two boxes of A and its box of B, each
                            #   completing on CTA 0's tma2mma) and CTA 0's arrive with the bytes that will land for
                            #   the pair, without a box that reaches past A or B: TMA fills such rows with zeros (on an
                            #   H200 about 2.8 cycles a row and K tile, which set the time at ragged edges). A box's
                            #   shape is static (one descriptor each), so a cut box is a copy of its own. The bytes
                            #   must be what the copies deliver; CTA 1's stage may be refilled only once the MMA has
                            #   released it (what made sure of that in step 11?). box_rows counts rows.
                            todo("12.10 a K tile's boxes, cut at the matrix's edges")
                            tma_state.advance()
                        work.next(cluster)

        # ---- MMA issuers: warpgroup 2, warps j = 0 and 1, one thread each, in CTA 0 only ----
        if wg_id == NUM_CONSUMER:
            if warp_id < NUM_CONSUMER:
                mma_state = PipelineState(PIPE_DEPTH, 0)  # consumer of tma2mma
                acc_state = PipelineState(1, 1)  # producer of the accumulator: TMEM starts free
                if cbx == 0:
                    if T.cuda.elect_sync():
                        while work.valid():
                            ld2mma.wait(warp_id, acc_state.phase)
                            acc_state.advance()
                            T.ptx.tcgen05.fence__after_thread_sync()
                            for k in T.serial(work.k_begin, work.k_end):
                                s = T.meta_var(mma_state.stage)
                                tma2mma.wait(s, mma_state.phase)
                                T.ptx.tcgen05.fence__after_thread_sync()
                                # TODO 12.11: a K tile of a unit
                                #   Step 11's tcgen05 MMA of one K tile into MMA thread warp_id's accumulator, for a
                                #   unit that may begin at any K tile of its tile: the unit's first K tile overwrites
                                #   the accumulator, every later one adds to it.
                                todo("12.11 a K tile of a unit")
                                mma2tma.arrive(s, cta_group=CTA_GROUP, cta_mask=3)  # both CTAs' stage s
                                mma_state.advance()
                            mma2ld.arrive(warp_id, cta_group=CTA_GROUP, cta_mask=3)  # both CTAs' accumulators
                            work.next(cluster)

        # ---- writeback j: warpgroup j = 0, 1, 128 threads, thread t owns row t ----
        if wg_id < NUM_CONSUMER:
            wb_state = PipelineState(1, 0)  # consumer of mma2ld
            Dreg = T.alloc_local((EPI_N,), acc_type)
            Dreg_f16 = T.alloc_local((EPI_N,), d_type)
            Dreg_wg = Dreg.view(128, EPI_N, layout=TileLayout(S[(128, EPI_N) : (1@axis_tid_in_wg, 1)]))
            # TODO 12.12: this writeback's lock, and its thread's place in a partial sum
            #   The names TODOs 12.13-12.15 use: this thread's index in its warpgroup (thread t owns row t of the
            #   accumulator), the index into locks of the counter for the current unit's tile, this CTA and this
            #   writeback warpgroup (a T.meta_var: it follows work.tile), and a one-element int32 register the waiting
            #   thread reads the lock into.
            todo("12.12 this writeback's lock, and its thread's place in a partial sum")
            while work.valid():
                # TODO 12.13: the final range: wait for the partial sums (while this unit's MMAs run)
                #   A unit that ends a tile it did not begin: wait until every earlier K tile of the tile is in the
                #   workspace, and leave the lock as the next launch needs it (no memset runs between launches). Here it
                #   waits before mma2ld, while this unit's own MMAs still run. One thread waits; every thread reads
                #   (TODO 12.15). Trap: a thread that goes on while the one that waits has not yet seen the count reads
                #   partial sums that are not all there (stale sums).
                #   API: T.ptx.ld.acquire.gpu.global_.b32, T.cuda.warpgroup_sync.
                todo("12.13 the final range: wait for the partial sums (while this unit's MMAs run)")
                mma2ld.wait(wg_id, wb_state.phase)
                wb_state.advance()
                T.ptx.tcgen05.fence__after_thread_sync()
                # TODO 12.14: leave a partial sum for the tile's final range
                #   A unit that stops before its tile's last K tile: this writeback's accumulator, read out of TMEM as
                #   step 11 reads it and handed back to the MMA as step 11 does, goes to this cluster's slot of partials
                #   instead of D; then the tile's lock learns how many K tiles are now in, and the unit ends without a
                #   writeback (work.next, then the loop's next unit). Contract: a final unit that sees the count must
                #   also see every thread's stores.
                #   API: Tx.wg.copy_async, T.cuda.warpgroup_sync, T.cuda.thread_fence, T.cuda.atomic_add (inside
                #   T.evaluate).
                todo("12.14 leave a partial sum for the tile's final range")
                for c in T.unroll(MMA_N // EPI_N):
                    col = T.meta_var(wg_id * MMA_N + c * EPI_N)
                    Tx.wg.copy_async(Dreg_wg[:, :], tmem[:, col:col + EPI_N])
                    T.ptx.tcgen05.wait__ld.sync.aligned()
                    if c == MMA_N // EPI_N - 1:
                        # all TMEM reads of this tile are done: CTA 0's MMA may overwrite it
                        T.ptx.tcgen05.fence__before_thread_sync()
                        ld2mma.arrive(wg_id, remote=0)
                    # TODO 12.15: the final range: add the partial sums, in K order
                    #   A unit that ends a tile it did not begin: add into this chunk's fp32 registers the partial sums
                    #   the other clusters left for it, in an order that does not depend on timing (the same bits every
                    #   run); step 11's writeback of the chunk follows.
                    todo("12.15 the final range: add the partial sums, in K order")
                    Tx.cast(Dreg_f16[:], Dreg[:])
                    # the previous TMA store must have finished reading Dsmem
                    if warp_id == 0:
                        T.ptx.cp.async_.bulk.wait_group.read(0)
                    T.cuda.warpgroup_sync(WB_BARRIER + wg_id)
                    Tx.copy(Dsmem[wg_id, warp_id * 32 + lane_id, :], Dreg_f16[:])
                    T.ptx.fence.proxy.async_.shared__cta()
                    T.cuda.warpgroup_sync(WB_BARRIER + wg_id)
                    if warp_id == 0:
                        if T.cuda.elect_sync():
                            d_m_st = T.meta_var(m_st + wg_id * CTA_GROUP * BLK_M)
                            Tx.copy_async(D[d_m_st:d_m_st + BLK_M, d_n_st + c * EPI_N:d_n_st + (c + 1) * EPI_N],
                                          Dsmem[wg_id, :, :], dispatch="tma_explicit")
                            T.ptx.cp.async_.bulk.commit_group()
                work.next(cluster)
            # the last TMA store has finished before the CTA frees TMEM and exits
            if warp_id == 0:
                T.ptx.cp.async_.bulk.wait_group(0)

        # ---- teardown: both CTAs are done; warp 0 of each CTA frees the pair's TMEM ----
        T.cuda.cluster_sync()
        tmem_pool.dealloc()
    # fmt: on

    return kernel
