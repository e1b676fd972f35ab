"""Variants of the Hopper solutions of steps 8-10 that change only how their CTAs are launched or which
tiles each CTA takes, for the question of docs/measurements.md "Where the cluster launch puts CTAs".

A variant is named by its step and the changes applied to that step's solution, in order:
`step8+in-clusters+plain-order` is step 8's code launched as 2-CTA clusters, its CTAs numbered as a plain
launch would place them. The changes:
    in-clusters    (step 8) declare a 2-CTA cluster (T.cta_id_in_cluster) and change nothing else
    no-cluster     (step 10) 128x256 CTA tiles, each CTA loads all of B, no cluster launch
    n-grouped      the scheduler's L2 groups run along N instead of M (consecutive tiles share A, not B)
    grid-2d        the grid is (2, SMs / 2), as cuBLAS launches it, instead of (SMs,)
    plain-order    each CTA's place in the tile order comes from the SM it runs on (%smid), numbered so
                   that 8 consecutive CTAs share one 8-SM group of a GPC, as a plain launch places them on
                   the H100 and H200 the probe read (placement_probe.cu); SM numbering is the chip's,
                   so this one is a measurement device for that layout, not a kernel to teach
Each variant is a Python file defining hgemm_vN, and with plain-order also cuda_rewrite(source): the
generated CUDA is rewritten before nvcc compiles it (grader.analysis.instrument.cuda_postproc).
"""

from __future__ import annotations

import contextlib
import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOLUTIONS = REPO / "solutions" / "hopper"
STEP_FILES = {8: "step08_deeper_pipeline.py", 9: "step09_cluster.py", 10: "step10_two_consumers.py"}


class SolutionChanged(Exception):
    """A line a variant rewrites is no longer in the solution: the variant must be brought up to date."""


def _replace(text: str, old: str, new: str) -> str:
    if text.count(old) != 1:
        raise SolutionChanged(f"expected exactly one occurrence of:\n{old}")
    return text.replace(old, new)


_BX = "        bx = T.cta_id([sm_count])\n"
_RANK = "        rank = T.cta_id_in_cluster([CLUSTER])\n"


def in_clusters(step: int, text: str) -> str:
    if step != 8:
        raise ValueError("in-clusters applies to step 8 (steps 9 and 10 are cluster launches already)")
    return _replace(text, _BX, _BX + "        rank = T.cta_id_in_cluster([2])\n")


def no_cluster(step: int, text: str) -> str:
    if step != 10:
        raise ValueError("no-cluster applies to step 10")
    for old, new in [
        ("    CLUSTER = 2  # CTAs per cluster, stacked along M\n", "    CLUSTER = 1\n"),
        (_RANK, ""),
        ("m_st = T.meta_var(tile_scheduler.m_idx * (CLUSTER * BLK_M) + rank * BLK_M)",
         "m_st = T.meta_var(tile_scheduler.m_idx * BLK_M)"),
        ("Bsmem[produce.stage, rank * B_PART:(rank + 1) * B_PART, :]", "Bsmem[produce.stage, :, :]"),
        ("B[n_st + rank * B_PART:n_st + (rank + 1) * B_PART,\n                                            k * BLK_K:(k + 1) * BLK_K],",
         "B[n_st:n_st + BLK_N, k * BLK_K:(k + 1) * BLK_K],"),
        (",\n                                          cta_mask=(1 << CLUSTER) - 1)", ")"),
        ("                                for peer in T.unroll(CLUSTER):\n                                    mma2tma.arrive(release.stage, remote=peer)",
         "                                mma2tma.arrive(release.stage)"),
        ("                        for peer in T.unroll(CLUSTER):\n                            mma2tma.arrive(release.stage, remote=peer)",
         "                        mma2tma.arrive(release.stage)"),
        ("        T.cuda.cluster_sync()\n\n        # ---- tile", "        T.cuda.cta_sync()\n\n        # ---- tile"),
        ("        # no CTA leaves while its peer may still arrive on its barriers\n        T.cuda.cluster_sync()\n", ""),
    ]:
        text = _replace(text, old, new)
    return text


def n_grouped(step: int, text: str) -> str:
    rows = "M // BLK_M" if "num_m_tiles=M // BLK_M," in text else "M // (CLUSTER * BLK_M)"
    text = _replace(text, f'"ts", num_m_tiles={rows}, num_n_tiles=N // BLK_N,',
                    f'"ts", num_m_tiles=N // BLK_N, num_n_tiles={rows},')
    text = _replace(text, "tile_scheduler.m_idx * ", "tile_scheduler.N_IDX * ")
    text = _replace(text, "tile_scheduler.n_idx * BLK_N", "tile_scheduler.m_idx * BLK_N")
    return _replace(text, "tile_scheduler.N_IDX * ", "tile_scheduler.n_idx * ")


def grid_2d(step: int, text: str) -> str:
    if "T.cta_id_in_cluster" not in text:  # a plain launch of step 8
        return _replace(text, _BX, "        gx, gy = T.cta_id([2, sm_count // 2])\n        bx = T.meta_var(gy * 2 + gx)\n")
    if step == 8:
        return _replace(text, _BX + "        rank = T.cta_id_in_cluster([2])\n",
                        "        gx, gy = T.cta_id([2, sm_count // 2])\n        rank, _ = T.cta_id_in_cluster([2, 1])\n"
                        "        bx = T.meta_var(gy * 2 + gx)\n")
    text = _replace(text, _BX, "        gx, gy = T.cta_id([CLUSTER, sm_count // CLUSTER])\n"
                               "        bx = T.meta_var(gy * CLUSTER + gx)\n")
    return _replace(text, _RANK, "        rank, _ = T.cta_id_in_cluster([CLUSTER, 1])\n")


_PLAIN_ORDER = '''

def cuda_rewrite(source):
    """blockIdx.x -> the CTA's place in a plain launch's order, from the SM it runs on (H100/H200 layout)."""
    signature = ("kernel_kernel(const __grid_constant__ CUtensorMap A_tensormap, "
                 "const __grid_constant__ CUtensorMap B_tensormap, const __grid_constant__ CUtensorMap D_tensormap) {")
    if source.count(signature) != 1 or "((int)blockIdx.x)" not in source:
        raise RuntimeError("plain-order: the generated CUDA no longer has the kernel signature or blockIdx.x it rewrites")
    # SMs 0-63 form 8 groups {2j, 2j+1, 2j+16, 2j+17, ...}, SMs 64-119 7 groups {64+2j, 65+2j, 78+2j, ...}
    order = (
        "\\n  unsigned smid; asm volatile(\\"mov.u32 %0, %%smid;\\" : \\"=r\\"(smid));"
        "\\n  int plain_order = (int)smid;"
        "\\n  if (smid < 64) { int t = smid >> 1; plain_order = (t % 8) * 8 + (t / 8) * 2 + (smid & 1); }"
        "\\n  else if (smid < 120) { int t = (smid - 64) >> 1; plain_order = 64 + (t % 7) * 8 + (t / 7) * 2 + (smid & 1); }"
    )
    return source.replace(signature, signature + order).replace("((int)blockIdx.x)", "((int)plain_order)")
'''

CHANGES = {"in-clusters": in_clusters, "no-cluster": no_cluster, "n-grouped": n_grouped, "grid-2d": grid_2d}


def source(name: str) -> tuple[int, str]:
    """(step number, the variant's Python source) for a name like step9+n-grouped."""
    head, *changes = name.split("+")
    if not head.startswith("step") or int(head[4:]) not in STEP_FILES:
        raise ValueError(f"{name}: the name starts with step8, step9 or step10")
    step = int(head[4:])
    text = (SOLUTIONS / STEP_FILES[step]).read_text()
    for change in changes:
        if change == "plain-order":
            text += _PLAIN_ORDER
        elif change in CHANGES:
            text = CHANGES[change](step, text)
        else:
            raise ValueError(f"{name}: unknown change {change!r} (known: {', '.join([*CHANGES, 'plain-order'])})")
    return step, text


def load(name: str, folder: Path):
    """The variant written into `folder` and imported: (its StepSpec, its hgemm_vN, the context its build must run
    in: the CUDA rewrite hooked in for a plain-order variant, nothing for the others)."""
    from grader.analysis import instrument
    from grader.core.steps import STEPS

    step, text = source(name)
    path = folder / (name.replace("+", "__").replace("-", "_") + ".py")
    path.write_text(text)
    module_spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    spec = STEPS["hopper"][step]
    rewrite = getattr(module, "cuda_rewrite", None)
    building = instrument.cuda_postproc(rewrite) if rewrite else contextlib.nullcontext()
    return spec, getattr(module, spec.function_name), building
