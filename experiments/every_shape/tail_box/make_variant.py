"""Write step 12 as it was before its boxes stopped at the matrix's edges (experiments/every_shape/tail_box/full/hopper/):
an experiment, not a step. Then A's box was min(BLK_M, M) rows tall, which helps only where one CTA tile holds all of
M; in the last row of tiles of a ragged M (and the last column of a ragged N) the box reached past the matrix, and TMA
filled those rows with zeros at about 2.8 cycles a row and K tile (h200-ragged-tail: 136x4096x14336 took twice the
time of 256x4096x14336 with the same plan and tiles). In step 12 now the box that holds A's last row is A_TAIL = M %
BLK_M rows tall (B's: B_TAIL = N % B_PART); this variant sets them back to min(BLK_M, M) and B_PART, a whole box
(a B half wholly past N loads B_PART rows of B's last ones, where it used to load a box of zeros).

    python experiments/every_shape/tail_box/make_variant.py
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from variant import write_variant  # noqa: E402

EDITS = [
    ("    A_TAIL = M % BLK_M or BLK_M\n", "    A_TAIL = min(BLK_M, M)\n"),
    ("    B_TAIL = N % (BLK_N // CLUSTER) or BLK_N // CLUSTER\n", "    B_TAIL = BLK_N // CLUSTER\n"),
]

if __name__ == "__main__":
    write_variant(HERE / "full", EDITS)
