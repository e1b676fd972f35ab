"""Static checks: the hardware features each step exists to teach, read off its PTX, SASS and launch.

This table is the whole grade on a machine without a GPU, and an anti-cheat everywhere: a kernel
that skips the step's technique fails here even when its numbers are right.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from grader.build import Artifacts
from grader.steps import Shape


@dataclass(frozen=True)
class Launch:
    shape: Shape
    sm_count: int


@dataclass(frozen=True)
class Check:
    name: str
    passes: Callable[[Artifacts, Launch], bool]
    hint: str


def _sass(pattern: str) -> Callable[[Artifacts, Launch], bool]:
    return lambda art, _: re.search(pattern, art.sass) is not None


def _ptx(pattern: str) -> Callable[[Artifacts, Launch], bool]:
    return lambda art, _: re.search(pattern, art.ptx) is not None


def _ctas(art: Artifacts) -> int:
    return art.grid[0] * art.grid[1] * art.grid[2]


def _one_cta_per_tile(art: Artifacts, launch: Launch) -> bool:
    m, n, _ = launch.shape
    return _ctas(art) == (m // 128) * (n // 128)


def _one_cta_per_sm(art: Artifacts, launch: Launch) -> bool:
    return _ctas(art) == launch.sm_count


def _staged_operands(art: Artifacts, _: Launch) -> bool:
    """A and B each live in a shared buffer of shape (stages >= 2, 128, 64)."""
    staged = [shape for shape in art.shared_fp16_buffers if len(shape) == 3 and shape[0] >= 2 and shape[1:] == (128, 64)]
    return len(staged) >= 2

TCGEN05_MMA = Check("tcgen05 MMA (UTCHMMA)", _sass(r"\bUTCHMMA\b"), "issue Tx.gemm_async(..., dispatch=\"tcgen05\")")
TCGEN05_COMMIT = Check(
    "tcgen05.commit onto an mbarrier (UTCBAR)", _sass(r"\bUTCBAR\b"), "commit the MMA onto mma_bar"
)
TMEM_LOAD = Check("TMEM -> registers (LDTM)", _sass(r"\bLDTM\b"), "read the accumulator with Tx.wg.copy_async from TMEM")
WGMMA = Check(
    "wgmma m64n128k16 (HGMMA.64x128x16)", _sass(r"\bHGMMA\.64x128x16\.F32"), "issue wgmma.mma_async m64n128k16"
)
GRID_TILES = Check(
    "grid = one CTA per 128x128 output tile", _one_cta_per_tile, "launch T.cta_id([M // 128, N // 128])"
)
TMA_LOAD = Check(
    "TMA loads (UTMALDG)", _sass(r"\bUTMALDG\b"), "load A and B with Tx.copy_async(..., dispatch=\"tma_auto\")"
)
EXPECT_TX = Check(
    "mbarrier expect-tx byte count",
    _ptx(r"mbarrier\.arrive\.expect_tx"),
    "arm the TMA barrier with mbarrier.arrive.expect_tx(bytes)",
)
TMA_STORE = Check(
    "TMA store of D (UTMASTG)", _sass(r"\bUTMASTG\b"), "store D from shared memory with a TMA copy_async"
)
TWO_STAGES = Check(
    "A and B staged in >= 2 shared-memory buffers",
    _staged_operands,
    "allocate A and B as (PIPE_DEPTH=2, 128, 64) buffers",
)
GRID_SMS = Check("grid = one CTA per SM", _one_cta_per_sm, "launch T.cta_id([sm_count])")
TILE_LOOP = Check(
    "a loop over output tiles in each CTA",
    lambda art, _: art.has_tile_loop,
    "loop `while scheduler.valid(): ... scheduler.next_tile()`",
)

_BLACKWELL_MMA = [TCGEN05_MMA, TCGEN05_COMMIT, TMEM_LOAD]
_TMA = [TMA_LOAD, EXPECT_TX, TMA_STORE]

CHECKS: dict[str, dict[int, list[Check]]] = {
    "blackwell": {
        1: _BLACKWELL_MMA,
        2: _BLACKWELL_MMA,
        3: _BLACKWELL_MMA + [GRID_TILES],
        4: _BLACKWELL_MMA + [GRID_TILES] + _TMA,
        5: _BLACKWELL_MMA + [GRID_TILES] + _TMA + [TWO_STAGES],
        6: _BLACKWELL_MMA + _TMA + [TWO_STAGES, GRID_SMS, TILE_LOOP],
    },
    "hopper": {
        1: [WGMMA],
        2: [WGMMA],
        3: [WGMMA, GRID_TILES],
        4: [WGMMA, GRID_TILES] + _TMA,
        5: [WGMMA, GRID_TILES] + _TMA + [TWO_STAGES],
        6: [WGMMA] + _TMA + [TWO_STAGES, GRID_SMS, TILE_LOOP],
    },
}


@dataclass
class CheckResult:
    name: str
    passed: bool
    hint: str


def run_checks(track: str, step: int, artifacts: Artifacts, launch: Launch) -> list[CheckResult]:
    return [
        CheckResult(check.name, bool(check.passes(artifacts, launch)), check.hint)
        for check in CHECKS[track][step]
    ]
