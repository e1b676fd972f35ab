"""Write step 12 as it was before its box of A became no taller than A (experiments/every_shape/a_rows/full/hopper/):
an experiment, not a step. At decode batches (M < 64) a 64-row CTA's box of A had 64 - M rows past the matrix, which
TMA fills with zeros; 32-wide whole tiles at 4096x14336 ran 1.064x cuBLAS at M = 64 and 0.648x at M = 1
(h200-decode/plans), about 2.8 cycles per zero-filled row and K tile. The first run (h200-decode/a-rows) timed the
opposite variant, a box of min(BLK_M, M) rows, against the solution of that day; the solution now has it (and since
the next session boxes cut at every edge: A_TAIL, B_TAIL), and this variant is the day before, every box whole, to
time beside it. The stage's rows past a short box keep stale data: they feed only
accumulator rows past M, which the TMA store clips and no other row reads.

    python experiments/every_shape/a_rows/make_variant.py
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from variant import write_variant  # noqa: E402

EDITS = [
    ("""    A_TAIL = M % BLK_M or BLK_M\n""", """    A_TAIL = BLK_M\n"""),
    ("""    B_TAIL = N % (BLK_N // CLUSTER) or BLK_N // CLUSTER\n""", """    B_TAIL = BLK_N // CLUSTER\n"""),
]

if __name__ == "__main__":
    write_variant(HERE / "full", EDITS)
