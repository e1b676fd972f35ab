"""Build one variant and launch it a few times at one shape, for ncu (profile one launch after the first two):

    ncu --clock-control none --metrics ... -k regex:kernel_kernel --launch-skip 2 -c 1 \\
        python3 experiments/cluster_placement/one_launch.py step8+in-clusters 4096
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from time_variants import build, shape_of  # noqa: E402


def main() -> None:
    import torch

    from grader.analysis import diagnosis

    name, shape = sys.argv[1], shape_of(sys.argv[2])
    a, b = diagnosis.random_inputs(shape, seed=1)
    out = torch.empty((shape[0], shape[1]), dtype=torch.float16, device="cuda")
    sm_count = torch.cuda.get_device_properties(0).multi_processor_count
    kernel = build(name, Path(tempfile.mkdtemp(prefix="variants-")), shape, sm_count)
    for _ in range(4):
        kernel(a, b, out)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
