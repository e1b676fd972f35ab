"""A step's build, in two confined processes; the judge trusts one artifact between them.

1. The student's process (`python -m grader.runs.build_child`, the only process of a grade that imports
   the step file) calls the step's hgemm_vN at each shape and hands back one thing per shape: the
   kernel's TIR as TVMScript text. Nothing else it writes is read.
2. The judge's build process (`python -m grader.runs.build_child derive`, which never imports a step
   file) parses that text (core/build.parse_kernel_tir: refused unless it is what TVMScript's printer
   writes), runs the protocol checker on it (analysis/protocol.py), builds CUDA, PTX, cubin and SASS
   from it with the pinned tools, reads every static fact (buffers, grid, cluster, features) from what
   it built, and exports the library the GPU child loads (TVM's host launcher, the cubin it compiled).
The protocol checker and the build read the same kernel: a factory cannot tell one caller from the other.
Both run over their own copy of the course, confined (core/sandbox.run_child).
"""

from __future__ import annotations

import base64
import os
import sys

if __name__ in ("__main__", "__mp_main__"):  # a build process, or one of the processes that build its shapes
    # No build process needs torch, and tvm_ffi imports it whenever it can: 3.6 of the 5.5 s that importing TVM
    # takes, in each of them. Marked absent before anything imports TVM (tvm_ffi then goes on without it).
    sys.modules["torch"] = None
from dataclasses import dataclass
from pathlib import Path

from grader.core import build, sandbox
from grader.core.build import Artifacts, BuildFailed, StepNotImplemented, Toolchain
from grader.core.steps import STEPS, Shape, StepSpec, format_shape

BUILD_TIMEOUT_S = 120.0


@dataclass
class Built:
    """One shape's build as the judge knows it: the static facts and the cubin of its own build process
    (the bytes the static checks read and the GPU must run)."""

    shape: Shape
    artifacts: Artifacts
    cubin: bytes
    library: str | None  # the exported TVM library (host launcher + that cubin), for the GPU


@dataclass
class ProtocolVerdict:
    ok: bool
    lines: list[str]  # the checker's report for one shape, as `make check` prints it


@dataclass
class Builds:
    kernels: list[Built]
    protocol_verdicts: list[ProtocolVerdict]  # one per shape the protocol checker was asked for
    protocol_unsupported: str | None = None  # what kept the checker from simulating the kernel

    @property
    def protocol_problems(self) -> list[str]:
        """What the protocol checker found, one entry per shape where it found something."""
        return ["\n".join(verdict.lines) for verdict in self.protocol_verdicts if not verdict.ok]


def build_isolated(
    impl_dir: Path, track: str, spec: StepSpec, shapes: list[Shape], arch: str, sm_count: int, *,
    with_solutions: bool, export: bool, out_dir: Path, timeout_s: float = BUILD_TIMEOUT_S,
    protocol_shapes: list[Shape] = (),
) -> Builds:
    """Build `shapes` and run the protocol checker at `protocol_shapes`, from the TIR the step file's
    process hands back; raise StepNotImplemented or BuildFailed as an in-process build would. The caller
    compares the course's files before and after (sandbox.Watch)."""
    tools = build.TOOLCHAIN.paths if build.TOOLCHAIN else Toolchain.resolve().paths
    env = {**os.environ, "PATH": Toolchain(tools).search_path()}
    wanted = list(dict.fromkeys([*map(tuple, shapes), *map(tuple, protocol_shapes)]))
    request = {"track": track, "step": spec.number, "sm_count": sm_count, "shapes": wanted}
    run = sandbox.run_child("grader.runs.build_child", request, impl_dir, with_solutions=with_solutions,
                            timeout_s=timeout_s, env=env)
    texts = _kernel_texts(run, spec, wanted, timeout_s)

    derive = {
        "track": track, "step": spec.number, "arch": arch, "tools": tools, "kernels": texts,
        "shapes": [list(shape) for shape in shapes], "protocol_shapes": [list(shape) for shape in protocol_shapes],
        "export_dir": str(out_dir) if export else None,
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    run = sandbox.run_child("grader.runs.build_child", {**derive, "derive": True}, impl_dir, with_solutions=False,
                            timeout_s=timeout_s + DERIVE_TIMEOUT_S, env=env, writable=[out_dir] if export else [])
    reply = run.reply or {}
    if run.finished.returncode is None:
        raise BuildFailed(f"building step {spec.number}'s kernel from its TIR did not finish in "
                          f"{timeout_s + DERIVE_TIMEOUT_S:.0f} s")
    if reply.get("error"):
        raise BuildFailed(str(reply.get("message", "the build failed")))
    try:
        kernels = [_built(entry, out_dir if export else None) for entry in reply["shapes"]]
        if [k.shape for k in kernels] != [tuple(shape) for shape in shapes]:
            raise ValueError("not the shapes asked for")
        checked = reply.get("protocol") or {}
        verdicts = [ProtocolVerdict(bool(v["ok"]), [str(line) for line in v["lines"]])
                    for v in checked.get("verdicts", [])]
    except (KeyError, TypeError, ValueError) as err:
        raise BuildFailed(f"the judge's build process ended without a usable result ({_last_line(run)}; {err})") from None
    unsupported = checked.get("unsupported")
    return Builds(kernels, verdicts, str(unsupported) if unsupported else None)


DERIVE_TIMEOUT_S = 300.0  # the judge's build: parse, protocol checker, nvcc per shape


def _kernel_texts(run: sandbox.ChildRun, spec: StepSpec, shapes: list[Shape], timeout_s: float) -> list[dict]:
    """The TIR text per shape that the step file's process handed back, or why there is none. Its
    messages (not implemented, a TIRx error) can only fail its own build, so they are passed on."""
    reply = run.reply
    if run.finished.returncode is None:
        raise BuildFailed(f"building step {spec.number} did not finish in {timeout_s:.0f} s "
                          "(an endless loop at import or in the kernel function?)")
    if run.unreadable:
        raise BuildFailed("the build process wrote an unreadable result (not a JSON object)")
    if reply is not None and reply.get("error") == "not implemented":
        raise StepNotImplemented(str(reply.get("message", "")))
    if reply is not None and reply.get("error"):
        raise BuildFailed(str(reply.get("message", "")))
    kernels = (reply or {}).get("kernels")
    if run.finished.returncode != 0 or not isinstance(kernels, list) or len(kernels) != len(shapes):
        raise BuildFailed(f"the build process ended early (exit status {run.finished.returncode}): {_last_line(run)} "
                          "(a file that exits or raises at import, e.g. sys.exit or KeyboardInterrupt?)")
    texts = []
    for shape, entry in zip(shapes, kernels):
        if not isinstance(entry, dict) or entry.get("shape") != list(shape) or not isinstance(entry.get("tir"), str):
            raise BuildFailed(f"the build process wrote a malformed result (no TIR text for {format_shape(shape)})")
        texts.append({"shape": list(shape), "tir": entry["tir"]})
    return texts


def _last_line(run: sandbox.ChildRun) -> str:
    lines = [line.strip() for line in run.finished.output.splitlines() if line.strip()] or ["no output"]
    return lines[-1][:300]


def _built(entry: dict, out_dir: Path | None) -> Built:
    shape = tuple(int(d) for d in entry["shape"])
    library = None
    if out_dir is not None:
        library = str(out_dir / _library_name(shape))
    return Built(shape, build.artifacts_from_json(entry["artifacts"]), base64.b64decode(entry["cubin"]), library)


def _library_name(shape: Shape) -> str:
    return f"kernel_{format_shape(shape)}.so"


def _workers(jobs: int) -> int:
    return max(1, min(jobs, os.cpu_count() or 1))


# ---- the student's process ------------------------------------------------------------------------


def _student_child(request: dict) -> dict:
    """Import the step file and print its kernel's TIR at each shape."""
    spec = STEPS[request["track"]][request["step"]]
    try:
        factory = build.kernel_factory(Path(request["impl_dir"]), request["track"], spec)
        kernels = [{"shape": list(shape), "tir": build.make_prim_func(factory, spec, tuple(shape),
                                                                        request["sm_count"]).script()}
                   for shape in request["shapes"]]
    except StepNotImplemented as err:
        return {"error": "not implemented", "message": str(err)}
    except BuildFailed as err:
        return {"error": "failed", "message": str(err)}
    return {"kernels": kernels}


# ---- the judge's build process -------------------------------------------------------------------


def _derive_child(request: dict) -> dict:
    """Parse each shape's TIR, check its protocol, build it; never imports a step file."""
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool
    from multiprocessing import get_context

    texts = {tuple(entry["shape"]): entry["tir"] for entry in request["kernels"]}
    shapes = [tuple(shape) for shape in request["shapes"]]
    reply: dict = {"shapes": []}
    try:
        kernels = {shape: build.parse_kernel_tir(text) for shape, text in texts.items()}
        _start_derive_process(request)
        jobs = [(request, shape, texts[shape]) for shape in shapes]
        if _workers(len(jobs)) <= 1:  # the kernels parsed above
            entries = [_derive_kernel(request, shape, kernels[shape]) for shape in shapes]
        else:  # shapes build in parallel, each in a fresh process (TVM does not survive a fork)
            with ProcessPoolExecutor(_workers(len(jobs)), get_context("spawn"), _start_derive_process,
                                     (request,)) as pool:
                entries = list(pool.map(_derive_shape, *zip(*jobs)))
        reply["shapes"] = entries
        if request["protocol_shapes"]:
            reply["protocol"] = _protocol_check(request, kernels)
    except BuildFailed as err:
        return {"error": "failed", "message": str(err)}
    except BrokenProcessPool:
        return {"error": "failed", "message": "a build process for one shape ended early"}
    return reply


def _protocol_check(request: dict, kernels: dict) -> dict:
    """The protocol checker's verdict at each asked shape, on the kernel parsed from the TIR text, or why
    it cannot simulate the kernel. The barriers get the names the step file gives them (read as text)."""
    from grader.analysis import protocol

    spec = STEPS[request["track"]][request["step"]]
    step_file = build.step_file(Path(request["impl_dir"]), request["track"], spec)
    source = step_file.read_text(errors="replace") if step_file.is_file() else ""
    verdicts = []
    for shape in request["protocol_shapes"]:
        try:
            verdict = protocol_verdict(spec, source, kernels[tuple(shape)], tuple(shape))
        except protocol.Unsupported as err:
            return {"verdicts": [], "unsupported": f"it uses {err}"}
        except Exception as err:  # noqa: BLE001 - the checker's own failure must not fail the student's build
            return {"verdicts": [], "unsupported": f"it failed on this kernel ({type(err).__name__}: {err})"}
        verdicts.append({"ok": verdict.ok, "lines": verdict.lines()})
    return {"verdicts": verdicts, "unsupported": None}


def protocol_verdict(spec: StepSpec, source: str, prim_func, shape: Shape):
    """The protocol checker's verdict on a kernel parsed from its TIR, its barriers named as the step file's
    source (read as text, never run) names them."""
    from grader.analysis import locator, protocol

    labels = locator.source_labels_in(source, spec.function_name, prim_func.script())
    return protocol.check_kernel(protocol.compile_kernel(prim_func, labels), shape, spec.shapes.ragged)


def _start_derive_process(request: dict) -> None:
    import tvm_ffi
    from tvm.support import nvcc  # noqa: F401  registers TVM's compile callback, which is replaced below

    build.TOOLCHAIN = Toolchain(request["tools"])
    arch = request["arch"]
    os.environ["TVM_CUDA_COMPILE_MODE"] = "nvcc"
    # TVM compiles the device code with the judge's command, so the library embeds the very cubin
    # the static checks read
    tvm_ffi.register_global_func("tvm_callback_cuda_compile", lambda code, *_: build.compile_cubin(code, arch),
                                 override=True)


def _derive_shape(request: dict, shape: Shape, text: str) -> dict:
    return _derive_kernel(request, shape, build.parse_kernel_tir(text))


def _derive_kernel(request: dict, shape: Shape, prim_func) -> dict:
    from dataclasses import asdict

    artifacts, executable = build.build_prim_func(prim_func, request["arch"])
    cubin = build.compile_cubin(artifacts.cuda_source, request["arch"])
    if request["export_dir"]:
        executable.export_library(str(Path(request["export_dir"]) / _library_name(shape)))
    return {"shape": list(shape), "artifacts": asdict(artifacts), "cubin": base64.b64encode(cubin).decode()}


if __name__ == "__main__":
    import json

    _request = json.loads(Path(sys.argv[1]).read_text())
    _reply = _derive_child(_request) if _request.get("derive") else _student_child(_request)
    Path(sys.argv[2]).write_text(json.dumps(_reply))
