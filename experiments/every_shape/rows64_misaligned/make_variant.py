"""Write a variant of step 12 whose host also considers 64-row CTAs above 128 rows where rows start off 32-byte
boundaries (K % 16 != 0), under experiments/every_shape/rows64_misaligned/rows64/hopper/: an experiment, not a
step. Step 12 takes 64-row CTAs only where M <= 128 (at 256 tokens and aligned rows they ran 2-6% slower than the
128-row CTAs the model rated equal). Where rows are misaligned the TMA unit's issue binds, and a pair of 64-row
CTAs 128 wide issues 64 + 64 rows a K tile where a pair of 128-row CTAs 64 wide issues 128 + 32: the model rates
them apart (256x4096x4088: 113 against 124), and cuBLAS runs 128x64 tiles in 1 x 2 clusters there.

    python experiments/every_shape/rows64_misaligned/make_variant.py
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from variant import write_variant  # noqa: E402

if __name__ == "__main__":
    write_variant(HERE / "rows64", [("        if rows < 128 and M > 128:\n",
                                     "        if rows < 128 and M > 128 and rows_aligned:\n")])
