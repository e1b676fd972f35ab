"""Write experiments/every_shape/plain_launch/hopper/step12_stream_k.py: step 12 whose one-CTA clusters are a plain
launch. An experiment, not a step: step 12's plans of clusters of one CTA declare T.cta_id_in_cluster([1]), so the
runtime still makes a cluster launch of them (kernel_launch_params holds clusterCtaIdx.x), and a cluster launch
places CTAs otherwise than a plain one (docs/measurements.md: step 8's code in 2-CTA clusters ran 2-4% slower
from placement alone). Does step 12 alone at 2048^3 reach step 10 + no-cluster's 0.998x that way?

    python experiments/every_shape/plain_launch/make_variant.py
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from variant import write_variant  # noqa: E402

EDITS = [
    ("""        rank = T.cta_id_in_cluster([CLUSTER])
""", """        if CLUSTER > 1:
            rank = T.cta_id_in_cluster([CLUSTER])
        else:
            rank = T.meta_var(0)
"""),
]


if __name__ == "__main__":
    write_variant(HERE, EDITS)
