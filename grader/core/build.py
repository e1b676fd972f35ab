"""Build one step: TIRx PrimFunc -> CUDA source -> PTX -> cubin -> SASS, plus its launch shape."""

from __future__ import annotations

import ast
import functools
import importlib.util
import inspect
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
    _look_up_the_macro_parser_by_frame()
    module_name = f"_graded_{impl_dir.name}_{track}_{path.stem}_{abs(hash(path))}"
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except Exception as err:  # a student's file can fail to import in any way
        if isinstance(err, NotImplementedError):  # a TODO block at module level (step 12's host-side classes)
            raise StepNotImplemented(str(err)) from err
        hint = keyword_hint(err.text or "") if isinstance(err, SyntaxError) else None
        raise BuildFailed(f"importing {path.name} failed: {type(err).__name__}: {err}"
                          + (f"\n{hint}" if hint else "")) from err
    factory = getattr(module, spec.function_name, None)
    if factory is None:
        raise BuildFailed(f"{path.name} defines no function {spec.function_name}")
    return factory


def _look_up_the_macro_parser_by_frame() -> None:
    """Each expansion of a T.macro or T.inline finds the parser in the globals of the nearest calling frame that has
    it (ScriptMacro._find_parser_def), through inspect.getouterframes, which also reads the source line of every frame
    on the stack; for frames of the parser's eval'd expressions (file '<ast>') and of a step loaded from its path that
    is inspect.getmodule scanning all of sys.modules. Hopper step 12 expands 63 macros a shape: the lookup was three
    quarters of its parse (1.6-2.4 -> 0.55-0.8 CPU s a shape). The same search, walking f_back, reads no source."""
    from tvm.script.parser.core.parser import ScriptMacro

    def find_parser_def(macro):
        frame = inspect.currentframe()
        while frame is not None:
            parser = frame.f_globals.get(ScriptMacro.parser_object_name)
            if parser is not None:
                return parser
            frame = frame.f_back
        raise RuntimeError(f"{ScriptMacro.parser_object_name} not available")

    ScriptMacro._find_parser_def = find_parser_def


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
    return build_prim_func(make_prim_func(factory, spec, shape, sm_count), arch)[0]


def build_prim_func(prim_func, arch: str):
    """The artifacts and TVM's runtime executable (host launcher + device code) of one kernel. Every
    static fact is read from what this build made: the TIR it was given, its lowering, CUDA, PTX, SASS."""
    start = time.perf_counter()
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


# ---- the kernel's TIR as text: what a build process that imported a step file hands back ------------

TIR_MODULES = ("T", "Axis")  # the names a printed kernel refers to: TVMScript's tirx parser, the layout axes
TVM_PACKAGES = ("tvm", "tvm_ffi")  # where everything T.* and Axis.* leads must live
TIR_BUILTINS = frozenset({"range", "min", "max", "True", "False", "None"})  # Python names TVMScript prints
_NOT_IN_TIR = (ast.Import, ast.ImportFrom, ast.Lambda, ast.ClassDef, ast.Global, ast.Nonlocal, ast.JoinedStr,
               ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Yield, ast.YieldFrom, ast.Await,
               ast.AsyncFunctionDef, ast.Try, ast.Raise, ast.Delete, ast.Starred, ast.NamedExpr)


def parse_kernel_tir(text: str):
    """The PrimFunc a kernel's TVMScript text describes. TVMScript's parser evaluates the text's
    expressions as Python, so the text is first read as a syntax tree and refused unless it is what the
    printer writes: one `@T.prim_func` function whose names are its own variables, T.* and Axis.*
    (resolved here, none leading out of tvm) and a few builtins, with no attribute that starts with `_`.
    Raises BuildFailed with one line for anything else."""
    import tvm
    from tvm.script.parser import tirx as tirx_parser
    from tvm.tirx.layout import Axis

    namespace = {"T": tirx_parser, "Axis": Axis}
    tree = _checked_tir_tree(text, namespace)
    try:
        parsed = tvm.script.from_source(ast.unparse(_as_the_parser_reads(tree)), extra_vars=namespace)
    except Exception as err:  # noqa: BLE001 - any parser failure is the text's
        raise BuildFailed(f"the kernel's TIR does not parse: {_first_line(err)}") from None
    if isinstance(parsed, tvm.IRModule):
        functions = list(parsed.functions.values())
        parsed = functions[0] if len(functions) == 1 else None
    if not isinstance(parsed, tvm.tirx.PrimFunc):
        raise BuildFailed("the kernel's TIR is not one PrimFunc")
    by_name = _CALL_BY_NAME.search(parsed.script())
    if by_name:
        raise BuildFailed(f"the kernel's TIR calls a function by its name ({by_name.group(1)}): the course's kernels "
                          "use TIRx's own operations only")
    return parsed


# Calls of a function named by a string (C, packed, LLVM): on the host they would run whatever the name
# says in the GPU child. No step needs one; the parsed kernel is printed again, so every spelling of the
# call is caught in its canonical form.
_CALL_BY_NAME = re.compile(r"\bT\.(\w*(?:extern|packed|llvm|call_intrin)\w*)\(")


def _checked_tir_tree(text: str, namespace: dict[str, Any]) -> ast.Module:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError) as err:
        raise BuildFailed(f"the kernel's TIR is not TVMScript: {err}") from None
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef)]
    if len(functions) != 1 or len(tree.body) != 1:
        raise BuildFailed("the kernel's TIR must be one @T.prim_func function and nothing else")
    bound = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)}
    bound |= {arg.arg for node in ast.walk(tree) if isinstance(node, ast.arguments)
              for arg in [*node.posonlyargs, *node.args, *node.kwonlyargs]}
    bound.add(functions[0].name)
    for node in ast.walk(tree):
        if isinstance(node, _NOT_IN_TIR) or (isinstance(node, ast.FunctionDef) and node is not functions[0]):
            raise BuildFailed(f"the kernel's TIR holds Python TVMScript never prints ({type(node).__name__}, "
                              f"line {getattr(node, 'lineno', '?')})")
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            raise BuildFailed(f"the kernel's TIR reads the private attribute {node.attr!r} (line {node.lineno})")
        if isinstance(node, ast.Name) and node.id.startswith("__"):
            raise BuildFailed(f"the kernel's TIR names {node.id!r} (line {node.lineno})")
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in bound | set(namespace):
            if node.id not in TIR_BUILTINS:
                raise BuildFailed(f"the kernel's TIR names {node.id!r}, which it does not define (line {node.lineno})")
        if isinstance(node, ast.Attribute) and _chain_root(node) in namespace:
            _resolve_in_tvm(node, namespace)
    return tree


# TVM 0.27's printer writes gemm_async(C, A, B, transA, transB, accum, ...) where its parser reads
# gemm_async(C, A, B, SFA, SFB, transA, transB, accum, ...): the three flags are passed by name instead.
_GEMM_FLAGS = ("transA", "transB", "accum")


def _as_the_parser_reads(tree: ast.Module) -> ast.Module:
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "gemm_async"
                and len(node.args) == 3 + len(_GEMM_FLAGS)):
            node.keywords = [ast.keyword(name, value) for name, value in zip(_GEMM_FLAGS, node.args[3:])] + node.keywords
            node.args = node.args[:3]
    return tree


def _chain_root(node: ast.AST) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _resolve_in_tvm(node: ast.Attribute, namespace: dict[str, Any]) -> None:
    """T.a.b...: each step must exist and stay inside tvm (no module or function of another package)."""
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    value = namespace[node.id]
    for name in reversed(names):
        try:
            value = getattr(value, name)
        except Exception:  # noqa: BLE001 - a namespace's __getattr__ may raise anything
            raise BuildFailed(f"the kernel's TIR calls {node.id}.{'.'.join(reversed(names))}, "
                              "which TVMScript does not have") from None
        if inspect.ismodule(value):
            home = value.__name__
        elif callable(value):
            function = value.func if isinstance(value, functools.partial) else value
            home = getattr(function, "__module__", None) or type(function).__module__ or ""
        else:
            continue
        if home.split(".")[0] not in TVM_PACKAGES:
            raise BuildFailed(f"the kernel's TIR reaches {home!r} through {node.id}.{'.'.join(reversed(names))}")


def _first_line(err: BaseException) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip() and not set(line.strip()) <= {"^", "|"}]
    return (lines[0] if lines else type(err).__name__)[:300]


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
