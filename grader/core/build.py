"""Build one step: TIRx PrimFunc -> CUDA source -> PTX -> cubin -> SASS, plus its launch shape."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from hashlib import sha256
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from grader.core.sandbox import Toolchain
from grader.core.steps import Shape, StepSpec

TVM_COMPILE_VARIABLES = (
    "TVM_KERNEL_DUMP", "TVM_KERNEL_DEBUG", "TVM_CUDA_PTXAS_REG_LEVEL", "TVM_CUDA_PTXAS_EXTRA_OPTS",
    "TVM_CUDA_NVCC_NO_FAST_MATH",
)

REPO_ROOT = Path(__file__).resolve().parents[2]


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
    shared_bytes: int = 0  # the extent of the kernel's dynamic shared memory (its SMEMPool), in bytes
    # the kernel's parameters after A, B and D (step 12's workspace and locks): shape and dtype of each
    scratch: list[tuple[tuple[int, ...], str]] = field(default_factory=list)


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
        hint = keyword_hint(err.text or "") if isinstance(err, SyntaxError) else None
        raise BuildFailed(f"importing {path.name} failed: {type(err).__name__}: {err}"
                          + (f"\n{hint}" if hint else "")) from err
    factory = getattr(module, spec.function_name, None)
    if factory is None:
        raise BuildFailed(f"{path.name} defines no function {spec.function_name}")
    return factory


def keyword_hint(line: str) -> str | None:
    """A PTX name that is a Python keyword (`.async.`, `.global.`) cannot be written as an attribute:
    TIRx spells it with a trailing underscore. The line of a SyntaxError, read for such a name."""
    import keyword

    found = next((word for word in re.findall(r"\.\s*([A-Za-z_]\w*)\s*(?=[.(\[])", line)
                  if keyword.iskeyword(word)), None)
    if found is None:
        return None
    return (f"`{found}` is a Python keyword: TIRx spells it `{found}_` (e.g. T.ptx.fence.proxy.async_.shared__cta(), "
            "T.ptx.cp.async_.bulk.commit_group()); every PTX name that is a keyword gets a trailing `_`")


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
    return build_with_executable(factory, spec, shape, arch, sm_count)[0]


def build_with_executable(factory, spec: StepSpec, shape: Shape, arch: str, sm_count: int):
    """The artifacts and TVM's runtime executable (what the build process exports for the GPU)."""
    start = time.perf_counter()
    prim_func = make_prim_func(factory, spec, shape, sm_count)
    executable = compile_module(prim_func, arch)
    cuda_source = executable.mod.imports[0].inspect_source()
    lowered = _lowered_script(prim_func, arch)
    cubin, ptx = compile_cuda(cuda_source, arch)
    artifacts = Artifacts(
        cuda_source=cuda_source,
        ptx=ptx,
        sass=disassemble(cubin),
        grid=_launch_extents(lowered, ("blockIdx.x", "blockIdx.y", "blockIdx.z")),
        threads_per_cta=_launch_extents(lowered, ("threadIdx.x", "threadIdx.y", "threadIdx.z"))[0],
        cluster=_launch_extents(lowered, ("clusterCtaIdx.x", "clusterCtaIdx.y", "clusterCtaIdx.z")),
        shared_fp16_buffers=_shared_fp16_buffers(prim_func.script()),
        has_tile_loop=re.search(r"^\s*while\b", lowered, re.MULTILINE) is not None,
        seconds=time.perf_counter() - start,
        shared_bytes=_shared_bytes(prim_func.script()),
        scratch=scratch_buffers(prim_func),
    )
    return artifacts, executable


def scratch_buffers(prim_func) -> list[tuple[tuple[int, ...], str]]:
    """Shape and dtype of each kernel parameter after A, B and D: global memory the kernel needs
    beside its operands (step 12: the fp32 partial sums and the int32 locks)."""
    return [(tuple(int(extent) for extent in param.ty.shape), str(param.ty.dtype)) for param in prim_func.params[3:]]


def launcher(function, scratch: list[tuple[tuple[int, ...], str]]) -> Callable[..., Any]:
    """`function(a, b, d)`, with the kernel's scratch buffers allocated once, zeroed, and passed after D.
    A kernel with scratch must leave it as it found it (step 12 returns its locks to zero), so that
    every call starts from zeros without a memset in the timed region."""
    if not scratch:
        return function
    import torch

    buffers = [torch.zeros(shape, dtype=getattr(torch, dtype), device="cuda") for shape, dtype in scratch]
    return lambda a, b, d: function(a, b, d, *buffers)


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


def _shared_bytes(script: str) -> int:
    return max((buffer.offset + buffer.size for buffer in shared_buffers(script)), default=0)


@dataclass(frozen=True)
class SharedBuffer:
    name: str
    dtype: str
    offset: int  # bytes from the start of dynamic shared memory
    size: int  # bytes


DTYPE_BYTES = {"uint64": 8, "int64": 8, "float64": 8, "uint32": 4, "int32": 4, "float32": 4,
               "float16": 2, "bfloat16": 2, "uint16": 2, "int16": 2, "uint8": 1, "int8": 1}
_DECL = re.compile(
    r'^\s*(\w+) = T\.decl_buffer\(\(([\d, ]*)\), "(\w+)", data=\w+\.data(?:, elem_offset=(\d+))?, scope="shared\.dyn"',
    re.MULTILINE,
)


def shared_buffers(tir_script: str) -> list[SharedBuffer]:
    """The buffers a kernel places in dynamic shared memory (its SMEMPool), from its TIR."""
    buffers = []
    for name, dims, dtype, elem_offset in _DECL.findall(tir_script):
        itemsize = DTYPE_BYTES.get(dtype, 1)
        count = 1
        for extent in dims.split(","):
            count *= int(extent) if extent.strip() else 1
        buffers.append(SharedBuffer(name, dtype, int(elem_offset or 0) * itemsize, count * itemsize))
    return buffers


def _shared_fp16_buffers(script: str) -> list[tuple[int, ...]]:
    declarations = re.finditer(r'T\.(?:decl|alloc)_buffer\(\(([\d, ]+)\), "float16"[^\n]*scope="shared', script)
    return [tuple(int(d) for d in found.group(1).split(",") if d.strip()) for found in declarations]


def compile_cubin(cuda_source: str, arch: str) -> bytes:
    """The cubin the GPU runs."""
    return compile_cuda(cuda_source, arch)[0]


_compiled: dict[tuple[str, str], tuple[bytes, str]] = {}


def compile_cuda(cuda_source: str, arch: str) -> tuple[bytes, str]:
    """The cubin and the PTX it was assembled from, in one run of TVM's own nvcc command (its flags)
    with the pinned nvcc: --keep leaves the PTX behind and does not change the cubin's bytes.
    Remembered per source, because TVM's build and the static facts ask for the same one."""
    import tvm
    from tvm.support import nvcc

    key = (sha256(cuda_source.encode()).hexdigest(), arch)
    if key in _compiled:
        return _compiled[key]
    _use_pinned_nvcc()
    number = arch.removeprefix("sm_")
    with tempfile.TemporaryDirectory(prefix="grader-nvcc-") as kept, tvm.target.Target({"kind": "cuda", "arch": arch}):
        try:
            cubin = bytes(nvcc.compile_cuda(
                cuda_source, target_format="cubin", arch=["-gencode", f"arch=compute_{number},code=sm_{number}"],
                options=["--keep", f"--keep-dir={kept}"], compiler="nvcc",
            ))
        except Exception as err:
            lines = [line for line in str(err).splitlines() if "error" in line.lower()]
            raise BuildFailed("nvcc failed:\n" + "\n".join(lines[:10] or str(err).splitlines()[-10:])) from err
        ptx = next(Path(kept).glob("*.ptx")).read_text()
    _compiled[key] = (cubin, ptx)
    return cubin, ptx


def disassemble(cubin: bytes) -> str:
    with tempfile.TemporaryDirectory(prefix="grader-") as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        return _run([_tool("cuobjdump"), "--dump-sass", str(path)], "cuobjdump")


_environment_lock = threading.Lock()


def _use_pinned_nvcc() -> None:
    """TVM runs `nvcc` from PATH: the pinned one goes first, and TVM's compile variables (extra flags,
    dump files) are dropped: the judged build uses none. Set for the whole process, once, so that
    compiles in threads never see the environment half changed."""
    with _environment_lock:
        nvcc_dir = str(Path(_tool("nvcc")).parent)
        if os.environ.get("PATH", "").split(os.pathsep)[0] != nvcc_dir:
            os.environ["PATH"] = os.pathsep.join([nvcc_dir, os.environ.get("PATH", "")])
        for name in TVM_COMPILE_VARIABLES:
            os.environ.pop(name, None)


# Set once per grade (grader.judge.cli) before any student code runs; else found on first use.
TOOLCHAIN: Toolchain | None = None


def _tool(name: str) -> str:
    global TOOLCHAIN
    TOOLCHAIN = TOOLCHAIN or Toolchain.resolve()
    try:
        return TOOLCHAIN.path(name)
    except FileNotFoundError as err:
        raise BuildFailed(str(err)) from err


def _run(command: list[str], what: str) -> str:
    env = {**os.environ, "PATH": TOOLCHAIN.search_path() if TOOLCHAIN else os.environ.get("PATH", "")}
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



def artifacts_from_json(data: dict) -> Artifacts:
    """Artifacts from JSON, whatever fields it has: lists become tuples again except where the field is a list."""
    from dataclasses import fields

    def tuples(value):
        return tuple(tuples(v) for v in value) if isinstance(value, list) else value

    values = {}
    for field in fields(Artifacts):
        value = tuples(data[field.name])
        values[field.name] = list(value) if str(field.type).startswith("list") else value
    return Artifacts(**values)
