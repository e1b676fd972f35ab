"""Which kernel cuBLAS runs for D = A @ B^T at shapes where step 12 is weak, and at the same shapes with K a multiple
of 16: the kernel names torch's profiler records for one call (their tile, stages and cluster are in the name).
On a GPU machine; output in h200-l2promo/cublas-kernels.log (these SHAPES), h200-weak-shapes/ (the shapes given).

    python3 experiments/every_shape/cublas_kernels.py [MxNxK ...]
"""

import sys

import torch
from torch.profiler import ProfilerActivity, profile

SHAPES = [(256, 4096, 4088), (256, 4096, 4096), (776, 5000, 2040), (776, 5000, 2048), (4096, 4096, 1000),
          (4096, 4096, 1008), (333, 12288, 760)]

for m, n, k in [tuple(int(x) for x in arg.split("x")) for arg in sys.argv[1:]] or SHAPES:
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(n, k, device="cuda", dtype=torch.float16)
    for _ in range(3):  # cuBLAS's heuristics and workspace settle before the profiled call
        a @ b.T
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        a @ b.T
        torch.cuda.synchronize()
    names = {event.name for event in prof.events() if event.device_type == torch.autograd.DeviceType.CUDA}
    print(f"{m}x{n}x{k}", sorted(names))
