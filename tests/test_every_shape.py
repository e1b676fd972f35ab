"""Steps 11-12 on the CPU: the ragged shape rule (both tracks' step 11), step 12's host-side decomposition, its
static check.

The kernels themselves run on a GPU (experiments/every_shape/check_and_time.py, `make grade STEP=12
IMPL=solutions`); what is tested here is what the host decides and what the grader refuses.
"""

from __future__ import annotations

import math
import subprocess
import sys
from types import SimpleNamespace

import pytest

from conftest import REPO
from grader.analysis import features
from grader.core import build
from grader.core.steps import STEPS

SHAPES = [(1, 8, 8), (7, 264, 72), (72, 2056, 4168), (128, 4096, 4096), (256, 3584, 14336), (256, 4096, 14336),
          (257, 264, 4104), (1000, 1000, 1000), (1000, 3584, 18944), (4093, 2056, 568), (3000, 3000, 3000),
          (4096, 4096, 4096), (8192, 8192, 8192)]


def _step12(track: str = "hopper"):
    return SimpleNamespace(**build.kernel_factory(REPO / "solutions", track, STEPS[track][12]).__globals__)


def _segments(plan, cluster: int) -> list[tuple[int, int, int]]:
    """(tile, k_begin, k_end) of one cluster, in the order WorkUnits walks them (the kernel's arithmetic)."""
    ipu, extra, kt = plan.iterations_per_unit, plan.extra, plan.k_tiles
    range_begin, length = cluster * ipu + min(cluster, extra), ipu + (cluster < extra)
    if getattr(plan, "splits", 0):  # split-K: range `part` of tile cluster // S, the first kt % S one longer
        part = cluster % plan.splits
        range_begin = cluster // plan.splits * kt + part * (kt // plan.splits) + min(part, kt % plan.splits)
        length = kt // plan.splits + (part < kt % plan.splits)
    segments = []
    if cluster < plan.sk_units:
        cursor = range_begin + length
        while cursor > range_begin:
            tile = (cursor - 1) // kt
            k_begin = max(tile * kt, range_begin) - tile * kt
            segments.append((tile, k_begin, cursor - tile * kt))
            cursor = tile * kt + k_begin
    tile = plan.sk_tiles + cluster
    while tile < plan.tiles:
        segments.append((tile, 0, kt))
        tile += plan.clusters
    return segments


@pytest.mark.parametrize("track,sm_count", [("hopper", 132), ("blackwell", 148)])
@pytest.mark.parametrize("shape", SHAPES, ids=["x".join(map(str, s)) for s in SHAPES])
def test_every_k_tile_of_every_tile_is_computed_once_and_final_ranges_wait_only_on_earlier_clusters(
        shape, track, sm_count):
    module = _step12(track)
    plan = module.plan_decomposition(*shape, sm_count)
    assert plan.clusters * plan.cluster == sm_count and plan.tile_n in module.TILE_WIDTHS
    owner: dict[tuple[int, int], int] = {}
    partial = {}
    for cluster in range(plan.clusters):
        segments = _segments(plan, cluster)
        for tile, k_begin, k_end in segments:
            for k in range(k_begin, k_end):
                assert (tile, k) not in owner, f"K tile {k} of tile {tile} twice"
                owner[tile, k] = cluster
        partials = [s for s in segments if s[2] < plan.k_tiles]
        assert partials in ([], segments[:1]), "a cluster's only partial range is its first unit"
        if partials:
            partial[cluster] = partials[0]
    assert len(owner) == plan.tiles * plan.k_tiles
    for (tile, k), cluster in owner.items():
        if k == plan.k_tiles - 1 and owner[tile, 0] != cluster:  # a final range that waits
            first = _first_unit(plan, tile)
            assert first == owner[tile, 0] and first < cluster
            assert all(partial[u][0] == tile for u in range(first, cluster))


def _first_unit(plan, tile: int) -> int:
    """WorkUnits.first_unit, in Python."""
    if getattr(plan, "splits", 0):
        return tile * plan.splits
    ipu, extra, first = plan.iterations_per_unit, plan.extra, tile * plan.k_tiles
    return first // (ipu + 1) if first < extra * (ipu + 1) else extra + (first - extra * (ipu + 1)) // ipu


def test_the_host_fills_the_gpu_where_step_10s_tiles_leave_it_idle():
    module = _step12()
    small = module.plan_decomposition(256, 4096, 4096, 132)  # 16 of step 10's tiles for 66 clusters
    assert small.tiles >= 0.9 * small.clusters or small.sk_units == small.clusters
    # 3.9 waves of whole 128x256 tiles, alone: a cluster launch (pairs) placed them worse (H100: 2048^3 0.991x cuBLAS
    # alone, 0.951x in pairs)
    square = module.plan_decomposition(4096, 4096, 4096, 132)
    assert (square.tile_m, square.tile_n, square.cluster, square.sk_units) == (128, 256, 1, 0)
    assert module.plan_decomposition(128, 28672, 4096, 132).cluster == 1  # a pair would leave half its CTAs idle
    # N = 4608: widths of 64, 128 or 256 give 72, 36 or 18 pair tiles for 66 pairs; 80 columns give 58
    qwen_qkv = module.plan_decomposition(256, 4608, 3584, 132)
    assert qwen_qkv.sk_units == 0 and qwen_qkv.clusters >= qwen_qkv.tiles >= 0.85 * qwen_qkv.clusters
    # a weight stream at 128 tokens and long K: split-K over pairs of 64-row CTAs (H200: 0.99-1.03x cuBLAS; over lone
    # 128-row ones 0.96-0.99x), not stream-K across 128-row ones (0.94x on the H100, 0.61-0.66x on the H200)
    qwen_down = module.plan_decomposition(128, 3584, 18944, 132)
    assert qwen_down.tile_m == 64 and qwen_down.splits_k
    # stream-K only in pairs: alone it ran 0.66x cuBLAS at 256x3584x18944, in pairs 0.95x
    qwen_down_256 = module.plan_decomposition(256, 3584, 18944, 132)
    assert qwen_down_256.sk_units > 0 and qwen_down_256.cluster == 2


def test_where_the_tiles_are_at_most_half_the_clusters_split_k_replaces_stream_k_across_tiles():
    """Split-K cuts every tile's K tiles into S ranges, of equal length or one K tile longer: none begins in one tile
    and ends in the next (H200: 256x3584x14336 split-K x2 0.953x cuBLAS, stream-K over 66 ranges 0.895x; cuBLAS runs
    split-K x2 there). Alone, and with A and B swapped, it fills the GPU where pairs could not (H200, 19 shapes of
    1-320 tokens whose plan changed: 0.956x -> 0.992x in geometric mean; 176x3584x18944 0.85x -> 0.94x, cuBLAS runs
    split-K over swapped 128x176 tiles there)."""
    module = _step12()
    gemma_down = module.plan_decomposition(256, 3584, 14336, 132)
    assert gemma_down.kind == "split-K x2" and gemma_down.splits_k and gemma_down.cluster == 2
    assert gemma_down.sk_units == 2 * gemma_down.tiles and gemma_down.k_tiles % 2 == 0
    # the tokens on wgmma's n, 176 of them in one tile, each of the 28 tiles' 296 K tiles in 4 ranges, one per CTA
    qwen_down = module.plan_decomposition(176, 3584, 18944, 132)
    assert (qwen_down.kind, qwen_down.swap_ab, qwen_down.cluster, qwen_down.tile_n) == ("split-K x4", True, 1, 176)
    # 400 K tiles in 3 ranges (134, 133, 133): 120 CTAs where S = 2, the most that divides, would busy 80
    gemma_up = module.plan_decomposition(200, 5120, 25600, 132)
    assert gemma_up.splits == 3 and gemma_up.k_tiles % 3 != 0 and gemma_up.sk_units * gemma_up.cluster == 120
    # the ranges of every split-K plan the host weighs end at a tile's edge and are at least 8 K tiles long
    plans = module.split_k(112, 2, 32, 224, 66, 128, True)
    assert [p.splits for p in plans] == [2] and plans[0].iterations_per_unit == 112
    assert all(p.k_tiles // p.splits >= module.MIN_K_TILES_PER_UNIT and p.sk_units == p.splits * p.tiles
               for tiles in (1, 5, 16, 33) for k_tiles in (16, 65, 66, 224) for p in
               module.split_k(128, 2, tiles, k_tiles, 66, 128, True))
    # the final range of a tile split S ways adds S - 1 partial sums; the busiest range is the longest
    for splits, iterations in ((2, 112), (3, 75), (4, 56)):
        plan = module.Decomposition(128, 112, 2, 16, 224, 66, 16, 16 * splits, True, splits=splits)
        assert plan.estimated_cost == pytest.approx(
            iterations * module.iteration_cost(128, 112, 2, True)
            + (splits - 1) * module.SPLIT_K_FIXUP_COST * 128 * 112 / 128 ** 2 + module.writeback_cost(128, 112))


def test_rows_off_32_byte_boundaries_take_pairs_which_issue_half_of_b():
    """Where K % 16 != 0, every other row of A and B begins off a 32-byte boundary and the TMA unit's rows cost more
    than the wgmma's time: a pair, whose CTAs each load half of B, runs ahead of lone CTAs (H200: 4096x4096x1000
    whole 128x256 tiles in pairs 1.023x cuBLAS, alone 0.832x; at K = 1024 and 1008 lone CTAs as before). Aligned
    rows cost what they cost before this term: the plans there do not change."""
    module = _step12()
    for k in (1000, 1016, 4040):
        plan = module.plan_decomposition(4096, 4096, k, 132)
        assert (plan.cluster, plan.rows_aligned) == (2, False), (k, plan)
    for k in (1008, 1024, 4096):
        plan = module.plan_decomposition(4096, 4096, k, 132)
        assert (plan.cluster, plan.rows_aligned) == (1, True), (k, plan)
    assert module.iteration_cost(128, 256, 1, False) > 1.2 * module.iteration_cost(128, 256, 2, False)
    # in a pair the wgmma set the time again: within 1% of aligned rows' (the smooth maximum counts the issue a little)
    assert module.iteration_cost(128, 256, 2, False) < 1.01 * module.iteration_cost(128, 256, 1, True)
    for rows, width in ((64, 64), (128, 128), (128, 256)):  # aligned, a pair's rows cost what a lone CTA's do
        assert module.iteration_cost(rows, width, 2, True) == module.iteration_cost(rows, width, 1, True)


def test_between_129_and_192_rows_64_row_ctas_pad_fewer_rows():
    """Two 128-row tiles over 136 rows pad 120, three 64-row ones 56: where the model picked them there they ran
    faster (H200: 136x4096x14336 0.997x against 0.949x cuBLAS, 192x8192x28672 1.021x against 0.885x); from 193 rows on
    they pad as many or little and cost more (264x4096x4096: 0.74x against 0.91x)."""
    module = _step12()
    for shape in ((136, 4096, 14336), (192, 4096, 4096), (192, 8192, 28672)):  # or no padded rows: A and B swapped
        plan = module.plan_decomposition(*shape, 132)
        assert plan.tile_m == 64 or plan.swap_ab, shape
    for shape in ((193, 4096, 4096), (256, 4096, 4096), (264, 4096, 4096), (160, 14336, 4096)):
        assert module.plan_decomposition(*shape, 132).tile_m == 128, shape


def test_at_most_128_tokens_64_row_ctas_straight_and_split_k_only_by_a_margin():
    """At most FEW_TOKENS rows every plan streams B from DRAM, and the fastest timed had 64-row CTAs, straight (H200:
    128x8192x28672 whole 64x128 tiles 1.11x cuBLAS, split-K over 128-row ones 1.09x, swapped 1.09x); split-K only by
    a margin: rated 0.5-2.7% faster than whole 64-row tiles it ran 2-7% slower (128x4096x14336 0.99x against 1.03x),
    rated 5-6% faster it ran faster (128x3072x24576 1.03x against 0.92x). At the 11 shapes where the rule changed the
    plan: 0.979x -> 1.016x cuBLAS in geometric mean."""
    module = _step12()
    layers = ((6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336), (4608, 3584), (3584, 3584), (37888, 3584),
              (3584, 18944), (3072, 24576), (8192, 28672), (2312, 3072))
    for m in (1, 7, 64, 65, 100, 128):
        for n, k in layers:
            plan = module.plan_decomposition(m, n, k, 132)
            assert plan.tile_m == 64 and not plan.swap_ab, ((m, n, k), plan)
    for shape, kind, width in (((1, 4096, 14336), "data-parallel", 32), ((128, 4096, 14336), "data-parallel", 64),
                               ((128, 8192, 28672), "data-parallel", 128), ((128, 3584, 18944), "split-K x2", 112),
                               ((128, 3072, 24576), "split-K x3", 144)):
        plan = module.plan_decomposition(*shape, 132)
        assert (plan.kind, plan.tile_n) == (kind, width), (shape, plan)
    # whole 64x64 tiles keep 128 of the 132 SMs busy
    assert module.plan_decomposition(128, 4096, 14336, 132).tiles == 128
    # a side of the rule: the plans of 129 rows and more are the model's own, 128-row and swapped tiles among them
    assert module.plan_decomposition(129, 8192, 8192, 132).swap_ab
    assert module.plan_decomposition(193, 4096, 4096, 132).tile_m == 128


def test_few_tokens_through_a_wide_layer_swap_a_and_b_in_tiles_at_least_128_wide():
    """Where the tokens are few and the layer wide, the host takes the transposed problem: the tokens on wgmma's n
    in tiles at least 128 wide (H200: 136x28672x8192 0.83x -> 0.97x cuBLAS, 516x22016x4096 0.80x -> 0.94x,
    8192x3584x18944 1.00x -> 1.02x); narrower swapped tiles ran slower than the straight plans (136x4608x3584 48 wide
    0.93x against 1.07x), and at the squares and the grader's timing shapes nothing changes."""
    module = _step12()
    for shape, width in (((136, 28672, 8192), 144), ((516, 22016, 4096), 176), ((137, 12296, 1032), 144)):
        plan = module.plan_decomposition(*shape, 132)
        assert plan.swap_ab and plan.tile_n == width and plan.tile_m == 128, (shape, plan)
        assert plan.tiles == -(-shape[1] // (128 * plan.cluster)) * -(-shape[0] // width), plan  # D^T's tiles
    # narrower swapped tiles, or stream-K over every swapped tile (128x3584x18944: 0.94x against 1.01x), ran slower
    for shape in ((2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192), (256, 4096, 4096), (1000, 4096, 4096),
                  (1, 4096, 14336), (200, 4096, 14336), (136, 4608, 3584), (300, 4096, 4096), (128, 3584, 18944)):
        assert not module.plan_decomposition(*shape, 132).swap_ab, shape


def test_misaligned_rows_at_few_tokens_take_pairs_of_64_row_ctas_which_issue_fewer_rows():
    """Above 192 rows step 12 keeps 128-row CTAs where rows are aligned (64-row ones ran 2-6% slower there), but
    where K % 16 != 0 the TMA unit's rows bind: a pair of 64-row CTAs 128 wide issues 64 + 64 rows a K tile where a
    pair of 128-row CTAs 64 wide issues 128 + 32 (H200: 256x4096x4088 0.82x -> 0.98x cuBLAS, 776x1024x4088 0.51x ->
    0.70x, experiments/every_shape/h200-rows64-misaligned)."""
    module = _step12()
    for shape in ((256, 4096, 4088), (776, 1024, 4088), (333, 4096, 1000)):
        plan = module.plan_decomposition(*shape, 132)
        assert (plan.tile_m, plan.cluster) == (64, 2), (shape, plan)
    for shape in ((256, 4096, 4096), (776, 1024, 4096), (333, 4096, 1024)):
        assert module.plan_decomposition(*shape, 132).tile_m == 128, shape


def test_stream_k_after_whole_waves_where_its_dearer_ranges_still_pay():
    """After waves of whole tiles, a stream-K range runs at other K offsets than the clusters around it and costs
    about 1.14 whole-tile iterations (H200, experiments/every_shape/h200-stream-k-tail): it pays over 15.5 waves of
    256-wide pairs at 8192^3 (1.047x cuBLAS against 1.025x whole), not over 3.9 at 4096^3 (0.966x against 1.006x)
    nor at 4096x4096x16384 (0.953x against 1.004x)."""
    module = _step12()
    big = module.plan_decomposition(8192, 8192, 8192, 132)
    assert (big.kind, big.tile_n, big.cluster) == ("stream-K", 256, 2) and 0 < big.sk_tiles < big.tiles
    assert big.estimated_cost < module.Decomposition(128, 256, 2, 1024, 128, 66, 0, 0, True).estimated_cost
    for shape in ((4096, 4096, 4096), (4096, 4096, 16384)):
        assert module.plan_decomposition(*shape, 132).sk_units == 0, shape


def test_the_plans_time_ranks_the_measured_plans_as_well_as_the_sum_or_the_larger_of_its_two_costs():
    """experiments/every_shape/model_regret.py over the committed H100 measurements: the plan's time (the root of
    the sum of the squares of the SMs' and DRAM's costs) picks plans no slower, in geometric mean, than the sum
    (the model before) or the larger of the two would."""
    sys.path.insert(0, str(REPO / "experiments" / "every_shape"))
    import model_regret

    def mean_regret(combine):
        found = model_regret.regrets(combine)
        assert len(found) >= 20
        return sum(math.log(regret) for _, _, regret in found.values()) / len(found)

    chosen = mean_regret(model_regret.COMBINATIONS["root of the sum of squares"])
    assert chosen <= mean_regret(model_regret.COMBINATIONS["sum"])
    assert chosen <= mean_regret(model_regret.COMBINATIONS["max"])


def test_blackwell_step_12_keeps_the_pair_tile_and_deals_k_where_whole_tiles_idle():
    module = _step12("blackwell")
    plans = {shape: module.plan_decomposition(*shape, 148) for shape in SHAPES}
    assert {(p.cluster, p.tile_n) for p in plans.values()} == {(2, 256)}
    assert plans[256, 4096, 14336].kind == "stream-K" and plans[256, 4096, 14336].sk_units == 74
    assert plans[257, 264, 4104].kind == "stream-K"  # 2 tiles: 16 ranges of 8 or 9 K tiles
    assert plans[4096, 4096, 4096].kind == "data-parallel"


@pytest.mark.parametrize("track,shape,message", [
    ("hopper", "7x7x8", "N=7 is not a positive multiple of 8 (a TMA descriptor's rows must be a multiple of 16 bytes"),
    ("hopper", "8x8x12", "K=12 is not a positive multiple of 8"),
    ("hopper", "0x8x8", "M=0: a matrix needs at least one row and one column"),
    ("blackwell", "7x7x8", "N=7 is not a positive multiple of 8 (a TMA descriptor's rows must be a multiple of 16 bytes"),
])
def test_a_shape_a_ragged_step_cannot_take_is_one_line_and_exit_2(track, shape, message):
    done = subprocess.run([sys.executable, "-m", "grader", "--step", "11", "--impl", "solutions", "--track", track,
                           "--shape", shape], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_step_12s_wgmma_check_takes_its_widths_and_nothing_else():
    check = features.WGMMA_PER_SHAPE
    # a consumer's columns: a tile's width (TILE_WIDTHS, multiples of 16), or half of it in a 64-row tile
    for width in range(16, 257, 8):
        assert check.passes(SimpleNamespace(sass=f"HGMMA.64x{width}x16.F32.F16 R24, gdesc[UR4]"), None)
    for width in (8, 12, 20, 260, 264):
        assert not check.passes(SimpleNamespace(sass=f"HGMMA.64x{width}x16.F32.F16 R24, gdesc[UR4]"), None)
    assert not check.passes(SimpleNamespace(sass="HMMA.16816.F32 R4, R8, R12, R4"), None)
