"""Write experiments/every_shape/ring_epilogue/hopper/step12_stream_k.py: step 12 whose writeback stages D in the
pipeline's ring instead of tiles of its own, where each cluster has at most one whole tile (its loads have all
landed and been used when the writeback starts), so that the shared memory of the staging tiles goes to one more
stage. An experiment, not a step: at 256 tokens one stage fewer cost 5-6% (h100-stages/); check_and_time.py's plan
suffix e (dp64e) asks for it.

    python experiments/every_shape/ring_epilogue/make_variant.py
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from variant import write_variant  # noqa: E402

EDITS = [
    ("""    sk_units: int
""", """    sk_units: int
    epilogue_in_ring: bool = False  # stage D in the pipeline's ring (one whole tile per cluster at most)
"""),
    ("""    EPILOGUE_SMEM = NUM_CONSUMERS * CONSUMER_ROWS * (EPI_N + REST_COLS) * 2 + 1024  # the staging tiles, the barriers
""", """    EPILOGUE_SMEM = NUM_CONSUMERS * CONSUMER_ROWS * (EPI_N + REST_COLS) * 2 + 1024  # the staging tiles, the barriers
    if plan.epilogue_in_ring:
        assert plan.sk_units == 0 and plan.tiles <= plan.clusters, "the ring is free only after a cluster's last tile"
        EPILOGUE_SMEM = 1024
"""),
    ("""        Dsmem = pool.alloc((NUM_CONSUMERS, CONSUMER_ROWS, EPI_N), d_type, layout=D_layout)
""", """        if plan.epilogue_in_ring:
            pool.move_base_to(1024)  # over the ring's first stages: every load into them has landed and been used
        Dsmem = pool.alloc((NUM_CONSUMERS, CONSUMER_ROWS, EPI_N), d_type, layout=D_layout)
"""),
]


if __name__ == "__main__":
    write_variant(HERE, EDITS)
