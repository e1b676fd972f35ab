import torch
from torch.profiler import profile, ProfilerActivity
for m, n, k in [(256, 4096, 4088), (256, 4096, 4096), (776, 5000, 2040), (776, 5000, 2048), (4096, 4096, 1000), (4096, 4096, 1008), (333, 12288, 760)]:
    a = torch.randn(m, k, device="cuda", dtype=torch.float16); b = torch.randn(n, k, device="cuda", dtype=torch.float16)
    for _ in range(3): a @ b.T
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        a @ b.T; torch.cuda.synchronize()
    names = {e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA}
    print(f"{m}x{n}x{k}", sorted(names))
