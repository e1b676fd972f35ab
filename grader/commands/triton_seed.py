"""The seed's Triton kernel: a persistent TMA GEMM from Triton's tutorials, autotuned, the course's outside baseline.

`make bench` times it beside cuBLAS and the reference steps, in two variants: the plain persistent kernel and
the same kernel with `warp_specialize=True`. It computes D = A @ B^T like every step (A (M, K), B (N, K)).
The kernel is the seed document's (`tl.range(..., flatten=True)` runs the tile loop and the K loop as one
pipelined loop, so the next tile's loads are issued while the current tile finishes).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


@triton.jit
def _schedule_pid_mn(pid, group_size, m_group_size, m):
    group_id = pid // group_size
    sub_pid = pid % group_size
    m_start = group_id * m_group_size
    group_m_size = min(m_group_size, m - m_start)
    return m_start + (sub_pid % group_m_size), sub_pid // group_m_size


def _configs(pre_hook):
    return [
        triton.Config({"BM": 128, "BN": bn, "BK": bk, "GROUP_SIZE_M": 8, "EPILOGUE_SUBTILE": subtile},
                      num_stages=stages, num_warps=warps, pre_hook=pre_hook)
        for bn in (128, 256) for bk in (64, 128) for stages in (2, 3, 4) for warps in (4, 8)
        for subtile in (True, False)
    ]


def _set_block_shapes(nargs):
    bm, bk, bn = nargs["BM"], nargs["BK"], nargs["BN"]
    nargs["a_desc"].block_shape = [bm, bk]
    nargs["b_desc"].block_shape = [bn, bk]
    nargs["c_desc"].block_shape = [bm, bn // 2] if nargs["EPILOGUE_SUBTILE"] else [bm, bn]


@triton.autotune(configs=_configs(_set_block_shapes), key=["M", "N", "K", "WARP_SPECIALIZE"])
@triton.jit
def _persistent_tma_kernel(a_desc, b_desc, c_desc, M, N, K,
                           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_SIZE_M: tl.constexpr,
                           EPILOGUE_SUBTILE: tl.constexpr, NUM_SMS: tl.constexpr, WARP_SPECIALIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    m_tiles = tl.cdiv(M, BM)
    n_tiles = tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    total_tiles = m_tiles * n_tiles
    group_tiles = GROUP_SIZE_M * n_tiles

    tile_c = pid - NUM_SMS
    for tile_id in tl.range(pid, total_tiles, NUM_SMS, flatten=True, warp_specialize=WARP_SPECIALIZE):
        pid_m, pid_n = _schedule_pid_mn(tile_id, group_tiles, GROUP_SIZE_M, m_tiles)
        off_am = pid_m * BM
        off_bn = pid_n * BN
        accu = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in tl.range(k_tiles):
            a = a_desc.load([off_am, ki * BK])
            b = b_desc.load([off_bn, ki * BK])
            accu = tl.dot(a, b.T, accu)

        # the same tile as tile_id, from a second counter, so that the compiler can pipeline across tiles
        tile_c += NUM_SMS
        pid_m, pid_n = _schedule_pid_mn(tile_c, group_tiles, GROUP_SIZE_M, m_tiles)
        off_am_c = pid_m * BM
        off_bn_c = pid_n * BN
        if EPILOGUE_SUBTILE:  # two half-width stores: less shared memory, room for another stage
            accu = tl.reshape(accu, (BM, 2, BN // 2))
            accu = tl.permute(accu, (0, 2, 1))
            acc0, acc1 = tl.split(accu)
            c_desc.store([off_am_c, off_bn_c], acc0.to(tl.float16))
            c_desc.store([off_am_c, off_bn_c + BN // 2], acc1.to(tl.float16))
        else:
            c_desc.store([off_am_c, off_bn_c], accu.to(tl.float16))


def matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, warp_specialize: bool = False) -> torch.Tensor:
    """out = a @ b.T (fp16, fp32 accumulation), autotuned at the first call of each shape."""
    m, k = a.shape
    n = b.shape[0]
    placeholder = [1, 1]  # the autotuner's pre-hook sets each config's block shape
    a_desc = TensorDescriptor(a, a.shape, a.stride(), placeholder)
    b_desc = TensorDescriptor(b, b.shape, b.stride(), placeholder)
    c_desc = TensorDescriptor(out, out.shape, out.stride(), placeholder)
    num_sms = torch.cuda.get_device_properties("cuda").multi_processor_count

    def grid(meta):
        return (min(num_sms, triton.cdiv(m, meta["BM"]) * triton.cdiv(n, meta["BN"])),)

    _persistent_tma_kernel[grid](a_desc, b_desc, c_desc, m, n, k, NUM_SMS=num_sms, WARP_SPECIALIZE=warp_specialize)
    return out
