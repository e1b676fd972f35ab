"""Hopper (sm_90a) wgmma helpers shared by the Hopper skeletons and solutions.

TIRx 0.27 has no tile-level wgmma op (``Tx.gemm_async`` is tcgen05-only), so the Hopper track
issues the raw PTX instruction ``wgmma.mma_async`` itself. The repetitive parts live here:

* ``encode_sw128_desc``: the 64-bit wgmma matrix descriptor of a K-major, 128B-swizzled
  fp16 tile in shared memory (the layout ``mma_shared_layout(..., SWIZZLE_128B_ATOM, ...)`` gives).
* ``wgmma_128x128x16``: one K=16 slice of a 128x128 output tile, issued as two
  ``wgmma.mma_async.m64n128k16`` (rows 0-63, then rows 64-127) by one warpgroup.
* ``wgmma_64x256x16``: one K=16 slice of a 64x256 output tile, one ``wgmma.mma_async.m64n256k16``
  (step 10: each of two consumer warpgroups owns 64 rows of a 128x256 tile).
* ``wgmma_64xNx16``: the same for a 64xN tile, N a multiple of 16 from 32 to 256 (step 12 picks N per shape).
* ``acc_row`` / ``acc_col``: where accumulator register ``i`` of a thread sits in the tile.

Descriptor arithmetic (all in 16-byte units, the unit of the descriptor's address fields):

* A swizzled row of the tile is BLK_K = 64 fp16 = 128 bytes; 8 rows form one 1024-byte
  swizzle atom. The stride byte offset (SBO) between atoms is 1024 B = 64 units. The leading
  byte offset is unused for K-major swizzled operands (we pass 1, as CUTLASS does).
* The next K=16 slice starts 16 fp16 = 32 bytes further along the row: +2 units. The hardware
  applies the swizzle to the final address, so advancing the start address is enough
  (the tile must sit on a 1024-byte boundary).
* Rows 64-127 start 64 rows * 128 B = 8192 B = 512 units after row 0.
  Because the start address is the descriptor's lowest bit field, these offsets are plain
  integer additions to the 64-bit descriptor.
"""

from tvm.script import tirx as T

# wgmma descriptor swizzle code for 128-byte swizzle (TVM's encoder maps 3 -> layout type 1).
SWIZZLE_128B = 3
# 1024-byte stride between 8-row swizzle atoms, in 16-byte units.
SW128_SBO = 64
# Leading byte offset: ignored for K-major swizzled layouts.
SW128_LBO = 1
# One K=16 slice of fp16 = 32 bytes along a 128-byte row, in 16-byte units.
DESC_K16_STEP = 2
# 64 rows of 128 bytes, in 16-byte units: the start of the second m64 half of a 128-row tile.
DESC_ROWS64_STEP = 512
# One (128, 64) fp16 stage of a staged buffer = 16 KiB, in 16-byte units: the descriptor of stage s
# is the descriptor of stage 0 plus s * STAGE_DESC_STEP.
STAGE_DESC_STEP = 1024
# Accumulator registers per thread for one m64n128 fp32 wgmma.
ACC_PER_M64 = 64


@T.inline
def encode_sw128_desc(desc, smem_ptr):
    """Write into ``desc`` (a uint64 local element, e.g. ``desc_a[0]``) the wgmma descriptor of
    the 128B-swizzled, K-major fp16 tile that starts at ``smem_ptr``.

    ``smem_ptr`` is the tile's first element, e.g. ``Asmem.ptr_to([0, 0])`` or, for a staged
    buffer, ``Asmem.ptr_to([stage, 0, 0])``. Every thread encodes its own copy; all threads of
    the warpgroup must pass the same descriptor to wgmma.
    """
    T.cuda.wgmma.encode_matrix_descriptor(
        T.address_of(desc), smem_ptr, SW128_LBO, SW128_SBO, SWIZZLE_128B
    )


@T.inline
def wgmma_128x128x16(acc, desc_a, desc_b, kk, scale_d):
    """acc (+)= A[:, 16*kk : 16*kk+16] @ B[:, 16*kk : 16*kk+16]^T for a 128x128 tile.

    ``acc`` is a thread's 128 fp32 registers (``T.alloc_local((128,), "float32")``):
    ``acc[0:64]`` hold rows 0-63, ``acc[64:128]`` rows 64-127. ``desc_a`` / ``desc_b`` are the
    descriptors of the tile's first element (uint64 values). ``kk`` is the K=16 slice inside a
    BLK_K = 64 tile (0..3). ``scale_d`` is a bool: False overwrites acc (D = A*B), True
    accumulates (D = A*B + D); all 128 threads must pass the same value.

    Must be executed by all 128 threads of the warpgroup, after ``wgmma.fence`` and before
    ``wgmma.commit_group``. The instructions are asynchronous: acc is valid only after
    ``wgmma.wait_group``.
    """
    for h in T.unroll(2):
        T.ptx.wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16(
            *[acc[h * ACC_PER_M64 + i] for i in range(ACC_PER_M64)],
            desc_a + T.uint64(h * DESC_ROWS64_STEP + kk * DESC_K16_STEP),
            desc_b + T.uint64(kk * DESC_K16_STEP),
            scale_d,
            1,  # scale-a: +1 (no negation)
            1,  # scale-b: +1
            0,  # trans-a: 0 = K-major A
            0,  # trans-b: 0 = K-major B (B is stored (N, K), row-major)
        )


@T.inline
def wgmma_64x256x16(acc, desc_a, desc_b, kk, scale_d):
    """acc (+)= A[0:64, 16*kk : 16*kk+16] @ B[0:256, 16*kk : 16*kk+16]^T for a 64x256 tile.

    ``acc`` is a thread's 128 fp32 registers. ``desc_a`` describes the warpgroup's 64 rows of A
    (for rows 64-127 of a tile: the tile's descriptor + DESC_ROWS64_STEP), ``desc_b`` the 256
    rows of B. Same rules as ``wgmma_128x128x16``; the register layout is that of rows 0-63
    (``acc_row(0, ...)``, ``acc_col`` with i < 128).
    """
    T.ptx.wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16(
        *[acc[i] for i in range(2 * ACC_PER_M64)],
        desc_a + T.uint64(kk * DESC_K16_STEP),
        desc_b + T.uint64(kk * DESC_K16_STEP),
        scale_d,
        1,
        1,
        0,
        0,
    )


@T.inline
def wgmma_64xNx16(acc, desc_a, desc_b, kk, scale_d, n):
    """``wgmma_64x256x16`` for a 64 x ``n`` tile (``n`` a Python int, a multiple of 16 from 32 to 256); ``acc`` holds
    ``n // 2`` fp32 registers per thread, laid out as ``acc_row(0, ...)`` / ``acc_col``."""
    getattr(T.ptx.wgmma.mma_async.sync.aligned, f"m64n{n}k16").f32.f16.f16(
        *[acc[i] for i in range(n // 2)],
        desc_a + T.uint64(kk * DESC_K16_STEP),
        desc_b + T.uint64(kk * DESC_K16_STEP),
        scale_d,
        1,
        1,
        0,
        0,
    )


def acc_row(h, warp_id, lane_id, i):
    """Tile row of accumulator register ``acc[h * 64 + i]`` of thread (warp_id, lane_id).

    wgmma m64nNk16 fp32 fragment: warp w of the warpgroup owns rows 16w..16w+15 of the m64
    half; lane l holds rows l//4 and l//4 + 8; registers alternate between them in pairs.
    """
    return 64 * h + 16 * warp_id + lane_id // 4 + 8 * ((i // 2) % 2)


def acc_col(lane_id, i):
    """Tile column of accumulator register ``acc[h * 64 + i]`` of lane ``lane_id``.

    Registers 4j..4j+3 cover columns 8j..8j+7; registers i and i+1 (i even) are two adjacent
    columns, so a thread owns pairs of columns: 2*(l%4) and 2*(l%4)+1 in each group of 8.
    """
    return 8 * (i // 4) + 2 * (lane_id % 4) + i % 2
