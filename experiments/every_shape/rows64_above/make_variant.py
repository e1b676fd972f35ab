"""Write a variant of step 12 that weighs 64-row CTA tiles up to M = 192 (experiments/every_shape/rows64_above/upto192/
hopper/): an experiment, not a step. Step 12 weighs them only where M <= 128 or K % 16 != 0: at 256 tokens they ran
2-6% slower than 128-row ones (h100-rows64), and at 264 tokens 0.74x against 0.91x (h200-rows64-above). Between 129
and 192 rows two 128-row tiles pad up to 120 rows where three 64-row ones pad at most 56, and where the host's model
picked them there they ran faster (h200-rows64-above: 136x4096x14336 0.997x against 0.949x, 136x28672x8192 0.834x
against 0.787x, 192x4096x4096 1.020x against 0.980x; at 160x14336x4096 the model keeps 128-row tiles, which ran
faster there).

    python experiments/every_shape/rows64_above/make_variant.py
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from variant import write_variant  # noqa: E402

EDITS = [("        if rows < 128 and M > 128 and rows_aligned:\n", "        if rows < 128 and M > 192 and rows_aligned:\n")]

if __name__ == "__main__":
    write_variant(HERE / "upto192", EDITS)
