"""The build process: the only process of a grade that imports the student's file.

`build_isolated` (the judge's side) starts `python -m grader.runs.build_child` in a fresh copy of the course
(core/sandbox.run_child) and trusts nothing it returns: PTX and SASS are made again from its CUDA source
with the pinned tools. The child (`_child`) imports the step file, builds each shape (core/build.py), runs
the protocol checker when asked (analysis/protocol.py) and writes what it found as JSON.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from grader.core import build, sandbox
from grader.core.build import Artifacts, BuildFailed, StepNotImplemented, Toolchain
from grader.core.steps import STEPS, Shape, StepSpec

BUILD_TIMEOUT_S = 120.0


@dataclass
class Built:
    """One shape's build as the judge knows it: the static facts, and the cubin it compiled itself
    from the build's CUDA source (the bytes the static checks read and the GPU must run)."""

    shape: Shape
    artifacts: Artifacts
    cubin: bytes
    library: str | None  # the exported TVM library (host launcher + device code), for the GPU


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
    """Build `shapes` in a build process over a copy of the course, and run the protocol checker there
    at `protocol_shapes`; raise StepNotImplemented or BuildFailed as an in-process build would. Nothing
    the process returns is trusted: PTX and SASS are made again here from its CUDA source, with the
    pinned tools. The caller compares the course's files before and after (sandbox.Watch)."""
    tools = build.TOOLCHAIN.paths if build.TOOLCHAIN else Toolchain.resolve().paths
    request = {
        "track": track, "step": spec.number, "arch": arch, "sm_count": sm_count, "shapes": shapes,
        "export_dir": str(out_dir) if export else None, "tools": tools, "protocol_shapes": list(protocol_shapes),
    }
    run = sandbox.run_child("grader.runs.build_child", request, impl_dir, with_solutions=with_solutions,
                            timeout_s=timeout_s, env={**os.environ, "PATH": Toolchain(tools).search_path()})
    finished = run.finished
    reply = run.reply or ({"error": "failed", "message": "the build process wrote an unreadable result"}
                          if run.unreadable else {})
    if finished.returncode is None:
        raise BuildFailed(f"building step {spec.number} did not finish in {timeout_s:.0f} s "
                          "(an endless loop at import or in the kernel function?)")
    if reply.get("error") == "not implemented":
        raise StepNotImplemented(reply["message"])
    if reply.get("error"):
        raise BuildFailed(reply["message"])
    if finished.returncode != 0 or len(reply.get("shapes", [])) != len(shapes):
        last = [line for line in finished.output.splitlines() if line.strip()][-1:] or ["no output"]
        raise BuildFailed(f"the build process ended early (exit status {finished.returncode}): {last[0].strip()[:300]} "
                          "(a file that exits or raises at import, e.g. sys.exit or KeyboardInterrupt?)")
    with ThreadPoolExecutor(max_workers=_workers(len(shapes))) as pool:  # nvcc runs, one per shape
        kernels = list(pool.map(lambda entry: _confirm(entry, arch), reply["shapes"]))
    checked = reply.get("protocol") or {}
    verdicts = [ProtocolVerdict(bool(v["ok"]), [str(line) for line in v["lines"]]) for v in checked.get("verdicts", [])]
    unsupported = checked.get("unsupported")
    return Builds(kernels, verdicts, str(unsupported) if unsupported else None)


def _workers(jobs: int) -> int:
    return max(1, min(jobs, os.cpu_count() or 1))


def _confirm(entry: dict, arch: str) -> Built:
    artifacts = build.artifacts_from_json(entry["artifacts"])
    cubin, artifacts.ptx = build.compile_cuda(artifacts.cuda_source, arch)
    if build.disassemble(cubin) != artifacts.sass:
        raise BuildFailed("the build process reported SASS that its own CUDA source does not compile to: "
                          "the submission tried to change the grader")
    return Built(tuple(entry["shape"]), artifacts, cubin, entry.get("library"))


# ---- the child ------------------------------------------------------------------------------------


def _child(request: dict, result_path: Path) -> None:
    import json
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool
    from multiprocessing import get_context

    reply: dict = {"shapes": []}
    shapes = [tuple(shape) for shape in request["shapes"]]
    try:
        _start_build_process(request)  # the student's file is imported here first: its errors come out once
        if len(shapes) <= 1 or _workers(len(shapes)) == 1:
            entries = [_build_shape(request, shape) for shape in shapes]
        else:  # shapes build in parallel, each in a fresh process (TVM does not survive a fork)
            with ProcessPoolExecutor(_workers(len(shapes)), get_context("spawn"), _start_build_process,
                                     (request,)) as pool:
                entries = list(pool.map(_build_shape, [request] * len(shapes), shapes))
        for entry in entries:
            if "error" in entry:
                reply.update(entry)
                break
            reply["shapes"].append(entry)
        if "error" not in reply and request.get("protocol_shapes"):
            reply["protocol"] = _protocol_check(request)
    except StepNotImplemented as err:
        reply.update(error="not implemented", message=str(err))
    except BuildFailed as err:
        reply.update(error="failed", message=str(err))
    except BrokenProcessPool:
        reply.update(error="failed", message="a build process for one shape ended early "
                     "(a file that exits or crashes when imported a second time?)")
    result_path.write_text(json.dumps(reply))


def _protocol_check(request: dict) -> dict:
    """The protocol checker's verdict at each asked shape, or why it cannot simulate the kernel. It runs
    here because it needs the kernel's TIR; what it says can only fail a grade on a machine without a
    GPU (where the kernel cannot be run to show it), so a forged answer gains nothing the GPU would not take."""
    from grader.analysis import protocol

    spec = STEPS[request["track"]][request["step"]]
    verdicts = []
    for shape in request["protocol_shapes"]:
        try:
            verdict = protocol.check_step(_factory, spec, tuple(shape), request["sm_count"])
        except protocol.Unsupported as err:
            return {"verdicts": [], "unsupported": f"it uses {err}"}
        except Exception as err:  # noqa: BLE001 - the checker's own failure must not fail the student's build
            return {"verdicts": [], "unsupported": f"it failed on this kernel ({type(err).__name__}: {err})"}
        verdicts.append({"ok": verdict.ok, "lines": verdict.lines()})
    return {"verdicts": verdicts, "unsupported": None}


_factory: Callable[..., Any] | None = None  # the student's hgemm_vN, imported once per build process


def _start_build_process(request: dict) -> None:
    import tvm_ffi
    from tvm.support import nvcc  # noqa: F401  registers TVM's compile callback, which is replaced below

    global _factory
    build.TOOLCHAIN = Toolchain(request["tools"])
    arch = request["arch"]
    os.environ["TVM_CUDA_COMPILE_MODE"] = "nvcc"
    # On a GPU machine TVM compiles the device code here: with the judge's command, so an honest
    # build embeds the very cubin the judge compiles from the same source.
    tvm_ffi.register_global_func("tvm_callback_cuda_compile", lambda code, *_: build.compile_cubin(code, arch),
                                 override=True)
    spec = STEPS[request["track"]][request["step"]]
    _factory = build.kernel_factory(Path(request["impl_dir"]), request["track"], spec)


def _build_shape(request: dict, shape: Shape) -> dict:
    """One shape's artifacts and exported library, or the error that stopped it."""
    from dataclasses import asdict

    spec = STEPS[request["track"]][request["step"]]
    try:
        artifacts, executable = build.build_with_executable(_factory, spec, shape, request["arch"],
                                                            request["sm_count"])
    except StepNotImplemented as err:
        return {"error": "not implemented", "message": str(err)}
    except BuildFailed as err:
        return {"error": "failed", "message": str(err)}
    library = None
    if request["export_dir"]:
        library = str(Path(request["export_dir"]) / f"step{spec.number}_{'x'.join(map(str, shape))}.so")
        executable.export_library(library)
    return {"shape": shape, "artifacts": asdict(artifacts), "library": library}


if __name__ == "__main__":
    import json

    _child(json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2]))
