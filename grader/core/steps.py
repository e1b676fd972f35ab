"""What the grader knows about each step: its file, the shapes it must support, the shapes it runs."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

Shape = tuple[int, int, int]  # (M, N, K)

TRACKS = ("blackwell", "hopper")
TRACK_ARCHS = {"blackwell": ("sm_100a", "sm_103a"), "hopper": ("sm_90a",)}
# SM count used for persistent steps when no GPU is present to ask.
DEFAULT_SM_COUNT = {"sm_100a": 148, "sm_103a": 148, "sm_90a": 132}


@dataclass(frozen=True)
class ShapeRule:
    """The shapes a step supports: fixed M and N (single-tile steps), multiples of the tile, or (ragged
    steps) any M with N and K multiples of 8, the 16-byte row stride a TMA descriptor needs."""

    tile: Shape
    fixed_m: int | None = None
    fixed_n: int | None = None
    fixed_k: int | None = None
    ragged: bool = False  # the tile is then the multiple TMA needs, not the kernel's tile

    def violation(self, shape: Shape) -> str | None:
        for name, value, fixed, multiple in zip(
            "MNK", shape, (self.fixed_m, self.fixed_n, self.fixed_k), self.tile
        ):
            if fixed is not None and value != fixed:
                return f"{name}={value}, but this step supports only {name}={fixed}"
            if value <= 0:
                return f"{name}={value}: a matrix needs at least one row and one column"
            if value % multiple:
                why = (f" (a TMA descriptor's rows must be a multiple of 16 bytes: {multiple} fp16)"
                       if self.ragged else "")
                return f"{name}={value} is not a positive multiple of {multiple}{why}"
        return None


@dataclass(frozen=True)
class StepSpec:
    number: int
    topic: str
    shapes: ShapeRule
    correctness_shapes: tuple[Shape, ...]
    timing_shapes: tuple[Shape, ...]
    takes_sm_count: bool = False

    @property
    def file_name(self) -> str:
        return f"step{self.number:02d}_{self.topic}.py"

    @property
    def function_name(self) -> str:
        return f"hgemm_v{self.number}"


TILE_128: Shape = (128, 128, 64)

# Correctness shapes cover, per step: the smallest shape, a single K tile, an odd number of K
# tiles, non-square M != N, and (persistent steps) fewer and more output tiles than SMs.
_TILED_SHAPES = ((128, 128, 64), (256, 384, 192), (640, 384, 1088), (2048, 2048, 2048))
_PERSISTENT_SHAPES = (
    (128, 128, 64),
    (256, 384, 192),
    (2048, 2048, 1024),
    (4096, 2944, 576),  # 32 x 23 = 736 tiles: several per SM, with a ragged last wave
)
_SQUARE_TIMING = ((2048, 2048, 2048), (4096, 4096, 4096))


def _cluster_shapes(tile_m: int, tile_n: int) -> tuple[Shape, ...]:
    """Correctness shapes for a step whose unit of work is a tile_m x tile_n cluster tile: one tile
    with one K tile; a few tiles, non-square, with 3 K tiles; a square grid; and more tiles than
    clusters on any current GPU, with a ragged last wave and 9 K tiles."""
    return (
        (tile_m, tile_n, 64),
        (2 * tile_m, 3 * tile_n, 192),
        (2048, 2048, 1024),
        (4096, 11 * tile_n, 576),
    )


_COMMON: tuple[StepSpec, ...] = (
    StepSpec(
        1,
        "single_tile",
        ShapeRule(TILE_128, fixed_m=128, fixed_n=128, fixed_k=64),
        correctness_shapes=((128, 128, 64),),
        timing_shapes=((128, 128, 64),),
    ),
    StepSpec(
        2,
        "k_loop",
        ShapeRule(TILE_128, fixed_m=128, fixed_n=128),
        correctness_shapes=((128, 128, 64), (128, 128, 192), (128, 128, 1024), (128, 128, 4096)),
        timing_shapes=((128, 128, 4096),),
    ),
    StepSpec(3, "spatial_tiling", ShapeRule(TILE_128), _TILED_SHAPES, _SQUARE_TIMING),
    StepSpec(4, "tma", ShapeRule(TILE_128), _TILED_SHAPES, _SQUARE_TIMING),
    StepSpec(5, "software_pipeline", ShapeRule(TILE_128), _TILED_SHAPES, _SQUARE_TIMING),
    StepSpec(6, "persistent", ShapeRule(TILE_128), _PERSISTENT_SHAPES, _SQUARE_TIMING, takes_sm_count=True),
    StepSpec(
        7, "warp_specialization", ShapeRule(TILE_128), _PERSISTENT_SHAPES, _SQUARE_TIMING, takes_sm_count=True
    ),
    StepSpec(8, "deeper_pipeline", ShapeRule(TILE_128), _PERSISTENT_SHAPES, _SQUARE_TIMING, takes_sm_count=True),
)


def _cluster_step(number: int, topic: str, tile_m: int, tile_n: int) -> StepSpec:
    return StepSpec(
        number,
        topic,
        ShapeRule((tile_m, tile_n, 64)),
        _cluster_shapes(tile_m, tile_n),
        _SQUARE_TIMING,
        takes_sm_count=True,
    )


# Steps 11-12 take any M, and N and K multiples of 8. Their correctness shapes: one row; M and N
# ragged by a few rows and columns, with K = 8 (less than one K tile) and K % 64 != 0; primes for M;
# 1000 tokens; one cluster tile hanging over every edge; a K-heavy shape whose four tiles leave most
# SMs idle (step 12 deals it as split-K x3, its K tiles in ranges of 22, 22 and 21), and an LLM layer at 256 tokens
# (step 12: narrow whole tiles); and more tiles than clusters with ragged edges on all sides. Step 12 takes CTA
# pairs where K % 16 != 0 (rows of A and B off 32-byte boundaries) and at stream-K, and lone CTAs at most other
# shapes: a CPU grade simulates both at the correctness shapes, and checks the largest (step 12's stream-K one).
RAGGED_RULE = ShapeRule((1, 8, 8), ragged=True)
_RAGGED_SHAPES = (
    (1, 8, 8),
    (7, 264, 72),
    (131, 520, 200),
    (1000, 1000, 1000),
    (257, 264, 4104),
    (256, 4096, 4096),
    (4093, 2056, 560),
)
# Step 12 also at a shape where its host swaps A and B (few tokens, a wide layer: its tiles face D^T): 137 tokens, a
# prime, through a 12296-wide layer (D^T's last row of tiles ragged), with K % 16 != 0 (CTA pairs)
_SWAPPED_SHAPES = ((137, 12296, 1032),)
# and where it cuts every tile's K tiles in two (split-K): 72 tokens through a K-heavy layer, M, N (one 8-column
# tile past 2048) and K (K % 16 != 0) ragged; 257x264x4104 above it cuts in three ranges of unequal length
_SPLIT_K_SHAPES = ((72, 2056, 4168),)
# and where its units cross tiles (stream-K after two waves of whole tiles: 133 tiles of 256x128 on 66 pairs, the
# last 67 in 66 ranges of 48-49 K tiles), M and N ragged: split-K took the small shapes that stream-K had
_STREAM_K_SHAPES = ((1751, 2312, 3072),)
_MODEL_TIMING = ((256, 4096, 4096), (1000, 4096, 4096))
# Step 12 is timed where a box of A past the matrix would set the time (TMA fills its rows there with zeros, about
# 2.8 cycles a row and K tile, hidden only under a wide tile's wgmmas): at a decode batch, one token through a
# 4096x14336 layer (a box of 64 rows ran 1.5x the reference's time on an H200), and at 72 tokens, whose last row of
# 64-row tiles 64 wide holds 8 (a box of min(BLK_M, M) rows there is 64: 200 tokens' split-K over 128-wide tiles
# hid it, H200 2026-12-02); and where the plan is split-K, at 200 tokens (the one timing shape that runs a fixup)
_EDGE_TIMING = ((1, 4096, 14336), (72, 4096, 14336), (200, 4096, 14336))


# From step 9 on, the unit of work is a cluster tile, and its size is the track's design:
# Blackwell: a CTA pair computes 256x256 (cta_group=2), and 512x256 with two MMA consumers.
# Hopper: a CTA pair along M shares (multicasts) B: 256x128, then 256x256 with 128x256 CTA tiles.
STEPS: dict[str, dict[int, StepSpec]] = {
    "blackwell": {
        spec.number: spec
        for spec in _COMMON + (_cluster_step(9, "cluster", 256, 256), _cluster_step(10, "two_consumers", 512, 256))
    },
    "hopper": {
        spec.number: spec
        for spec in _COMMON + (_cluster_step(9, "cluster", 256, 128), _cluster_step(10, "two_consumers", 256, 256))
    },
}
# Beyond the ten steps: any shape (both tracks), then a decomposition of the work that fills the GPU at
# every shape (both tracks).
for _track_steps in STEPS.values():
    _track_steps.update({
        number: StepSpec(number, topic, RAGGED_RULE, shapes, timing, takes_sm_count=True)
        for number, topic, shapes, timing in (
            (11, "ragged_edges", _RAGGED_SHAPES, _SQUARE_TIMING + _MODEL_TIMING),
            (12, "stream_k", _RAGGED_SHAPES + _SWAPPED_SHAPES + _SPLIT_K_SHAPES + _STREAM_K_SHAPES,
             _SQUARE_TIMING + _MODEL_TIMING + _EDGE_TIMING))})

# Pass rule without a reference solution to compare with: the step's speed must reach this share
# of cuBLAS (same run, same inputs) at every timing shape. Steps 1-3 are slow by design (one CTA,
# or synchronous loads), so their floors only catch kernels that are broken in a new way.
# The table lives in speed_floors.json, where `make calibrate` writes what the GPU here measured;
# each arch's entry says where its values came from (the Blackwell ones are estimates).
SPEED_FLOORS_FILE = Path(__file__).resolve().parents[1] / "speed_floors.json"


class SpeedFloorsError(Exception):
    """The floors file cannot be read: the grader must not judge speed on a guess."""


def load_speed_floors(path: Path = SPEED_FLOORS_FILE) -> dict[str, dict[int, float]]:
    """{arch: {step: minimum share of cuBLAS}} from the floors file."""
    try:
        archs = json.loads(path.read_text())["archs"]
        floors = {arch: {int(step): float(floor) for step, floor in entry["floors"].items()}
                  for arch, entry in archs.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        raise SpeedFloorsError(f"{path}: not a speed-floors table ({type(err).__name__}: {err}); "
                               "restore it (git checkout) or write it again with `make calibrate`") from err
    if not all(math.isfinite(floor) and floor > 0 for table in floors.values() for floor in table.values()):
        raise SpeedFloorsError(f"{path}: every floor must be a number above 0")
    return floors


SPEED_FLOORS: dict[str, dict[int, float]] = load_speed_floors()

# Pass rule with a reference solution: the student's kernel may take at most this many times the
# reference's time, both measured in the same run.
MAX_SLOWDOWN_VS_REFERENCE = 1.3


def static_check_shape(shapes: tuple[Shape, ...]) -> Shape:
    """The shape with the most work: there grid, stage and loop checks cannot pass by accident."""
    return max(shapes, key=lambda s: s[0] * s[1] * s[2])


def format_shape(shape: Shape) -> str:
    return "x".join(map(str, shape))
