"""`python -m grader.commands.grade_class.gpu_probe [--check]`: the CUDA devices this process sees, as one JSON
line on stdout: {"count": N, "names": [...], "check": null | "passed" | why it failed}.

It runs in a process of its own, before a student's grade (the grade's child must see exactly one GPU) and, with
--check, after a kernel faulted with an illegal address: a small known kernel (a cuBLAS half-precision GEMM,
compared with the CPU's) must still run right on that GPU before the next student gets it.
"""

from __future__ import annotations

import json
import sys

CHECK_SIZE = 512


def check_gpu() -> str:
    import torch

    try:
        generator = torch.Generator().manual_seed(0)
        a = torch.randn(CHECK_SIZE, CHECK_SIZE, generator=generator).half()
        b = torch.randn(CHECK_SIZE, CHECK_SIZE, generator=generator).half()
        product = (a.cuda() @ b.cuda()).float().cpu()
        torch.cuda.synchronize()
    except Exception as err:  # any CUDA error: a GPU left in a bad state by the kernel before
        return f"failed: {' '.join(str(err).split())[:200]}"
    expected = a.float() @ b.float()
    if not torch.allclose(product, expected, rtol=1e-2, atol=0.25):
        worst = (product - expected).abs().max().item()
        return f"failed: a {CHECK_SIZE}^3 cuBLAS GEMM came out wrong (largest error {worst:.3g})"
    return "passed"


def main(argv: list[str]) -> int:
    import torch

    count = torch.cuda.device_count()
    names = [torch.cuda.get_device_name(index) for index in range(count)]
    check = (check_gpu() if count else "failed: no CUDA device") if argv == ["--check"] else None
    print(json.dumps({"count": count, "names": names, "check": check}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
