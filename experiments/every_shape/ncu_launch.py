"""One launch of step 12 (its own choice, or a forced plan) and one of cuBLAS at a shape, inside a profiler range, for ncu:

    ncu --profile-from-start off --clock-control none --section SpeedOfLight ... \\
        python3 experiments/every_shape/ncu_launch.py 256x4608x3584 [dp64c1 [IMPL_DIR]]

Both run three times first (the build and cuBLAS's heuristics out of the way); ncu then sees exactly two kernels.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

from check_and_time import REPO, load  # noqa: E402
from grader.analysis import diagnosis  # noqa: E402


def main() -> None:
    shape = tuple(int(x) for x in sys.argv[1].split("x"))
    plan = sys.argv[2] if len(sys.argv) > 2 else None
    sm_count = torch.cuda.get_device_properties(0).multi_processor_count
    impl = Path(sys.argv[3]) if len(sys.argv) > 3 else REPO / "solutions"
    kernel, _ = load(12, shape, sm_count, impl, plan)
    a, b = diagnosis.random_inputs(shape, 1234)
    d = torch.empty((shape[0], shape[1]), dtype=torch.float16, device="cuda")
    d_cublas = torch.empty_like(d)
    for _ in range(3):
        kernel(a, b, d)
        torch.matmul(a, b.T, out=d_cublas)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    kernel(a, b, d)
    torch.matmul(a, b.T, out=d_cublas)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    print(f"{sys.argv[1]} {plan or 'own plan'}: max |step 12 - cuBLAS| = {(d.float() - d_cublas.float()).abs().max().item():.3g}")


if __name__ == "__main__":
    main()
