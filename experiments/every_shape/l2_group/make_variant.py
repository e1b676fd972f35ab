"""Write two variants of step 12 whose L2 groups hold more rows of tiles where CTAs run alone (experiments/every_shape/
l2_group/{rows2048,balanced}/hopper/step12_stream_k.py). An experiment, not a step.

Why: the scheduler deals tiles column by column within a group of `l2_group_size` rows of cluster tiles. A wave of
W tiles then covers about g rows and W/g columns, and brings g x rows + (W/g) x columns of A and B rows into the L2.
Step 12 groups 8 cluster tiles: 2048 rows for pairs, but only 1024 for CTAs alone (132 tiles: 8 rows x 16.5 columns
of 128 x 256, 5,248 rows of A and B per wave where 16 x 8.25 need 4,160). ncu at 4096^3 and 8192^3 (H200): step 12
reads 23% more from DRAM than cuBLAS and runs at a 1.3-2% lower clock for the same tensor work.
- rows2048: l2_group_size = 2048 rows / cluster tile rows (16 alone, 8 in pairs: pairs as step 12).
- balanced: the g that minimises g x cluster rows + W/g x tile columns: the root of W x tile_n / cluster rows.

    python experiments/every_shape/l2_group/make_variant.py
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from variant import write_variant  # noqa: E402

GROUP = "            l2_group_size=8, num_clusters=sm_count // CLUSTER)"
VARIANTS = {
    "rows2048": "            l2_group_size=2048 // (CLUSTER * BLK_M), num_clusters=sm_count // CLUSTER)",
    "balanced": "            l2_group_size=max(1, round((sm_count // CLUSTER * BLK_N / (CLUSTER * BLK_M)) ** 0.5)),\n"
                "            num_clusters=sm_count // CLUSTER)",
}

if __name__ == "__main__":
    for name, line in VARIANTS.items():
        (HERE / name).mkdir(exist_ok=True)
        write_variant(HERE / name, [(GROUP, line)])
