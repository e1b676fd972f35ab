"""Step 12 (Hopper): a decomposition that fills the GPU.

Step 11 gives each cluster whole 256x256 tiles. Where the tiles are fewer than the clusters (256
tokens through a 4096-wide layer: 16 tiles for 66 clusters), or leave the last wave mostly empty,
most SMs idle. Here the unit of work is (cluster tile, range of K tiles): the host picks, per shape,
how the tiles' K iterations are dealt to the clusters (`plan_decomposition`), and clusters that
share a tile add their partial sums through an fp32 workspace in global memory. The host also picks
which way the tiles face: where the tokens are few, the kernel computes D^T = B A^T, B's rows on
wgmma's m (64 a warpgroup) and the tokens on its n (any multiple of 16), as cuBLAS does.
"""

import dataclasses

import tvm
from tvm.backend.cuda.lang.pipeline import MBarrier, PipelineState, TMABar
from tvm.backend.cuda.lang.tile_scheduler import ClusterPersistentScheduler2D
from tvm.backend.cuda.tile_primitive.tma_utils import SwizzleMode, mma_shared_layout
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

from kernel_helpers.hopper import STAGE_DESC_STEP, acc_col, acc_row, encode_sw128_desc, wgmma_64xNx16

# rows of a CTA tile: 128, its two consumers 64 each (as step 11); or, where M <= 192 or rows are misaligned, 64, the
# consumers splitting its columns: twice the CTAs over the few rows there are (at most FEW_TOKENS rows: 64 only)
TILE_ROWS = (128, 64)
# CTAs per cluster along M: one alone (a plain launch), or a pair sharing B (as step 10). Of whole tiles that cost
# the same, alone first: on the H100 lone CTAs ran 0.2-6% faster than pairs of the same tiles at the 23 layer shapes
# of 128 to 1000 tokens timed (256x4096x4096 1.059x against 1.002x cuBLAS) and at 2048^3 (0.991x against 0.951x),
# 0.1-0.8% slower at 4096^3 and larger (experiments/every_shape/h100-plain-launch), all at K % 16 == 0 (where it is
# not, a pair costs less: iteration_cost); stream-K only in pairs (alone, 0.66x against 0.95x at 256x3584x18944)
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
# the tile widths weighed where A and B are swapped (the tokens' side of the tile): 128 columns or more. Narrower
# swapped tiles ran slower than the straight plans the model rated as dear (H200: 136x4608x3584 48 wide 0.93x cuBLAS
# against 1.07x, 300x4096x4096 80 wide 0.86x against 1.01x; experiments/every_shape/README.md, "A and B swapped")
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


# >>> TODO 12.1: a plan: what the host decides for one shape
# Split-K's fixup, per 128 x 128 of partial sums added: a seventh of stream-K's. Its ranges run side by side and end
# together, so the final one reads each partial sum once, where stream-K's waits on ranges that began later. Fitted
# on an H200 (forced plans at six shapes of 176-256 tokens, experiments/every_shape/README.md, "Split-K alone"):
# with it the model picks the fastest timed plan at 5 of 6, with stream-K's price at 1.
SPLIT_K_FIXUP_COST = 5.0


def writeback_cost(rows: int, width: int) -> float:
    """A tile's writeback: 128-column rounds where a consumer's columns are a multiple of 128, else 64-column
    ones and one more for the rest (TODO 12.15). A swapped tile's one box is priced as the straight tile of its
    size: it stages as many bytes, and its own cost was not measured apart (priced as one round, the model would
    swap the squares too: 4096^3 and 8192^3 take straight tiles here, at 1.00x and 1.05x cuBLAS)."""
    columns = width if rows == 128 else width // 2  # a consumer's
    rounds = columns // 128 if columns % 128 == 0 else columns // 64 + (columns % 64 > 0)
    return WRITEBACK_ROUND_COST * rounds


@dataclasses.dataclass(frozen=True)
class Decomposition:
    """How the K iterations of every tile are dealt to the persistent clusters.

    The tiles (in the scheduler's L2-grouped order) split in two: the first `sk_tiles` are
    stream-K tiles, whose sk_tiles * k_tiles iterations are cut into `sk_units` contiguous ranges,
    one per cluster 0..sk_units-1 (the first `extra` ranges one iteration longer); the rest are
    data-parallel tiles, dealt whole, round robin, to all clusters after their range. Split-K
    (splits > 0) cuts each tile's K tiles apart instead, `splits` ranges a tile; data-parallel is the case
    sk_tiles = 0.
    """

    tile_m: int  # rows of a CTA tile
    tile_n: int  # columns of a cluster tile
    cluster: int  # CTAs per cluster, stacked along M: a cluster tile is (tile_m * cluster) x tile_n
    tiles: int
    k_tiles: int
    clusters: int
    sk_tiles: int
    sk_units: int
    rows_aligned: bool  # every row of A and B begins on a 32-byte boundary (K % 16 == 0)
    # the kernel computes D^T = B A^T: its rows (tile_m) are B's, its columns (tile_n) A's; every field above is
    # of that problem, N x M
    swap_ab: bool = False
    # split-K: each tile's K tiles cut into `splits` ranges (the first k_tiles % splits one K tile longer), one per
    # cluster, sk_units = splits x tiles; 0: stream-K's ranges, cut end to end across the tiles
    splits: int = 0

    @property
    def iterations_per_unit(self) -> int:
        return self.sk_tiles * self.k_tiles // self.sk_units if self.sk_units else 0

    @property
    def extra(self) -> int:
        return self.sk_tiles * self.k_tiles % self.sk_units if self.sk_units else 0

    @property
    def estimated_cost(self) -> float:
        """The busiest cluster's time in the units of iteration_cost: its iterations and writebacks, and a
        stream-K range's fixup (where whole tiles come first: a dearer iteration, the fixup in it)."""
        whole_tiles_each = -(-(self.tiles - self.sk_tiles) // self.clusters)
        range_each = -(-(self.sk_tiles * self.k_tiles) // self.sk_units) if self.sk_units else 0
        writebacks = whole_tiles_each + (1 if self.sk_units else 0)
        if self.splits_k:  # a tile's final range adds the partial sums of its other ranges
            iterations = -(-self.k_tiles // self.splits)
            fixup = (self.splits - 1) * SPLIT_K_FIXUP_COST * self.tile_m * self.tile_n / 128 ** 2
        elif self.streams_every_tile:
            iterations, fixup = range_each, fixup_cost(self.tile_m, self.tile_n)
        else:  # whole tiles, then (if any) stream-K over the last waves
            iterations, fixup = whole_tiles_each * self.k_tiles + range_each * STREAM_K_TAIL_COST, 0.0
        return (iterations * iteration_cost(self.tile_m, self.tile_n, self.cluster, self.rows_aligned) + fixup
                + writebacks * writeback_cost(self.tile_m, self.tile_n))

    @property
    def streams_every_tile(self) -> bool:
        """Stream-K with no wave of whole tiles before it (fewer than two waves of tiles)."""
        return self.sk_units > 0 and self.sk_tiles == self.tiles

    @property
    def splits_k(self) -> bool:
        """Stream-K over every tile in ranges that end at a tile's edge: `splits` of them a tile."""
        return self.splits > 0

    @property
    def margin(self) -> float:
        """What the host multiplies estimated_cost by: STREAM_K_MARGIN for stream-K over every tile, SPLIT_K_MARGIN
        for split-K."""
        if self.splits_k:
            return SPLIT_K_MARGIN
        return STREAM_K_MARGIN if self.streams_every_tile else 1.0

    @property
    def kind(self) -> str:
        if self.sk_tiles == 0:
            return "data-parallel"
        if self.splits_k:
            return f"split-K x{self.splits}"
        return "stream-K"
# <<< TODO 12.1


# >>> TODO 12.2: the host's choice
# Stream-K over every tile (fewer than two waves of them) is taken only where it promises this much over whole
# tiles: at large K it costs more than the model counts (1000x3584x18944: estimated 6% faster than whole 256-wide
# tiles, measured 14% slower).
STREAM_K_MARGIN = 1.15
# Split-K (stream-K over every tile in ranges that end at a tile's edge) has no range that begins in one tile and
# ends in the next: a tile has S contributors, where stream-K's ranges, cut without regard to the tiles, give it
# three where two would do. It ran 0.3-12% faster than the stream-K it replaced at the twelve shapes of 96-256 tokens
# timed (256x3584x14336 0.89x -> 0.95x cuBLAS, where cuBLAS runs split-K x2). Against whole tiles that fill the GPU
# its fixup costs more than the model counts (128x4096x14336: 64-wide whole tiles 1.04x, split-K x2 over 128-wide
# ones 1.01x), which this margin kept there until split-K's fixup was repriced (SPLIT_K_FIXUP_COST; then split-K x3
# alone ran 1.00x there, which FEW_TOKENS_SPLIT_K_MARGIN mends; H200, experiments/every_shape/README.md, "Split-K",
# "Split-K alone" and "Few tokens").
SPLIT_K_MARGIN = 1.01
# At most FEW_TOKENS rows every plan streams B from DRAM, and the fastest timed there had 64-row CTAs, straight: at 18
# of the 19 shapes of 96-128 tokens where 128-row or swapped tiles ran beside them, the best 64-row plan was the
# faster, by up to 6% (128x8192x28672: whole 64x128 tiles 1.11x cuBLAS, split-K x2 over 128x128 ones 1.09x, swapped
# 1.09x; 0.8% slower at 128x14336x4096). The model rates them the other way, for a reason not found (ncu at
# 128x4096x14336: both plans at the same DRAM throughput), so there the host weighs only 64-row CTAs. Of those,
# split-K is taken only where it promises FEW_TOKENS_SPLIT_K_MARGIN over whole tiles: rated 0.5-2.7% faster than
# them, it ran 2-7% slower (1x4096x14336, 96x4096x14336, 128x4096x14336, 128x8192x28672); rated 5-6% faster, it ran
# 2-12% faster (128x3584x18944, 128x3072x24576). H200, experiments/every_shape/README.md, "Few tokens".
FEW_TOKENS = 128
FEW_TOKENS_SPLIT_K_MARGIN = 1.03
# Stream-K after waves of whole tiles (many rows): each cluster's range runs at other K offsets than the other
# clusters', so fewer of its loads are found in the L2 (4096^3: 196 MB read from DRAM, whole tiles 145). An
# iteration of a range costs this much of a whole tile's, its fixup included: fitted to eight shapes of 4096 and
# 8192 rows, each within 1.2% (H200, experiments/every_shape/h200-stream-k-tail).
STREAM_K_TAIL_COST = 1.14


def dram_cost(M: int, N: int, K: int, plan: Decomposition) -> float:
    """A plan's DRAM traffic in the units of iteration_cost: A, B and D once, stream-K's partial sums once."""
    partial_sums = plan.sk_units * plan.cluster * plan.tile_m * plan.tile_n * 4
    return (2 * (M * K + N * K + M * N) + partial_sums) / DRAM_BYTES_PER_UNIT


def estimated_time(M: int, N: int, K: int, plan: Decomposition) -> float:
    """What the host minimizes: the busiest cluster's estimated_cost (stream-K over every tile's times
    STREAM_K_MARGIN) and the plan's DRAM traffic's, overlapped."""
    return ((plan.estimated_cost * plan.margin) ** 2 + dram_cost(M, N, K, plan) ** 2) ** 0.5


def plan_decomposition(M: int, N: int, K: int, sm_count: int) -> Decomposition:
    """The host's choice: the plan that finishes first of the tiles facing the matrix (M x N) and those facing its
    transpose (N x M: A and B swapped), on a tie the first. A swapped tile puts the tokens on wgmma's n, a multiple
    of 16, where a straight one pads them to 64 or 128 rows and loads B's tile once for every row of tiles; swapped
    tiles only SWAPPED_WIDTHS wide, and not stream-K over every tile, the model's least sure plan (swapped, it ran
    0.93-1.02x the straight plan at six shapes; 128x3584x18944 0.94x cuBLAS against 1.01x), but split-K (cuBLAS's
    plan at 176x3584x18944: swapped 128x176 tiles, split-K; step 12 swapped split-K x4 alone 0.95x, 0.85x before).
    At the 18 of 23 layer shapes of 129-1079 tokens, drawn apart from the rule, where it swaps: 0.902x -> 0.963x
    cuBLAS in geometric mean, 16 faster (516x22016x4096 0.80x -> 0.94x, 160x28672x4096 0.85x -> 0.97x), two slower
    by at most 1.4%; at the eight it was found at 0.904x -> 0.960x (136x28672x8192 0.83x -> 0.97x, 8192x3584x18944
    1.00x -> 1.02x). H200,
    experiments/every_shape/README.md, "A and B swapped". At most FEW_TOKENS rows: only 64-row CTAs, straight, split-K
    only by FEW_TOKENS_SPLIT_K_MARGIN (at the 11 shapes of 1-128 tokens where that changed the plan 0.979x -> 1.016x
    cuBLAS in geometric mean, 128x4096x14336 0.97x -> 1.03x, 128x2312x3072 0.85x -> 0.98x; H200, "Few tokens")."""
    if M <= FEW_TOKENS:
        return min((plan for plan in candidate_plans(M, N, K, sm_count, TILE_WIDTHS) if plan.tile_m == 64),
                   key=lambda plan: estimated_time(M, N, K, plan) * (FEW_TOKENS_SPLIT_K_MARGIN if plan.splits_k else 1))
    swapped = [dataclasses.replace(plan, swap_ab=True) for plan in candidate_plans(N, M, K, sm_count, SWAPPED_WIDTHS)
               if plan.splits_k or not plan.streams_every_tile]
    return min(candidate_plans(M, N, K, sm_count, TILE_WIDTHS) + swapped,
               key=lambda plan: estimated_time(M, N, K, plan))


def candidate_plans(M: int, N: int, K: int, sm_count: int, widths: tuple[int, ...]) -> list[Decomposition]:
    """The plans weighed for an M x N problem, its tiles `widths` wide, in the order that breaks ties: of whole tiles,
    stream-K and split-K, for each CTA height, cluster size and tile width. The host takes the one that finishes
    first: its busiest cluster's estimated_cost
    (stream-K over every tile's times STREAM_K_MARGIN) and its DRAM traffic's, overlapped (the root of the sum of
    their squares: 128x3584x18944 takes 64-row CTAs, measured 1.03x cuBLAS, where their sum took
    stream-K, 0.94x); on a tie the earlier (128 rows first, alone first, wider first, whole tiles
    first). Narrower tiles fill the GPU at small M as cuBLAS's do; stream-K evens out the last wave,
    at the price of a fixup per unit (split-K, where the tiles are at most half the clusters, with no range across
    two tiles: 256x3584x14336 0.89x -> 0.95x cuBLAS, eight shapes drawn after the rule 0.877x -> 0.929x in geometric
    mean, H200), and after waves of whole tiles keeps the widest tiles where narrower
    ones would fill the last wave (8192^3: stream-K over 256-wide pairs 1.030x cuBLAS, whole 224-wide tiles
    1.017x, H200). 64-row CTAs only where M <= 192 or rows are misaligned: at 256 tokens and aligned rows the
    model rates them as 128-row ones, and they ran 2-6% slower (experiments/every_shape/h100-rows64), at 264 tokens
    0.74x against 0.91x; up to 192 rows three of them pad fewer rows than two 128-row ones (136: 56, not 120), and
    where the model picked them they ran faster (nine shapes of 129-192 rows that took no part: 0.932x -> 0.966x
    cuBLAS in geometric mean, none slower; experiments/every_shape/h200-rows64-upto192); where rows
    are misaligned a pair of them issues fewer rows a K tile (64 + 64 at 128 wide, not 128 + 32 at 64 wide), which
    the model counts and the GPU confirms (256x4096x4088: 0.82x -> 0.98x cuBLAS; faster at all nine shapes timed,
    experiments/every_shape/h200-rows64-misaligned)."""
    k_tiles, rows_aligned = -(-K // BLK_K), K % 16 == 0
    candidates, split_k_alone = [], []
    for rows in TILE_ROWS:
        if rows < 128 and M > 192 and rows_aligned:
            continue
        for cluster in CLUSTER_SIZES:
            for tile_n in widths:
                tiles = -(-M // (rows * cluster)) * -(-N // tile_n)
                candidates.append(Decomposition(rows, tile_n, cluster, tiles, k_tiles, sm_count // cluster, 0, 0,
                                                rows_aligned))
                if cluster > 1:  # stream-K alone ran 0.66x cuBLAS where pairs ran 0.95x (256x3584x18944)
                    candidates.append(stream_k(tile_n, cluster, tiles, k_tiles, sm_count // cluster, rows,
                                               rows_aligned))
                # split-K alone too (H200: 150x3072x24576 swapped x5 alone 0.97x, in pairs 0.90x before): first where
                # one column of tiles holds all of N (the operand a pair shares is read by every CTA and stays in the
                # L2; swapped, 1.5-3% faster alone at five shapes), else last, so that a tie keeps the pair
                (candidates if cluster > 1 or N <= tile_n else split_k_alone).extend(
                    split_k(tile_n, cluster, tiles, k_tiles, sm_count // cluster, rows, rows_aligned))
    return candidates + split_k_alone
# <<< TODO 12.2


# >>> TODO 12.3: stream-K over the last waves
MIN_K_TILES_PER_UNIT = 8  # a shorter K range spends more on its fixup than it saves (CUTLASS uses 8)


def stream_k(tile_n: int, cluster: int, tiles: int, k_tiles: int, clusters: int, tile_m: int,
             rows_aligned: bool) -> Decomposition:
    """CUTLASS's sm90 stream-K: the last partial wave and one full wave before it (if any) cut into one
    K range per cluster, so every cluster ends with the same number of iterations; a range keeps at
    least MIN_K_TILES_PER_UNIT iterations. Whole tiles where that cannot be had."""
    full_waves, tail = divmod(tiles, clusters)
    whole_tiles = Decomposition(tile_m, tile_n, cluster, tiles, k_tiles, clusters, 0, 0, rows_aligned)
    if tail == 0:
        return whole_tiles
    sk_tiles = tail + (clusters if full_waves >= 1 else 0)
    sk_units = min(clusters, sk_tiles * k_tiles // MIN_K_TILES_PER_UNIT)
    if full_waves >= 1 and sk_units < clusters:  # clusters without a unit would idle while the rest catch up
        return whole_tiles
    if sk_units <= sk_tiles and full_waves == 0:  # at most a tile per unit: whole tiles do as well
        return whole_tiles
    return Decomposition(tile_m, tile_n, cluster, tiles, k_tiles, clusters, sk_tiles, sk_units, rows_aligned)


def split_k(tile_n: int, cluster: int, tiles: int, k_tiles: int, clusters: int, tile_m: int,
            rows_aligned: bool) -> list[Decomposition]:
    """CUTLASS's SplitK: where the tiles are at most half the clusters, every tile's K tiles cut into S ranges of
    equal length or one K tile longer, S clusters a tile (no range shorter than MIN_K_TILES_PER_UNIT): a range ends
    at its tile's edge, so a cluster has one piece of one tile, and a tile's final range adds S - 1 partial sums."""
    return [Decomposition(tile_m, tile_n, cluster, tiles, k_tiles, clusters, tiles, tiles * splits, rows_aligned,
                          splits=splits)
            for splits in range(2, clusters // tiles + 1) if k_tiles // splits >= MIN_K_TILES_PER_UNIT]
# <<< TODO 12.3


@T.meta_class
class WorkUnits:
    """The persistent loop over one cluster's work: (tile, k_begin, k_end) segments.

    A stream-K cluster walks its iteration range backwards, tile by tile: first the start of its
    last tile (a partial sum that waits on nobody), last the end of its first tile (the tile's final
    split, which waits for the clusters before it). Then its data-parallel tiles, whole.
    """

    # >>> TODO 12.4: a cluster's units: the state, a piece of a range, a whole tile
    def __init__(self, plan: Decomposition, tile_order: ClusterPersistentScheduler2D):
        self.plan = plan
        self.tile_order = tile_order  # maps a tile's index to its (m_idx, n_idx)
        self.tile = T.local_scalar("int32")
        self.k_begin = T.local_scalar("int32")
        self.k_end = T.local_scalar("int32")
        self.cursor = T.local_scalar("int32")  # the iteration before which the next segment ends
        self.range_begin = T.local_scalar("int32")

    @T.inline
    def _segment_ending_at(self, cursor):
        K_TILES = T.meta_var(self.plan.k_tiles)
        self.tile = (cursor - 1) // K_TILES
        self.k_begin = T.max(self.tile * K_TILES, self.range_begin) - self.tile * K_TILES
        self.k_end = cursor - self.tile * K_TILES
        self.cursor = self.tile * K_TILES + self.k_begin
        self.tile_order.update_current_m_n_idx(self.tile)

    @T.inline
    def _data_parallel(self, tile):
        self.tile = tile  # `tile` may read self.tile: use only self.tile below
        self.k_begin = 0
        self.k_end = self.plan.k_tiles
        self.cursor = -1
        self.tile_order.update_current_m_n_idx(self.tile)
    # <<< TODO 12.4

    # >>> TODO 12.5: the order of a cluster's units: the first, the next, the end
    @T.inline
    def init(self, cluster):
        if self.plan.splits_k:  # range `part` of tile cluster // S, the first K_TILES % S one K tile longer
            S, K_TILES = T.meta_var(self.plan.splits), T.meta_var(self.plan.k_tiles)
            IPU, EXTRA = T.meta_var(K_TILES // S), T.meta_var(K_TILES % S)
            part = T.meta_var(cluster % S)
            self.range_begin = cluster // S * K_TILES + part * IPU + T.min(part, EXTRA)
            range_length = T.meta_var(IPU + T.Select(part < EXTRA, 1, 0))
        else:  # the tiles' iterations end to end, cut into sk_units ranges, the first `extra` one longer
            IPU, EXTRA = T.meta_var(self.plan.iterations_per_unit), T.meta_var(self.plan.extra)
            self.range_begin = cluster * IPU + T.min(cluster, EXTRA)
            range_length = T.meta_var(IPU + T.Select(cluster < EXTRA, 1, 0))
        if cluster < self.plan.sk_units:
            self._segment_ending_at(self.range_begin + range_length)
        else:
            self._data_parallel(self.plan.sk_tiles + cluster)

    @T.inline
    def next(self, cluster):
        if self.cursor > self.range_begin:
            self._segment_ending_at(self.cursor)
        elif self.cursor >= 0:  # the stream-K range is done
            self._data_parallel(self.plan.sk_tiles + cluster)
        else:
            self._data_parallel(self.tile + self.plan.clusters)

    def valid(self):
        return self.tile < self.plan.tiles
    # <<< TODO 12.5

    # >>> TODO 12.6: the cluster that holds a tile's first K tile
    def first_unit(self):
        """The cluster whose range holds this tile's first iteration."""
        IPU, EXTRA = self.plan.iterations_per_unit, self.plan.extra
        if IPU == 0:  # no stream-K tiles: every tile is its own first and final split
            return self.plan.clusters
        if self.plan.splits_k:
            return self.tile * self.plan.splits
        first = self.tile * self.plan.k_tiles
        return T.Select(first < EXTRA * (IPU + 1), first // (IPU + 1), EXTRA + (first - EXTRA * (IPU + 1)) // IPU)
    # <<< TODO 12.6


def box_rows(first, rows, tail, extent, boxes=1, past=0):
    """The rows TMA loads for `boxes` boxes of `rows` rows side by side from row `first` of a matrix `extent` rows
    tall: all of a box inside it, `tail` of the box that holds its last row, `past` of a box wholly past it."""
    return sum(T.Select(first + (i + 1) * rows <= extent, rows, T.Select(first + i * rows < extent, tail, past))
               for i in range(boxes))


def hgemm_v12(M, N, K, sm_count, plan: Decomposition | None = None):
    """D = A @ B^T for any M >= 1 and N, K multiples of 8, with the work dealt so that every SM has some.

    The host (plan_decomposition, once per shape) picks the CTA tile's rows (128, or 64 where M <=
    192 or K % 16 != 0), the cluster (one CTA alone, a plain launch, or a CTA pair sharing B, as steps
    9-11), the tile width (TILE_WIDTHS: a multiple of 16 from 32 to 256 columns), which way the tiles face
    (D's, or D^T's where A and B are swapped: the kernel then runs the N x M problem D^T = B A^T, its rows
    loaded from B and its columns from A) and how each tile's K tiles are dealt: whole (data-parallel), or cut
    into one contiguous range of K iterations per cluster (stream-K), or each tile's into the same number of
    ranges (split-K). `plan` replaces that choice (experiments/every_shape times the others).

    Data path: step 11's, per work unit instead of per tile. A unit is (tile, k_begin, k_end) from
    WorkUnits, which the producer and both consumers walk alike (the same units, the same K tiles:
    the rings see the same number of uses on both sides).
        producer: for k in k_begin..k_end: step 11's loads of K tile k, but no box reaches past the matrix (no
        rows for TMA to fill with zeros): the box that holds A's last row is A_TAIL rows tall, B's B_TAIL; a CTA
        wholly past M loads no A, a B half wholly past N loads B's last B_TAIL rows (so that each CTA's stage still
        waits on both producers); the stage's barrier expects the bytes of the boxes loaded.
        consumer c: step 11's wgmma loop over k_begin..k_end on its part of the CTA tile (rows 64c..64c+63
        of a 128-row tile; columns c x tile_n / 2 onwards of a 64-row one, whose consumers share its A),
        the first K tile of the unit overwriting the accumulator; then one of three endings:
        - a tile's first or middle range (k_end < k_tiles): its 64-row fp32 partial sum goes to
          partials[unit's cluster, rank, c] (register i of thread t at [..., i, t]: a warp's 32 stores of
          one register are 128 contiguous bytes), then the tile's lock counts its K tiles; no store to D.
        - a tile's final range (k_end = k_tiles, k_begin > 0): wait until the lock says K tiles
          0..k_begin are in, zero the lock, add the partial sums of the clusters first_unit..cluster-1
          (in that order: the K order), then the writeback.
        - a whole tile (k_begin = 0, k_end = k_tiles): the writeback.
        The writeback is step 11's for a consumer's columns but the last CONSUMER_N % 64 (128B-swizzled
        staging, 64-column TMA boxes); those go through an unswizzled staging tile whose 8-column slices
        are contiguous, one TMA box each (a box under the 128-byte swizzle spans 64 columns). Where A and
        B are swapped, a consumer's 64 x CONSUMER_N part of D^T is D's CONSUMER_N x 64 block: staged
        transposed in Tsmem (64 columns, one swizzle atom wide) and stored as one box. Where each
        cluster has at most one whole tile (STAGING_IN_RING), the staging tiles lie over the ring's first
        stages, whose loads have all been used by then, and the ring has their bytes for more stages.

    Barrier protocol: step 11's rings, named barriers and cluster barrier, unchanged. The fixup adds
    one lock per (stream-K tile, CTA rank, consumer) in global memory, and reuses the consumer's named
    barrier; staging over the ring adds one named barrier of both consumers:
        | lock / barrier     | counts          | who adds / arrives                | who waits               | start |
        |--------------------|-----------------|-----------------------------------|-------------------------|-------|
        | locks[tile, r, c]  | K tiles summed  | thread 0 of consumer c of CTA r    | thread 0 of consumer c  | 0, set|
        | (int32, global)    | into partials   | of each cluster with a first or    | of CTA r of the cluster | by the|
        |                    |                 | middle range of the tile: after    | with the tile's final   | host  |
        |                    |                 | bar 1+c, threadfence, atomicAdd of | range: ld.acquire.gpu   | once; |
        |                    |                 | its K-tile count                   | until = k_begin; then   | left 0|
        |                    |                 |                                    | stores 0                | after |
        | named bar 1+c      | 128 threads     | consumer c: after its partial      | the same                | -     |
        |                    |                 | stores (before the count), after   |                         |       |
        |                    |                 | the lock wait (before the loads)   |                         |       |
        | named bar 3        | 256 threads     | both consumers, after their K loop | the same                | -     |
        | (STAGING_IN_RING)  |                 | (wait_group 0), before the staging |                         |       |
    Why it cannot deadlock: a cluster walks its range backwards, so its first unit is the start of its
    last tile (a first or middle range, which waits on nobody) and only its last unit is a final range,
    which waits on clusters with lower indices. Cluster 0 never waits; each cluster waits only on
    ones before it, whose first units need nothing from it. The grid is the clusters the GPU holds at
    once (sm_count CTAs, one per SM), so every cluster waited on is resident.
    Deterministic: each partial sum has its own slot and the final range adds them in a fixed order,
    so a shape gives the same bits on every run (checked on the GPU by experiments/every_shape); the
    order differs from a data-parallel tile's, so the result is within the grader's tolerance of the
    fp32 reference, not bit-equal to step 11.

    Memory the host allocates once (build.launcher, zeroed): partials, 64 KiB x tile_m x tile_n / 128^2
    per CTA and stream-K cluster (up to 16.5 MiB at 132 SMs and 128 x 256 tiles); locks, 4 bytes per stream-K
    tile, CTA and consumer. A launch leaves every lock at 0 again, so no memset precedes a call.

    Measured (one interleaved run per shape, ratio = cuBLAS time / kernel time), the whole bench on H200s
    (docs/ladder-h200.md): 2048^3 0.987x (step 8 0.984x), 4096^3 1.008x, 8192^3 1.053x; Llama-3-8B and
    Qwen2.5-7B layers at 128 to 8192 tokens 0.933-1.133x, geometric mean 1.010x (the Triton seed 0.817x, step 10
    0.747x where it runs). On an H100, before the host's last changes (experiments/every_shape/h100-squares-1128):
    2048^3 0.996x, 4096^3 1.008x, 8192^3 1.022x. A stream-K unit's fixup is expensive (H200): at 2048^3,
    stream-K over 64 tiles on 66 clusters ran 0.84x against whole tiles' 0.98x; the fp32 partials of 132 CTAs
    (17 MB) are stored and read back. At 4096^3 the writeback is what is left (experiments/every_shape/README.md:
    a writeback that costs nothing would give 1.040x). Where K % 16 != 0, rows of A and B off 32-byte boundaries
    slow a lone CTA's loads and the host takes pairs (H200, ten such shapes: 0.772x -> 0.882x cuBLAS in geometric
    mean, 3000x3000x1000 0.761x -> 0.976x). At decode batches (M < 64) and ragged edges TMA's zero-filled rows had
    set the time (about 2.8 cycles a row and K tile): with boxes that end at the matrix, 1x4096x14336 0.68x -> 1.02x,
    8x8192x8192 0.97x -> 1.10x, 136x4096x14336 0.42x -> 0.95x, 200x4096x14336 0.58x -> 0.95x, 776x5000x2040 0.76x
    -> 0.83x (H200, experiments/every_shape/README.md, "Decode batches" and "Ragged edges"). Split-K alone, swapped
    and in ranges of unequal length, at the 19 shapes where it changed the plan: 0.956x -> 0.992x cuBLAS in
    geometric mean (176x3584x18944 0.85x -> 0.94x; 128x4096x14336 1.04x -> 1.00x, the largest of seven losses; H200,
    "Split-K alone, swapped, and in ranges of unequal length").
    """
    a_type = tvm.DataType("float16")
    b_type = tvm.DataType("float16")
    d_type = tvm.DataType("float16")
    acc_type = tvm.DataType("float32")

    # >>> TODO 12.7: the plan in the kernel
    plan = plan or plan_decomposition(M, N, K, sm_count)
    SWAP = plan.swap_ab
    MM, NN = (N, M) if SWAP else (M, N)  # the kernel's rows and columns: D^T's where A and B are swapped
    BLK_M = plan.tile_m
    BLK_N = plan.tile_n
    CLUSTER = plan.cluster  # CTAs per cluster, stacked along M
    K_TILES = plan.k_tiles
    # where each cluster has at most one whole tile, every load has landed and been used when the writeback
    # starts: D is staged over the ring's first stages, and the staging tiles' shared memory goes to more stages
    # (the weights stream faster with more in flight: 256x4608x3584 0.879x -> 0.943x cuBLAS on the H100)
    STAGING_IN_RING = plan.sk_units == 0 and plan.tiles <= plan.clusters
    # No box reaches past the matrix: TMA would fill its rows past A or B with zeros, at about 2.8 cycles a row and K
    # tile, and at a ragged edge those rows, not the loads, would set the time (H200: 1x4096x14336 0.68x -> 1.02x
    # cuBLAS, 136x4096x14336 0.42x -> 0.95x). The box that holds A's last row is A_TAIL rows tall, the one that holds
    # B's last row B_TAIL; the stage's rows past a box hold stale data, read only into rows past M or columns past N,
    # which the TMA store clips.
    A_TAIL = MM % BLK_M or BLK_M
    B_TAIL = NN % (BLK_N // CLUSTER) or BLK_N // CLUSTER
    # <<< TODO 12.7
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
    # tile of CONSUMER_N rows of 64 columns (128 bytes, one swizzle atom wide), stored as one box
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
    # >>> TODO 12.8: the workspace and the locks
    # a partial sum per stream-K cluster (it has at most one: the start of its last tile), per CTA and
    # consumer, stored register-major so that a warp's 32 stores of one register are 128 contiguous bytes
    PARTIALS = (max(plan.sk_units, 1), CLUSTER, NUM_CONSUMERS, ACC, 128)
    # per stream-K tile, CTA and consumer: how many of the tile's K tiles are in the workspace
    LOCKS = (max(plan.sk_tiles * CLUSTER * NUM_CONSUMERS, 1),)
    # <<< TODO 12.8

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
        # >>> TODO 12.9: the units this cluster walks
        if CLUSTER > 1:  # declaring a rank makes a cluster launch, even of one CTA: it places CTAs worse for the L2
            rank = T.cta_id_in_cluster([CLUSTER])
        else:
            rank = T.meta_var(0)
        cluster = T.meta_var(bx // CLUSTER)
        X = T.meta_var(B if SWAP else A)  # the matrix of the kernel's rows (MM x K)
        Y = T.meta_var(A if SWAP else B)  # and of its columns (NN x K)
        tile_order = ClusterPersistentScheduler2D(
            "ts", num_m_tiles=-(-MM // (CLUSTER * BLK_M)), num_n_tiles=-(-NN // BLK_N),
            l2_group_size=L2_GROUP_ROWS // (CLUSTER * BLK_M), num_clusters=sm_count // CLUSTER)
        work = WorkUnits(plan, tile_order)
        work.init(cluster)
        m_st = T.meta_var(tile_order.m_idx * (CLUSTER * BLK_M) + rank * BLK_M)
        n_st = T.meta_var(tile_order.n_idx * BLK_N)
        # <<< TODO 12.9

        if wg_id == 0:
            # ---- producer: registers go to the consumer; one thread issues every TMA ----
            T.ptx.setmaxnreg.dec.sync.aligned.u32(PRODUCER_REGS)
            if warp_id == 0:
                if T.cuda.elect_sync():
                    produce = PipelineState(PIPE_DEPTH, 1)  # stages start empty: first waits pass
                    while work.valid():
                        for k in range(work.k_begin, work.k_end):
                            mma2tma.wait(produce.stage, produce.phase)
                            # >>> TODO 12.10: a K tile's boxes, cut at the matrix's edges
                            # what lands in this CTA: its rows of A and the rows of every B half of the cluster
                            tma2mma.arrive(produce.stage, (box_rows(m_st, BLK_M, A_TAIL, MM)
                                                           + box_rows(n_st, B_PART, B_TAIL, NN, CLUSTER, past=B_TAIL))
                                           * BLK_K * 2)
                            if m_st + BLK_M <= MM:
                                Tx.copy_async(Asmem[produce.stage, :, :],
                                              X[m_st:m_st + BLK_M, k * BLK_K:(k + 1) * BLK_K],
                                              dispatch="tma_explicit", mbar=tma2mma.ptr_to([produce.stage]))
                            elif m_st < MM:
                                Tx.copy_async(Asmem[produce.stage, 0:A_TAIL, :],
                                              X[m_st:m_st + A_TAIL, k * BLK_K:(k + 1) * BLK_K],
                                              dispatch="tma_explicit", mbar=tma2mma.ptr_to([produce.stage]))
                            # this CTA's half of the B tile, written into both CTAs' stage
                            b_st = T.meta_var(n_st + rank * B_PART)
                            if b_st + B_PART <= NN:
                                Tx.copy_async(Bsmem[produce.stage, rank * B_PART:(rank + 1) * B_PART, :],
                                              Y[b_st:b_st + B_PART, k * BLK_K:(k + 1) * BLK_K],
                                              dispatch="tma_explicit", mbar=tma2mma.ptr_to([produce.stage]),
                                              cta_mask=(1 << CLUSTER) - 1)
                            else:
                                # the half that holds B's last row; a half wholly past N loads B's last rows too
                                # (into columns past N): each CTA's stage then fills from both producers, as in
                                # step 11, and the pair keeps in step (loading nothing is right too: each producer
                                # waits on both CTAs' consumers, and the CTA left alone runs at most a stage ahead)
                                tail_st = T.meta_var(T.Select(b_st < NN, b_st, NN - B_TAIL))
                                Tx.copy_async(Bsmem[produce.stage, rank * B_PART:rank * B_PART + B_TAIL, :],
                                              Y[tail_st:tail_st + B_TAIL, k * BLK_K:(k + 1) * BLK_K],
                                              dispatch="tma_explicit", mbar=tma2mma.ptr_to([produce.stage]),
                                              cta_mask=(1 << CLUSTER) - 1)
                            # <<< TODO 12.10
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
            # >>> TODO 12.11: this consumer's part of the tile, its lock, and its thread's place in a partial sum
            # consumer c's rows of A and columns of B: (64c, all) in a 128-row tile, (all, CONSUMER_N c) in a 64-row one
            row_0 = T.meta_var(consumer * (BLK_M - CONSUMER_ROWS))
            col_0 = T.meta_var(consumer * (BLK_N - CONSUMER_N))
            encode_sw128_desc(desc_a[0], Asmem.ptr_to([0, row_0, 0]))
            encode_sw128_desc(desc_b[0], Bsmem.ptr_to([0, col_0, 0]))
            thread = T.meta_var(warp_id * 32 + lane_id)
            lock_index = T.meta_var((work.tile * CLUSTER + rank) * NUM_CONSUMERS + consumer)
            seen = T.alloc_local((1,), "int32")
            # <<< TODO 12.11
            while work.valid():
                for k in range(work.k_begin, work.k_end):
                    tma2mma.wait(consume.stage, consume.phase)
                    a_offset = T.meta_var(T.Cast("uint64", consume.stage * (STAGE_DESC_STEP * BLK_M // 128)))
                    # >>> TODO 12.12: a K tile of a unit, at the plan's width
                    b_offset = T.meta_var(T.Cast("uint64", consume.stage * (STAGE_DESC_STEP * BLK_N // 128)))
                    T.ptx.wgmma.fence.sync.aligned()
                    for kk in T.unroll(BLK_K // MMA_K):
                        wgmma_64xNx16(acc, desc_a[0] + a_offset, desc_b[0] + b_offset, kk,
                                      (k - work.k_begin) * (BLK_K // MMA_K) + kk != 0, CONSUMER_N)
                    # <<< TODO 12.12
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

                # >>> TODO 12.13: leave a partial sum for the tile's final range
                if work.k_end < K_TILES:
                    # ---- not the tile's last K tiles: leave the partial sum for the tile's final split ----
                    for i in T.unroll(ACC):
                        partials[cluster, rank, consumer, i, thread] = acc[i]
                    T.cuda.warpgroup_sync(EPILOGUE_BAR + consumer)
                    if warp_id == 0:
                        if lane_id == 0:
                            T.cuda.thread_fence()  # every thread's stores, seen by the GPU before the count
                            T.evaluate(T.cuda.atomic_add(locks.ptr_to([lock_index]), work.k_end - work.k_begin))
                    work.next(cluster)
                    continue
                # <<< TODO 12.13
                # >>> TODO 12.14: the final range: wait for the partial sums, add them
                if work.k_begin > 0:
                    # ---- the tile's final split: wait for K tiles 0..k_begin, add them in K order ----
                    if warp_id == 0:
                        if lane_id == 0:
                            seen[0] = -1
                            while seen[0] != work.k_begin:
                                T.ptx.ld.acquire.gpu.global_.b32(seen[0], locks.ptr_to([lock_index]))
                            locks[lock_index] = 0  # no one else touches it again: zero for the next launch
                    T.cuda.warpgroup_sync(EPILOGUE_BAR + consumer)
                    for unit in range(work.first_unit(), cluster):
                        for i in T.unroll(ACC):
                            acc[i] = acc[i] + partials[unit, rank, consumer, i, thread]
                # <<< TODO 12.14

                # >>> TODO 12.15: the writeback at any width
                if STAGING_IN_RING:
                    # the staging tiles lie over stages whose A rows (or all of A, in a 64-row tile) the other
                    # consumer's last wgmmas may still read
                    T.ptx.bar.sync(EPILOGUE_BAR + NUM_CONSUMERS, NUM_CONSUMERS * 128)
                if SWAP:
                    # ---- D^T's 64 x CONSUMER_N part is D's CONSUMER_N x 64 block: staged transposed, one TMA store ----
                    # the previous tile's TMA store must have finished reading Tsmem
                    if warp_id == 0:
                        T.ptx.cp.async_.bulk.wait_group.read(0)
                    T.cuda.warpgroup_sync(EPILOGUE_BAR + consumer)
                    for i in T.unroll(ACC):
                        Tsmem[consumer, acc_col(lane_id, i), acc_row(0, warp_id, lane_id, i)] = T.cast(acc[i], d_type)
                    T.ptx.fence.proxy.async_.shared__cta()
                    T.cuda.warpgroup_sync(EPILOGUE_BAR + consumer)
                    if warp_id == 0:
                        if T.cuda.elect_sync():
                            row = T.meta_var(n_st + col_0)  # D's rows are the kernel's columns
                            col = T.meta_var(m_st + row_0)
                            Tx.copy_async(D[row:row + CONSUMER_N, col:col + CONSUMER_ROWS], Tsmem[consumer, :, :],
                                          dispatch="tma_explicit")
                            T.ptx.cp.async_.bulk.commit_group()
                else:
                    # ---- writeback: registers -> fp16 -> Dsmem, then one TMA store ----
                    # the previous tile's TMA store must have finished reading Dsmem
                    for half in T.unroll(STAGED_N // EPI_N):
                        if warp_id == 0:
                            T.ptx.cp.async_.bulk.wait_group.read(0)
                        T.cuda.warpgroup_sync(EPILOGUE_BAR + consumer)
                        for i in T.unroll(EPI_N // 2):
                            Dsmem[consumer, acc_row(0, warp_id, lane_id, i), acc_col(lane_id, i)] = T.cast(
                                acc[half * (EPI_N // 2) + i], d_type)
                        T.ptx.fence.proxy.async_.shared__cta()
                        T.cuda.warpgroup_sync(EPILOGUE_BAR + consumer)
                        if warp_id == 0:
                            if T.cuda.elect_sync():
                                row = T.meta_var(m_st + row_0)
                                for part in T.unroll(EPI_N // 64):
                                    col = T.meta_var(n_st + col_0 + half * EPI_N + part * 64)
                                    Tx.copy_async(D[row:row + CONSUMER_ROWS, col:col + 64],
                                                  Dsmem[consumer, :, part * 64:(part + 1) * 64], dispatch="tma_explicit")
                                T.ptx.cp.async_.bulk.commit_group()
                    if REST_N > 0:
                        # ---- the last REST_N columns: unswizzled staging, one 8-column box per 1 KiB ----
                        if warp_id == 0:
                            T.ptx.cp.async_.bulk.wait_group.read(0)
                        T.cuda.warpgroup_sync(EPILOGUE_BAR + consumer)
                        for i in T.unroll(REST_N // 2):
                            Rsmem[consumer, acc_row(0, warp_id, lane_id, i), acc_col(lane_id, i)] = T.cast(
                                acc[STAGED_N // 2 + i], d_type)
                        T.ptx.fence.proxy.async_.shared__cta()
                        T.cuda.warpgroup_sync(EPILOGUE_BAR + consumer)
                        if warp_id == 0:
                            if T.cuda.elect_sync():
                                row = T.meta_var(m_st + row_0)
                                for part in T.unroll(REST_N // 8):
                                    col = T.meta_var(n_st + col_0 + STAGED_N + part * 8)
                                    Tx.copy_async(D[row:row + CONSUMER_ROWS, col:col + 8],
                                                  Rsmem[consumer, :, part * 8:(part + 1) * 8], dispatch="tma_explicit")
                                T.ptx.cp.async_.bulk.commit_group()
                # <<< TODO 12.15
                work.next(cluster)

            # the last TMA store must finish before the CTA (and its shared memory) goes away
            if warp_id == 0:
                T.ptx.cp.async_.bulk.wait_group(0)

        # no CTA leaves while its peer may still arrive on its barriers
        T.cuda.cluster_sync()

    return kernel
