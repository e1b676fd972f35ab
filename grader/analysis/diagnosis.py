"""Compare a kernel's output with the fp32 reference and say what is wrong in terms a student can act on."""

from __future__ import annotations

from dataclasses import dataclass

import torch

# An element passes when |out - ref| <= RTOL * |ref| + ATOL_SCALE * rms(ref).
# Rounding the fp32 accumulator to fp16 alone costs up to 2^-11 * |ref|; RTOL allows 4x that.
# ATOL_SCALE covers outputs near zero, where a different fp32 summation order (tensor-core K
# slicing vs cuBLAS) leaves a small absolute error that is not small relative to the value.
# docs/measurements.md records the largest error the reference solutions showed on an H100.
RTOL = 2.0**-9
ATOL_SCALE = 2.0**-10
OUTPUT_TILE = 128
TILES_LISTED = 8


@dataclass
class Verdict:
    passed: bool
    max_error: float  # max |out - ref| / rms(ref)
    wrong_fraction: float  # outputs outside tolerance, NaN included
    wrong_tiles: list[tuple[int, int]]  # 128x128 output tiles holding a wrong value
    unwritten_tiles: list[tuple[int, int]]  # tiles still entirely NaN: the kernel never wrote them
    message: str


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a.float() @ b.float().T


def scale(ref: torch.Tensor) -> torch.Tensor:
    return ref.pow(2).mean().sqrt().clamp_min(1e-30)


def within_tolerance(out: torch.Tensor, ref: torch.Tensor, ref_scale: torch.Tensor) -> torch.Tensor:
    """Per element: |out - ref| <= RTOL |ref| + ATOL_SCALE rms(ref); NaN is never within."""
    return (out.float() - ref).abs() <= RTOL * ref.abs() + ATOL_SCALE * ref_scale


def compare(out: torch.Tensor, ref: torch.Tensor) -> Verdict:
    """out: the kernel's (M, N) fp16 result, pre-filled with NaN before the launch; ref: fp32."""
    out = out.float()
    ref_scale = scale(ref)
    error = (out - ref).abs()
    wrong = ~within_tolerance(out, ref, ref_scale)
    max_error = float(error.nan_to_num(nan=float("inf")).max() / ref_scale)

    wrong_per_tile = _per_tile(wrong, torch.any)
    unwritten_per_tile = _per_tile(out.isnan(), torch.all)
    wrong_tiles = [tuple(t) for t in wrong_per_tile.nonzero().tolist()]
    unwritten = [tuple(t) for t in unwritten_per_tile.nonzero().tolist()]
    wrong_fraction = float(wrong.float().mean())
    passed = not wrong_tiles
    return Verdict(
        passed=passed,
        max_error=max_error,
        wrong_fraction=wrong_fraction,
        wrong_tiles=wrong_tiles,
        unwritten_tiles=unwritten,
        message="ok" if passed else _explain(wrong_fraction, wrong_tiles, unwritten, wrong_per_tile.shape),
    )


def _per_tile(mask: torch.Tensor, reduce) -> torch.Tensor:
    """`reduce` (torch.any or torch.all) over each 128x128 output tile; the tiles of a ragged edge are
    padded with the value that leaves the reduction to their real elements."""
    rows, cols = mask.shape
    tile_rows, tile_cols = -(-rows // OUTPUT_TILE), -(-cols // OUTPUT_TILE)
    padded = torch.full((tile_rows * OUTPUT_TILE, tile_cols * OUTPUT_TILE), reduce is torch.all,
                        dtype=torch.bool, device=mask.device)
    padded[:rows, :cols] = mask
    tiles = padded.reshape(tile_rows, OUTPUT_TILE, tile_cols, OUTPUT_TILE).permute(0, 2, 1, 3)
    return reduce(tiles.reshape(tile_rows, tile_cols, -1), dim=-1)


def _explain(fraction, wrong_tiles, unwritten, grid) -> str:
    total = grid[0] * grid[1]
    parts = [f"{fraction:.1%} of outputs wrong, in {len(wrong_tiles)} of {total} 128x128 output tiles"]
    written_wrong = [t for t in wrong_tiles if t not in set(unwritten)]
    if unwritten:
        parts.append(f"never written (still NaN): {_list(unwritten)}")
    if written_wrong:
        parts.append(f"written with wrong values: {_list(written_wrong)}")
    return "; ".join(parts)


def _list(tiles: list[tuple[int, int]]) -> str:
    shown = ", ".join(f"({m},{n})" for m, n in tiles[:TILES_LISTED])
    more = len(tiles) - TILES_LISTED
    return shown + (f" and {more} more" if more > 0 else "") + " (tile row, tile column)"


def random_inputs(shape: Shape, seed: int):
    import torch

    m, n, k = shape
    generator = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn((m, k), generator=generator, device="cuda").half()
    b = torch.randn((n, k), generator=generator, device="cuda").half()
    return a, b
