"""Build one step: TIRx PrimFunc -> CUDA source -> PTX -> cubin -> SASS, plus its launch shape."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from grader.steps import Shape, StepSpec

REPO_ROOT = Path(__file__).resolve().parent.parent


class StepNotImplemented(Exception):
    """The step's file still has an unfilled TODO block (or no file at all)."""


class BuildFailed(Exception):
    """TIRx, nvcc or ptxas rejected the kernel; the message is what the student needs to read."""


@dataclass
class Artifacts:
    cuda_source: str
    ptx: str
    sass: str
    grid: tuple[int, int, int]
    threads_per_cta: int
    cluster: tuple[int, int, int]  # CTAs per cluster along x, y, z; (1, 1, 1) without clusters
    shared_fp16_buffers: list[tuple[int, ...]]  # shapes of the fp16 buffers placed in shared memory
    has_tile_loop: bool
    seconds: float


def step_file(impl_dir: Path, track: str, spec: StepSpec) -> Path:
    return impl_dir / track / spec.file_name


def kernel_factory(impl_dir: Path, track: str, spec: StepSpec) -> Callable[..., Any]:
    """Import the step's module from its file and return its hgemm_vN."""
    path = step_file(impl_dir, track, spec)
    if not path.exists():
        raise StepNotImplemented(f"no file {path}")
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    module_name = f"_graded_{impl_dir.name}_{track}_{path.stem}_{abs(hash(path))}"
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except Exception as err:  # a student's file can fail to import in any way
        raise BuildFailed(f"importing {path.name} failed: {type(err).__name__}: {err}") from err
    factory = getattr(module, spec.function_name, None)
    if factory is None:
        raise BuildFailed(f"{path.name} defines no function {spec.function_name}")
    return factory


def make_prim_func(factory: Callable[..., Any], spec: StepSpec, shape: Shape, sm_count: int):
    kwargs = {"sm_count": sm_count} if spec.takes_sm_count else {}
    try:
        return factory(*shape, **kwargs)
    except Exception as err:
        if _caused_by(err, NotImplementedError):
            raise StepNotImplemented(str(_root_cause(err))) from err
        raise BuildFailed(_tirx_message(err)) from err


def compile_module(prim_func, arch: str):
    """tvm.compile for the arch; returns the runtime executable (its CUDA source is inside)."""
    import tvm

    if not _has_module("cuda.bindings"):
        # On a GPU machine TVM turns the CUDA source into a cubin with NVRTC, which needs
        # cuda-bindings; nvcc, which the static checks need anyway, does the same job.
        os.environ.setdefault("TVM_CUDA_COMPILE_MODE", "nvcc")

    target = tvm.target.Target({"kind": "cuda", "arch": arch})
    try:
        with target:
            return tvm.compile(tvm.IRModule({"main": prim_func}), target=target, tir_pipeline="tirx")
    except Exception as err:
        raise BuildFailed(_tirx_message(err)) from err


def build(factory: Callable[..., Any], spec: StepSpec, shape: Shape, arch: str, sm_count: int) -> Artifacts:
    start = time.perf_counter()
    prim_func = make_prim_func(factory, spec, shape, sm_count)
    executable = compile_module(prim_func, arch)
    cuda_source = executable.mod.imports[0].inspect_source()
    lowered = _lowered_script(prim_func, arch)
    ptx, sass = _nvcc_ptx_and_sass(cuda_source, arch)
    return Artifacts(
        cuda_source=cuda_source,
        ptx=ptx,
        sass=sass,
        grid=_launch_extents(lowered, ("blockIdx.x", "blockIdx.y", "blockIdx.z")),
        threads_per_cta=_launch_extents(lowered, ("threadIdx.x", "threadIdx.y", "threadIdx.z"))[0],
        cluster=_launch_extents(lowered, ("clusterCtaIdx.x", "clusterCtaIdx.y", "clusterCtaIdx.z")),
        shared_fp16_buffers=_shared_fp16_buffers(prim_func.script()),
        has_tile_loop=re.search(r"^\s*while\b", lowered, re.MULTILINE) is not None,
        seconds=time.perf_counter() - start,
    )


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def _lowered_script(prim_func, arch: str) -> str:
    """The kernel after TIRx lowering: launch extents and the shared-memory size live here."""
    import tvm

    target = tvm.target.Target({"kind": "cuda", "arch": arch})
    with target:
        module = tvm.tirx.transform.BindTarget(target.with_host(tvm.target.Target("llvm")))(
            tvm.IRModule({"main": prim_func})
        )
        pipeline, _, _ = tvm.tirx.get_tir_pipeline("tirx")
        return pipeline(module).script()


def _launch_extents(lowered: str, tags: tuple[str, str, str]) -> tuple[int, int, int]:
    extents = []
    for tag in tags:
        found = re.search(rf'T\.launch_thread\("{re.escape(tag)}", (\d+)\)', lowered)
        extents.append(int(found.group(1)) if found else 1)
    return tuple(extents)


def _shared_fp16_buffers(script: str) -> list[tuple[int, ...]]:
    declarations = re.finditer(r'T\.(?:decl|alloc)_buffer\(\(([\d, ]+)\), "float16"[^\n]*scope="shared', script)
    return [tuple(int(d) for d in found.group(1).split(",") if d.strip()) for found in declarations]


def _nvcc_ptx_and_sass(cuda_source: str, arch: str) -> tuple[str, str]:
    nvcc = _tool("nvcc")
    virtual_arch = arch.replace("sm_", "compute_")
    with tempfile.TemporaryDirectory(prefix="grader-") as tmp:
        cu, ptx, cubin = (Path(tmp) / name for name in ("kernel.cu", "kernel.ptx", "kernel.cubin"))
        cu.write_text(cuda_source)
        _run([nvcc, "-ptx", f"-arch={virtual_arch}", "-w", "-o", str(ptx), str(cu)], "nvcc")
        _run([_tool("ptxas"), f"-arch={arch}", "-o", str(cubin), str(ptx)], "ptxas")
        sass = _run([_tool("cuobjdump"), "--dump-sass", str(cubin)], "cuobjdump")
        return ptx.read_text(), sass


def _tool(name: str) -> str:
    """Find a CUDA tool: PATH, then CUDA_HOME, then the NVIDIA pip wheels (cuobjdump, nvdisasm)."""
    candidates = [shutil.which(name)]
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    candidates.append(str(Path(cuda_home) / "bin" / name))
    candidates.extend(str(folder / name) for folder in _pip_cuda_bin_dirs())
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return candidate
    raise BuildFailed(
        f"{name} not found: install the CUDA toolkit (13.0 tested) or `make setup` for cuobjdump"
    )


def _pip_cuda_bin_dirs() -> list[Path]:
    spec = importlib.util.find_spec("nvidia")
    if spec is None or not spec.submodule_search_locations:
        return []
    return [Path(root) / sub / "bin" for root in spec.submodule_search_locations for sub in ("cu13", "")]


def _run(command: list[str], what: str) -> str:
    env = dict(os.environ)
    # cuobjdump runs nvdisasm from PATH; the pip wheels put both in the same folder.
    env["PATH"] = os.pathsep.join([str(Path(command[0]).parent), env.get("PATH", "")])
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        errors = [line for line in done.stderr.splitlines() if "error" in line.lower()]
        raise BuildFailed(f"{what} failed:\n" + "\n".join(errors[:10] or done.stderr.splitlines()[-10:]))
    return done.stdout


def _caused_by(err: BaseException, kind: type) -> bool:
    return any(isinstance(link, kind) for link in _chain(err))


def _root_cause(err: BaseException) -> BaseException:
    return list(_chain(err))[-1]


def _chain(err: BaseException):
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        yield err
        err = err.__cause__ or err.__context__


def _tirx_message(err: BaseException, max_lines: int = 30) -> str:
    """TIRx's own words (source location, failing op, dispatch table), without the traceback."""
    lines = [line for line in str(err).splitlines() if line.strip()]
    if not lines:
        lines = [type(_root_cause(err)).__name__ + ": " + str(_root_cause(err))]
    if len(lines) > max_lines:
        lines = lines[:max_lines] + [f"... ({len(lines) - max_lines} more lines)"]
    return "\n".join(lines)
