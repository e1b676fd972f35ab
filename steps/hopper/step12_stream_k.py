"""Step 12 (Hopper): a decomposition that fills the GPU.

Step 11 gives each cluster whole 256x256 tiles. Where the tiles are fewer than the clusters (256
tokens through a 4096-wide layer: 16 tiles for 66 clusters), or leave the last wave mostly empty,
most SMs idle. Make the unit of work (cluster tile, range of K tiles), and let the host choose per
shape, before the kernel is built, the cluster (a CTA pair sharing B, or one CTA), the tile width
(a multiple of 16 from 32 to 256 columns), which way the tiles face (where the tokens are few, D^T =
B A^T puts them on wgmma's n, any multiple of 16, not on its m, 64 rows a warpgroup) and how each
tile's K tiles are dealt to the clusters: whole, or cut into ranges whose partial sums clusters add
up through an fp32 workspace in global memory.

The kernel is step 11's solution; the TODOs are the host's choice (12.1-12.3), a cluster's walk over its units
(12.4-12.6) and the places in the kernel where a unit, not a tile, matters, or a ragged edge costs time
(12.7-12.15).
`make grade STEP=12` runs it at shapes where it deals whole tiles and where it must share them
(257x264x4104: 18 pair tiles of 65 K tiles for 66 pairs; 1751x2312x3072: two waves of tiles and one more tile).
"""

import dataclasses

import tvm
from tvm.backend.cuda.lang.pipeline import MBarrier, PipelineState, TMABar
from tvm.backend.cuda.lang.tile_scheduler import ClusterPersistentScheduler2D
from tvm.backend.cuda.tile_primitive.tma_utils import SwizzleMode, mma_shared_layout
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

from kernel_helpers.hopper import STAGE_DESC_STEP, acc_col, acc_row, encode_sw128_desc, wgmma_64xNx16
from kernel_helpers.todo import todo

# rows of a CTA tile: 128, its two consumers 64 each (as step 11); or, where M <= 192 or rows are misaligned, 64, the
# consumers splitting its columns: twice the CTAs over the few rows there are
TILE_ROWS = (128, 64)
# CTAs per cluster along M: one alone (a plain launch), or a pair sharing B (as step 10). Of whole tiles that cost
# the same, alone ran faster up to 1000 tokens (0.2-6%) and slower from 4096^3 on (0.1-0.8%) on the H100, all at
# K % 16 == 0 (where it is not, a pair costs less: iteration_cost)
CLUSTER_SIZES = (1, 2)
# the columns a cluster tile may have, widest (fewest bytes per FLOP) first: a wgmma n and, split between the
# two CTAs of a pair, whole 8-row swizzle atoms of B
TILE_WIDTHS = tuple(range(256, 31, -16))
BLK_K = 64
# rows of D in one L2 group of the tile order (16 lone 128-row tiles, or 8 pairs): a wave of 132 lone tiles then
# covers 16 x 8.25 tiles, not step 11's 8 x 16.5, and brings 4,160 rows of A and B into the L2, not 5,248 (8192^3 on
# the H200: 1.28 GB read from DRAM, not 1.53; 0.1-0.4% faster at four of the five squares and seven of the eight
# 8192-token layers, 0.1% slower at one: experiments/every_shape/README.md, L2 groups)
L2_GROUP_ROWS = 2048
# the tile widths to weigh where A and B are swapped (the tokens' side of the tile): 128 columns or more. Narrower
# swapped tiles ran slower than the straight plans the model rated as dear (H200: 136x4608x3584 48 wide 0.93x cuBLAS
# against 1.07x, 300x4096x4096 80 wide 0.86x against 1.01x)
SWAPPED_WIDTHS = tuple(width for width in TILE_WIDTHS if width >= 128)


# A row of A or B is 2K bytes: where K % 16 != 0 every other row begins off a 32-byte boundary, and the SM's TMA
# unit takes about MISALIGNED_ROW_CYCLES cycles per 128-byte row of a box. It issues the rows its CTA loads: the A
# tile and its part of B (in a pair, half: the other CTA multicasts the rest). Where they take longer than the
# wgmma, they set the time: 4096x4096x1000 on an H200, whole 128x256 tiles alone 0.83x cuBLAS, in pairs 1.02x (at
# K = 1008 or 1024 no such gap; experiments/every_shape/README.md, "Rows off 32-byte boundaries").
MISALIGNED_ROW_CYCLES = 3.3


# What the host's choice weighs: the time of one K iteration of a CTA tile `rows` x `width`, in units of a
# 128 x 64 one (384 cycles of an SM). Its wgmma take rows x width / 32 cycles of the tensor cores; its loads bring
# (rows + width) x 128 bytes into the SM at about 64 bytes a cycle. The two overlap: the larger sets the time, and
# where they are close (128 x 128) they slow each other, which a smooth maximum (the 16-norm) counts: it fits what was
# measured on an H200 at 128 rows and widths 64, 128 and 256 (1.0 : 1.36 : 2.6, experiments/every_shape/run2.json; the
# model 1.0 : 1.39 : 2.67) and makes 128 columns 4% dearer per column than 256, as measured (the larger of the two
# alone rates them equal; at 8192x28672x4096 CTA tiles of 128x128 ran 0.993x cuBLAS, 128x256 1.001x). A unit's fixup
# (its partial sums stored, or read and added) costs about 0.275 x width x rows / 128.
def iteration_cost(rows: int, width: int, cluster: int, rows_aligned: bool) -> float:
    tensor, loads = rows * width / 32, 2 * (rows + width)
    issues = 0 if rows_aligned else MISALIGNED_ROW_CYCLES * (rows + width // cluster)
    return (tensor ** 16 + loads ** 16 + issues ** 16) ** (1 / 16) / 384


def fixup_cost(rows: int, width: int) -> float:
    return 0.275 * width * rows / 128


# A tile's writeback goes in rounds of registers -> staging -> TMA store, each waiting for the one before it to have
# left shared memory (TODO 12.15). A round costs about this many units: step 10's two rounds took 2.5% of 4096^3
# (docs/measurements.md); widths of 176, 208 and 224 columns, three or four rounds, ran 2-3% slower per column than
# 256 at 8192 rows, where the iterations cost the same.
WRITEBACK_ROUND_COST = 2.1


# At few rows the SMs wait on DRAM, not on each other: the weights stream once, at about 2.0 TB/s (what step 12
# and cuBLAS reach at 128 tokens, ncu), 440 KB in the time of one of the units above (0.22 us on the H200). A
# plan's DRAM traffic: A, B and D once, and stream-K's fp32 partial sums once: stored, they reach DRAM (4096^3:
# 15 MB more written, its 17 MB of partial sums), read back by the next cluster within the wave, from the L2. The
# SMs' time and the DRAM's overlap, neither wholly: a plan takes about the root of the sum of their squares
# (more than the larger, less than the sum; experiments/every_shape/README.md: the measured plans).
DRAM_BYTES_PER_UNIT = 440e3


# TODO 12.1: a plan: what the host decides for one shape
#   A frozen dataclass `Decomposition`: what the host decides for one shape before the kernel is built, and what it
#   costs. The kernel reads it (TODO 12.7: the CTA tile's rows, one of TILE_ROWS, the tile width, one of TILE_WIDTHS,
#   and the CTAs per cluster along M, one of CLUSTER_SIZES, and whether A and B are swapped: the kernel then computes
#   D^T = B A^T, and the plan's rows and columns are D^T's), and so does your WorkUnits. Its cost is the busiest
#   cluster's time in the units of iteration_cost, its tiles' writebacks included (WRITEBACK_ROUND_COST for each round
#   of TMA stores your straight writeback makes, TODO 12.15, a swapped tile's priced as the straight one of its size:
#   its cost was not measured apart; iteration_cost needs the cluster size and whether K % 16 == 0),
#   and a cluster that shares a tile with others pays fixup_cost on top; but where whole tiles come first, a stream-K
#   range runs at other K offsets than the clusters around it and finds fewer of its loads in the L2: its iterations
#   cost more than a whole tile's (at 4096 and 8192 rows on an H200 about 1.14x, the fixup included). The host
#   compares plans by their cost and by their DRAM traffic (TODO 12.2).
todo("12.1 a plan: what the host decides for one shape")


# TODO 12.2: the host's choice
#   plan_decomposition(M, N, K, sm_count): the plan the kernel runs when `plan` is None. Weigh every CTA height, cluster
#   size and tile width, as whole tiles and as stream-K, by their cost; stream-K over every tile only where it promises
#   a clear margin (its cost grows with K faster than the model counts), stream-K across tiles only in pairs (alone
#   it ran 0.66x cuBLAS where pairs ran 0.95x, at 256x3584x18944), and weigh each plan's DRAM traffic with it, in
#   units of DRAM_BYTES_PER_UNIT (where the weights stream from DRAM, a faster pipeline gains little); 64-row CTAs
#   only where M <= 192 or rows are misaligned (at more aligned rows they ran slower than the model says), and at most
#   128 tokens only those, straight, with split-K only by a margin (there the GPU ranked the plans otherwise than the
#   model: hint 12.2); of equal costs keep the earlier. And weigh the transposed problem (N x M: A and B swapped, in
#   tiles SWAPPED_WIDTHS wide) the same way: at few tokens a straight tile pads them to 64 or 128 rows and loads B's
#   tile once for every row of tiles.
#   The grid is sm_count CTAs, one per SM.
todo("12.2 the host's choice")


# TODO 12.3: stream-K over the last waves
#   A helper of TODO 12.2 (the reference calls it stream_k): the plan that cuts the K iterations of the last tiles into
#   one contiguous range per cluster, so that the clusters finish together, or whole tiles where that does not pay (a
#   range so short that its fixup costs more than it saves does not). With few tiles (half the clusters or fewer),
#   ranges that stop at tile edges (split-K) leave each tile fewer contributors: plans of that kind are yours too.
todo("12.3 stream-K over the last waves")


@T.meta_class
class WorkUnits:
    """One cluster's work: a sequence of units (tile, k_begin, k_end), the K tiles k_begin..k_end-1 of a tile.

    What the given kernel code uses: work.valid() (a TIR condition: a unit is left), work.k_begin and
    work.k_end (the current unit's K tiles) and work.next(cluster) (go on to the next unit); TODOs
    12.9-12.15 use whatever else you give it. The producer and both consumers of both CTAs walk the same
    units, so every barrier ring sees as many uses on each side. Every K tile of every tile belongs to
    exactly one unit of one cluster. The order in which a cluster walks its units is yours: it decides
    whether a cluster can end up waiting on one that is waiting on it.
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
    #   a TIR expression (bx // CLUSTER). Contract: a cluster's first unit never waits on another cluster, and no two
    #   clusters can end up waiting on each other.
    todo("12.5 the order of a cluster's units: the first, the next, the end")

    # TODO 12.6: the cluster that holds a tile's first K tile
    #   first_unit(): for the current tile, the first cluster whose partial sum the tile's final unit adds (a TIR
    #   expression over self.tile, used by TODO 12.14). It is evaluated while the kernel is built, also for plans with
    #   no stream-K tiles.
    todo("12.6 the cluster that holds a tile's first K tile")


def box_rows(first, rows, tail, extent, boxes=1, past=0):
    """The rows TMA loads for `boxes` boxes of `rows` rows side by side from row `first` of a matrix `extent` rows
    tall: all of a box inside it, `tail` of the box that holds its last row, `past` of a box wholly past it."""
    return sum(T.Select(first + (i + 1) * rows <= extent, rows, T.Select(first + i * rows < extent, tail, past))
               for i in range(boxes))


def hgemm_v12(M, N, K, sm_count, plan: Decomposition | None = None):
    """D = A @ B^T for any M >= 1 and N, K multiples of 8, with the work dealt so that every SM has some.

    Contract: the host decides per shape (plan_decomposition, TODO 12.2; `plan`, when given, replaces its
    choice) and the kernel computes exactly what the plan says: every K tile of every tile once. A tile
    whose K tiles several clusters share is added up in fp32 through `partials`, in an order that does
    not depend on timing, so that a shape gives the same bits on every run. `partials` and `locks` are
    allocated once by the host and zeroed (build.launcher: every parameter after D); a launch must leave
    them as the next launch needs them, since no memset runs between calls. A cluster may wait only on
    clusters that are running (the grid is sm_count CTAs, one per SM: all of them at once) and that can
    never be waiting on it. At shapes where whole 256-wide tiles fill the GPU the kernel is as fast as
    step 11.

    Data path: step 11's, per work unit instead of per tile. The producer loads the unit's K tiles, each
    consumer multiplies them; then a unit that covers its whole tile is written back as in step 11, and
    the others are the fixup's: where the partial sums go, who adds them and when is your design. Where
    each cluster has at most one whole tile (STAGING_IN_RING), the staging tiles lie over the ring's first
    stages and the ring has their shared memory for more stages.

    Barrier protocol: step 11's rings, named barriers and cluster barrier, unchanged. The fixup adds a
    lock in global memory, and staging over the ring a named barrier (fill in the design cells, "?",
    before the code):
        | lock or barrier                        | counts | who adds or arrives | who waits | starts at |
        |----------------------------------------|--------|---------------------|-----------|-----------|
        | locks (int32, global memory)           | ?      | ?                   | ?         | ?         |
        | consumer c's named barrier (step 11's) | ?      | ?                   | ?         | -         |
        | named bar 3 (STAGING_IN_RING)          | ?      | ?                   | ?         | -         |
    Why it cannot deadlock: ?
    Memory the host allocates (partials, locks), at 132 SMs: ?
    """
    a_type = tvm.DataType("float16")
    b_type = tvm.DataType("float16")
    d_type = tvm.DataType("float16")
    acc_type = tvm.DataType("float32")

    # TODO 12.7: the plan in the kernel
    #   The names the kernel below uses for what the plan decided: BLK_M (rows of a CTA tile: 128, whose consumers
    #   take 64 rows each, or 64, whose consumers take half the columns each), BLK_N (columns of a cluster tile, the B
    #   rows of a stage), CLUSTER (CTAs per cluster, stacked along M) and K_TILES (K tiles of a tile); `plan`, when
    #   given, replaces the host's choice (TODO 12.2). And STAGING_IN_RING: True only where every cluster's one
    #   writeback (a whole tile, or a final range) is its last unit, so that every load has landed and been used
    #   when the writeback starts; the staging tiles then lie over the ring's first stages and their shared memory
    #   goes to more stages (at 256 tokens each stage is worth 5-6%). And A_TAIL and B_TAIL, which TODO 12.10 uses:
    #   the rows of A in the box that holds A's last row, and of B in the box (a B half) that holds B's last row. And
    #   SWAP (the plan swaps A and B) and MM, NN: the kernel's rows and columns (M and N, or N and M where it swaps);
    #   every name above is of the kernel's problem, MM x NN.
    todo("12.7 the plan in the kernel")
    B_PART = BLK_N // CLUSTER  # rows of the B tile each CTA loads and multicasts
    MMA_K = 16
    NUM_CONSUMERS = 2
    CONSUMER_ROWS = 64  # rows of the CTA tile each consumer owns: one wgmma's
    CONSUMER_N = BLK_N if BLK_M == 2 * CONSUMER_ROWS else BLK_N // 2  # and its columns: all, or half of a 64-row tile
    # Each consumer writes its 64 x CONSUMER_N part in pieces: EPI_N columns at a time through a 128B-swizzled
    # staging tile (a box spans at most 64 columns), then the last REST_N (a multiple of 8 below 64) through an
    # unswizzled one, whose 8-column slices are 1 KiB each and contiguous
    EPI_N = 128 if CONSUMER_N % 128 == 0 else 64
    REST_N = CONSUMER_N % 64
    STAGED_N = CONSUMER_N - REST_N
    REST_COLS = max(REST_N, 8)  # the unswizzled staging tile's columns (8 where there is no rest: it is unused)
    SMEM_PER_CTA = 227 * 1024  # the most shared memory one CTA may use (sm_90 and sm_100)
    # Where A and B are swapped, a consumer's 64 x CONSUMER_N part of D^T is D's CONSUMER_N x 64 block: one staging
    # tile of CONSUMER_N rows of 64 columns (128 bytes, one swizzle atom wide), Tsmem
    STAGING_BYTES = NUM_CONSUMERS * (CONSUMER_N * 64 if SWAP else CONSUMER_ROWS * (EPI_N + REST_COLS)) * 2
    # the staging tiles (none of their own where they lie over the ring), the barriers
    EPILOGUE_SMEM = (0 if STAGING_IN_RING else STAGING_BYTES) + 1024
    PIPE_DEPTH = (SMEM_PER_CTA - EPILOGUE_SMEM) // ((BLK_M + BLK_N) * BLK_K * 2)  # the most whole stages that fit
    PRODUCER_REGS, CONSUMER_REGS = 40, 232  # per thread; 128 * (40 + 2 * 232) fits the 64K register file
    EPILOGUE_BAR = 1  # named barrier id of consumer 0; consumer c uses EPILOGUE_BAR + c

    A_layout = mma_shared_layout(a_type, SwizzleMode.SWIZZLE_128B_ATOM, (PIPE_DEPTH, BLK_M, BLK_K))
    B_layout = mma_shared_layout(b_type, SwizzleMode.SWIZZLE_128B_ATOM, (PIPE_DEPTH, BLK_N, BLK_K))
    D_layout = mma_shared_layout(d_type, SwizzleMode.SWIZZLE_128B_ATOM, (NUM_CONSUMERS, CONSUMER_ROWS, EPI_N))
    R_layout = mma_shared_layout(d_type, SwizzleMode.SWIZZLE_NONE, (NUM_CONSUMERS, CONSUMER_ROWS, REST_COLS))
    T_layout = mma_shared_layout(d_type, SwizzleMode.SWIZZLE_128B_ATOM, (NUM_CONSUMERS, CONSUMER_N, 64))
    ACC = CONSUMER_ROWS * CONSUMER_N // 128  # accumulator registers per consumer thread
    # TODO 12.8: the workspace and the locks
    #   PARTIALS and LOCKS: the shapes of the two buffers the kernel takes after D. The grader allocates them once,
    #   zeroed, and passes the same ones to every launch. partials (fp32): room for every partial sum a launch leaves
    #   for a final unit, laid out so that a warp's 32 stores of one register are contiguous; locks (int32): one counter
    #   per thing a final unit waits on. Neither may be empty.
    todo("12.8 the workspace and the locks")

    @T.prim_func
    def kernel(
        A: T.Buffer((M, K), a_type),
        B: T.Buffer((N, K), b_type),
        D: T.Buffer((M, N), d_type),
        partials: T.Buffer(PARTIALS, acc_type),
        locks: T.Buffer(LOCKS, "int32"),
    ):
        # fmt: off
        T.device_entry()
        T.attr({"tirx.launch_bounds_min_blocks_per_sm": 1})
        bx = T.cta_id([sm_count])
        wg_id = T.warpgroup_id([1 + NUM_CONSUMERS])
        warp_id = T.warp_id_in_wg([4])
        lane_id = T.lane_id([32])

        # ---- shared memory: the two barrier rings, then the 128B-swizzled tiles ----
        pool = T.SMEMPool()
        tma2mma = TMABar(pool, PIPE_DEPTH)
        mma2tma = MBarrier(pool, PIPE_DEPTH)
        pool.move_base_to(1024)
        Asmem = pool.alloc((PIPE_DEPTH, BLK_M, BLK_K), a_type, layout=A_layout)
        Bsmem = pool.alloc((PIPE_DEPTH, BLK_N, BLK_K), b_type, layout=B_layout)
        # the staging tiles lie over the ring's first stages where STAGING_IN_RING (written once both consumers
        # are done with them), else after the ring
        pool.move_base_to(1024 if STAGING_IN_RING else pool.offset)
        if SWAP:
            Tsmem = pool.alloc((NUM_CONSUMERS, CONSUMER_N, 64), d_type, layout=T_layout)
        else:
            Dsmem = pool.alloc((NUM_CONSUMERS, CONSUMER_ROWS, EPI_N), d_type, layout=D_layout)
            Rsmem = pool.alloc((NUM_CONSUMERS, CONSUMER_ROWS, REST_COLS), d_type, layout=R_layout)
        pool.commit()

        # ---- barrier init (thread 0), made visible to both CTAs of the cluster ----
        tma2mma.init(1)
        mma2tma.init(CLUSTER * NUM_CONSUMERS)
        T.ptx.fence.mbarrier_init.release.cluster()
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cluster_sync()

        # ---- work units over 256x256 cluster tiles: both CTAs of a cluster get the same ----
        # TODO 12.9: the units this cluster walks
        #   rank (this CTA's place in its cluster), cluster (this CTA's cluster index), the tile order (step 11's
        #   ClusterPersistentScheduler2D over this plan's cluster tiles, in L2 groups of L2_GROUP_ROWS rows), work (your
        #   WorkUnits at its first unit), and step 11's m_st and n_st: the first row and column of this CTA's part of
        #   the current unit's tile. Both CTAs of a cluster walk the same units. For speed: declaring a rank
        #   (T.cta_id_in_cluster) makes the launch a cluster launch even where a cluster is one CTA, and that launch
        #   placed lone CTAs worse for the L2 (2048^3: 0.951x cuBLAS against 0.991x in a plain launch, H100); a lone
        #   CTA's rank is a constant. And X and Y (T.meta_var): the matrices the kernel's rows and columns come from,
        #   A and B, or B and A where the plan swaps them.
        todo("12.9 the units this cluster walks")

        if wg_id == 0:
            # ---- producer: registers go to the consumer; one thread issues every TMA ----
            T.ptx.setmaxnreg.dec.sync.aligned.u32(PRODUCER_REGS)
            if warp_id == 0:
                if T.cuda.elect_sync():
                    produce = PipelineState(PIPE_DEPTH, 1)  # stages start empty: first waits pass
                    while work.valid():
                        for k in range(work.k_begin, work.k_end):
                            mma2tma.wait(produce.stage, produce.phase)
                            # TODO 12.10: a K tile's boxes, cut at the matrix's edges
                            #   Step 11's loads of K tile k (this CTA's rows of X; its part of Y, into both CTAs'
                            #   stage) and the stage's tma2mma.arrive with the bytes that will land in this CTA,
                            #   without a box that reaches past A or B: TMA fills such rows with zeros, at about 2.8
                            #   cycles a row and K tile (H200), and at a ragged edge they set the time. A box's shape
                            #   is static (one descriptor each), so a cut box is a copy of its own. The bytes must be
                            #   what the copies deliver; a stage may be refilled only once both CTAs' consumers have
                            #   released it (what made sure of that in step 11?). box_rows counts rows.
                            todo("12.10 a K tile's boxes, cut at the matrix's edges")
                            produce.advance()
                        work.next(cluster)
        else:
            # ---- consumer c: wgmma on its rows of full stages, release them, write them back ----
            T.ptx.setmaxnreg.inc.sync.aligned.u32(CONSUMER_REGS)
            consumer = T.meta_var(wg_id - 1)
            acc = T.alloc_local((ACC,), acc_type)
            consume = PipelineState(PIPE_DEPTH, 0)
            release = PipelineState(PIPE_DEPTH, 0)  # one K tile behind `consume`: only its stage is used
            desc_a = T.alloc_local((1,), "uint64")
            desc_b = T.alloc_local((1,), "uint64")
            # TODO 12.11: this consumer's part of the tile, its lock, and its thread's place in a partial sum
            #   desc_a and desc_b (step 11's encode_sw128_desc) at the first row of A and the first row of B this
            #   consumer multiplies, and the names the writeback uses for where its part starts within the CTA
            #   tile (row_0, col_0): in a 128-row tile each consumer owns 64 rows and every column (step 11); in a
            #   64-row tile both own its rows and each owns CONSUMER_N of its BLK_N columns (a multiple of 8: whole
            #   8-row swizzle atoms of the B stage, where a descriptor may start). Then the names TODOs 12.13-12.14
            #   use: this thread's index in its warpgroup, the index into locks of the counter for the current
            #   unit's tile, this CTA and this consumer (a T.meta_var: it follows work.tile), and a one-element
            #   int32 register the waiting thread reads the lock into.
            todo("12.11 this consumer's part of the tile, its lock, and its thread's place in a partial sum")
            while work.valid():
                for k in range(work.k_begin, work.k_end):
                    tma2mma.wait(consume.stage, consume.phase)
                    a_offset = T.meta_var(T.Cast("uint64", consume.stage * (STAGE_DESC_STEP * BLK_M // 128)))
                    # TODO 12.12: a K tile of a unit, at the plan's width
                    #   Step 11's wgmma of one K tile (fence, then BLK_K // MMA_K instructions on this stage) for a B
                    #   stage of BLK_N rows, of which this consumer multiplies CONSUMER_N (wgmma_64xNx16; desc_b starts
                    #   at its first), and a unit that may begin at any K tile of its tile: the unit's first K tile
                    #   overwrites the accumulator, every later one adds to it.
                    todo("12.12 a K tile of a unit, at the plan's width")
                    T.ptx.wgmma.commit_group.sync.aligned()
                    # every group but the one just issued is done: the previous stage is free
                    T.ptx.wgmma.wait_group.sync.aligned(1)
                    if k > work.k_begin:
                        if warp_id == 0:
                            if lane_id == 0:
                                for peer in T.unroll(CLUSTER):
                                    mma2tma.arrive(release.stage, remote=peer)
                        release.advance()
                    consume.advance()
                T.ptx.wgmma.wait_group.sync.aligned(0)
                if warp_id == 0:
                    if lane_id == 0:
                        for peer in T.unroll(CLUSTER):
                            mma2tma.arrive(release.stage, remote=peer)
                release.advance()

                # TODO 12.13: leave a partial sum for the tile's final range
                #   A unit that stops before its tile's last K tile: this consumer's accumulator goes to this cluster's
                #   slot of partials, the tile's lock learns how many K tiles are now in, and the unit ends without a
                #   writeback (work.next, then the loop's next unit). Contract: a final unit that sees the count must
                #   also see every thread's stores. Trap: a count that can be seen before the stores it covers (no
                #   fence, or the fence before all 128 threads have stored) lets the final unit add stale sums.
                #   API: T.cuda.warpgroup_sync, T.cuda.thread_fence, T.cuda.atomic_add (inside T.evaluate).
                todo("12.13 leave a partial sum for the tile's final range")
                # TODO 12.14: the final range: wait for the partial sums, add them
                #   A unit that ends a tile it did not begin: wait until every earlier K tile of the tile is in the
                #   workspace, leave the lock as the next launch needs it (no memset runs between launches), and add the
                #   partial sums into the accumulator in an order that does not depend on timing (the same bits every
                #   run); step 11's writeback follows. One thread waits; every thread reads.
                #   API: T.ptx.ld.acquire.gpu.global_.b32, work.first_unit().
                todo("12.14 the final range: wait for the partial sums, add them")

                # TODO 12.15: the writeback at any width
                #   Step 11's writeback of this consumer's 64 x CONSUMER_N part of the tile, from row_0 and col_0 of the
                #   CTA tile: EPI_N columns at a time through Dsmem while they last (STAGED_N), then the last REST_N
                #   (CONSUMER_N % 64, when not 0) through Rsmem. Contract: every column of the part is stored once, by
                #   a TMA store. Trap: a TMA box under the 128-byte swizzle spans at most 64 columns and its shared
                #   slice must be contiguous: REST_N columns of Dsmem are not; Rsmem's 8-column slices are. Where
                #   STAGING_IN_RING, the staging tiles lie over ring stages the other consumer's last wgmmas may
                #   still read: neither consumer writes them before both are done with their K loop (a named barrier
                #   of both consumers, with an id of its own after step 11's two). Where the plan swaps A and B, the
                #   part is D^T's, 64 x CONSUMER_N: it reaches D through Tsmem[consumer] (CONSUMER_N x 64, one swizzle
                #   atom wide) as one TMA box; which block of D it is, and where each register goes, are yours.
                #   API: T.ptx.bar.sync(id, threads).
                todo("12.15 the writeback at any width")
                work.next(cluster)

            # the last TMA store must finish before the CTA (and its shared memory) goes away
            if warp_id == 0:
                T.ptx.cp.async_.bulk.wait_group(0)

        # no CTA leaves while its peer may still arrive on its barriers
        T.cuda.cluster_sync()

    return kernel
