"""What the instrumented builds share (the deadlock locator, grader/analysis/locator.py; the measured timeline,
grader/analysis/timeline.py): the kernel exactly as written, with device code spliced into its generated CUDA.

TVM hands the generated CUDA source to the global function `tvm_callback_cuda_postproc` (if one is
registered) before NVRTC or nvcc compiles it. `cuda_postproc(rewrite)` registers that hook for one
build and removes it after, so a normal build never sees it. `splice` puts device code at the top of
the source and macros right before the kernel (after TVM's helper definitions, so a macro named like
a helper turns every call site into the instrumented call); `#line` directives keep the kernel's line
numbers those of the plain source (what `make inspect` prints).
"""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from grader.core import build
from grader.core.steps import Shape

HOOK = "tvm_callback_cuda_postproc"
KERNEL_START = 'extern "C" __global__'


def kernel_line(cuda_source: str) -> int:
    """Index (0-based) of the kernel's first line (its declaration) in the generated CUDA."""
    lines = cuda_source.split("\n")
    found = next((i for i, line in enumerate(lines) if line.startswith(KERNEL_START)), None)
    if found is None:
        raise build.BuildFailed("the generated CUDA has no kernel: nothing to instrument")
    return found


def splice(cuda_source: str, device_code: str, before_kernel: list[str]) -> str:
    """device_code first, then the source with the lines `before_kernel` right before the kernel."""
    lines = cuda_source.split("\n")
    start = kernel_line(cuda_source)
    return "\n".join(
        [device_code, "#line 1"] + lines[:start] + before_kernel + [f"#line {start + 1}"] + lines[start:]
    )


@contextlib.contextmanager
def cuda_postproc(rewrite):
    """Within this block, every CUDA source TVM compiles is first passed through rewrite(source)."""
    import tvm_ffi

    if tvm_ffi.get_global_func(HOOK, allow_missing=True) is not None:
        raise RuntimeError(f"{HOOK} is already registered: an instrumented build would replace someone's hook")
    tvm_ffi.register_global_func(HOOK, lambda code, target: rewrite(code))
    try:
        yield
    finally:
        tvm_ffi.remove_global_func(HOOK)


@dataclass
class InstrumentedBuild:
    executable: object
    cuda_source: str  # the instrumented source, as compiled
    plain_source: str  # the source TVM generated, as a normal build compiles it
    tir_script: str  # the kernel's TIR (its shared-memory pool: the barrier map)


def build_instrumented(factory, spec, shape: Shape, arch: str, sm_count: int, rewrite) -> InstrumentedBuild:
    """Build the step at shape for arch with rewrite(source) applied to its generated CUDA."""
    prim_func = build.make_prim_func(factory, spec, shape, sm_count)
    seen: list[str] = []

    def keep_and_rewrite(code: str) -> str:
        seen.append(code)
        return rewrite(code)

    with cuda_postproc(keep_and_rewrite):
        executable = build.compile_module(prim_func, arch)
    source = executable.mod.imports[0].inspect_source()
    return InstrumentedBuild(executable, source, seen[-1] if seen else source, prim_func.script())


def compile_cubin(cuda_source: str, arch: str, what: str = "the instrumented build") -> bytes:
    """nvcc -cubin: proof that an instrumented build assembles for the arch (no GPU needed)."""
    with tempfile.TemporaryDirectory(prefix="instrumented-") as tmp:
        cu, cubin = Path(tmp) / "kernel.cu", Path(tmp) / "kernel.cubin"
        cu.write_text(cuda_source)
        done = subprocess.run(
            [build._tool("nvcc"), "-cubin", f"-arch={arch}", "-w", "-o", str(cubin), str(cu)],
            capture_output=True, text=True,
        )
        if done.returncode != 0:
            raise build.BuildFailed(f"nvcc failed on {what}:\n" + "\n".join(done.stderr.splitlines()[-10:]))
        return cubin.read_bytes()
