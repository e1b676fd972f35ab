"""Write a variant of step 12 whose host also weighs stream-K over lone CTAs where one CTA tile holds all of M
(experiments/every_shape/lone_sk/lone/hopper/): an experiment, not a step, not yet run on a GPU. Step 12 proposes
stream-K only in pairs (alone it ran 0.66x cuBLAS where pairs ran 0.95x at 256x3584x18944). At a decode batch
(M <= 64) a pair's second CTA has no rows at all, and where N gives fewer 32-wide tiles than SMs (56x2048x8192: 64
tiles for 132 SMs, 0.838x with A's short box) the model rates lone stream-K over 64-wide tiles 11% faster.

    python experiments/every_shape/lone_sk/make_variant.py
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from variant import write_variant  # noqa: E402

EDITS = [("                if cluster > 1:  # stream-K alone",
          "                if cluster > 1 or M <= rows:  # stream-K alone")]

if __name__ == "__main__":
    write_variant(HERE / "lone", EDITS)
