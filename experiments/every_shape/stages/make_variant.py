"""Write experiments/every_shape/stages/hopper/step12_stream_k.py: step 12 whose plan may cap its pipeline's stages
(`max_stages`; check_and_time.py's plan suffix sN, e.g. dp80s6). An experiment, not a step: does a weight stream
at 256 tokens slow down with fewer stages in flight? (cuBLAS keeps 8 at 256x4608x3584, step 12 fits 7 there.)

    python experiments/every_shape/stages/make_variant.py
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from variant import write_variant  # noqa: E402

EDITS = [
    ("""    rows_aligned: bool  # every row of A and B begins on a 32-byte boundary (K % 16 == 0)
""",
     """    rows_aligned: bool  # every row of A and B begins on a 32-byte boundary (K % 16 == 0)
    max_stages: int = 0  # at most this many pipeline stages (0: as many as fit)
"""),
    ("""    PRODUCER_REGS, CONSUMER_REGS = 40, 232""", """    PIPE_DEPTH = min(PIPE_DEPTH, plan.max_stages or PIPE_DEPTH)
    PRODUCER_REGS, CONSUMER_REGS = 40, 232"""),
]


if __name__ == "__main__":
    write_variant(HERE, EDITS)
