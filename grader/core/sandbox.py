"""Where a student's file runs, and what the grader checks after it ran.

A student's file is Python: whatever process imports it can rewrite any function, any file the user
may write, and start processes of its own. So it is imported only in child processes (grader/runs/:
the build, the locator's debug run, the timeline's run; `run_child`) that run in a fresh copy of the
course (without solutions/ in instructor mode), in their own session, under a time limit; what comes
back is data. Then:
- every process it left behind is killed: the grader is a child subreaper (Linux prctl), so a process
  that detaches (double fork, setsid) is re-parented to the grader instead of init and found;
- the files the judging processes read are hashed before and after: the grader, the reference
  solutions, kernel_helpers, the CUDA tools and the Python packages they import. A change fails the
  grade (the same user can write them; no sandbox without root can prevent it, this detects it).
The CUDA tools are resolved to absolute paths once, before any student code runs.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import os
import shutil
import signal
import site
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
COURSE_PARTS = ("grader", "kernel_helpers", "solutions", "Makefile", "pyproject.toml")
JUDGE_PACKAGES = ("tvm", "tvm_ffi", "torch", "numpy")  # what the judging processes import besides the grader
TOOLS = ("nvcc", "ptxas", "cuobjdump", "nvdisasm")
PR_SET_CHILD_SUBREAPER = 36


class Tampered(Exception):
    """A student's process changed a file the grader relies on."""


@dataclass(frozen=True)
class Toolchain:
    """Absolute paths of the CUDA tools, found before any student code ran."""

    paths: dict[str, str]

    @classmethod
    def resolve(cls) -> Toolchain:
        return cls({name: path for name in TOOLS if (path := _find_tool(name))})

    def path(self, name: str) -> str:
        if name not in self.paths:
            raise FileNotFoundError(f"{name} not found: install the CUDA toolkit (13.0 tested) or `make setup` for cuobjdump")
        return self.paths[name]

    def search_path(self) -> str:
        """PATH for a process that runs the tools: their folders only (cuobjdump runs nvdisasm from PATH)."""
        folders = dict.fromkeys(str(Path(p).parent) for p in self.paths.values())
        return os.pathsep.join([*folders, "/usr/bin", "/bin"])


def _find_tool(name: str) -> str | None:
    """PATH, then CUDA_HOME, then the NVIDIA pip wheels (cuobjdump, nvdisasm)."""
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    candidates = [shutil.which(name), str(Path(cuda_home) / "bin" / name)]
    spec = importlib.util.find_spec("nvidia")
    if spec is not None and spec.submodule_search_locations:
        candidates += [str(Path(root) / sub / "bin" / name) for root in spec.submodule_search_locations for sub in ("cu13", "")]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return str(Path(candidate).resolve())
    return None


class Watch:
    """Fingerprints of what the judging processes read: content for the course's own files and the
    tools, (size, mtime) for the Python packages (tens of thousands of files) and the site folders'
    listings (a new .pth or sitecustomize.py runs in every Python started after it)."""

    def __init__(self, toolchain: Toolchain):
        self.toolchain = toolchain
        self.before = self._fingerprints()

    def changed(self) -> list[str]:
        now = self._fingerprints()
        return sorted(path for path in self.before.keys() | now.keys() if self.before.get(path) != now.get(path))

    def _fingerprints(self) -> dict[str, str]:
        prints: dict[str, str] = {}
        for part in COURSE_PARTS:
            root = REPO_ROOT / part
            for file in [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file()):
                prints[str(file.relative_to(REPO_ROOT))] = _sha256(file)
        for tool in self.toolchain.paths.values():
            prints[tool] = _sha256(Path(tool))
        for package in JUDGE_PACKAGES:
            spec = importlib.util.find_spec(package)
            if spec is None or spec.origin is None:
                continue
            for folder, _, files in os.walk(Path(spec.origin).parent):
                for name in files:
                    stat = os.stat(os.path.join(folder, name))
                    prints[os.path.join(folder, name)] = f"{stat.st_size}:{stat.st_mtime_ns}"
        for folder in _site_folders():
            prints[folder] = ",".join(sorted(os.listdir(folder)))
        return prints


def _site_folders() -> list[str]:
    folders = [*site.getsitepackages(), site.getusersitepackages()]
    return [folder for folder in dict.fromkeys(folders) if os.path.isdir(folder)]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def course_copy(impl_dir: Path, with_solutions: bool) -> Path:
    """A private copy of the course for one build process: the grader, kernel_helpers, the tree being
    graded, and solutions/ unless the student must not reach them or the course was handed out without
    them."""
    root = Path(tempfile.mkdtemp(prefix="grader-build-"))
    ignore = shutil.ignore_patterns("__pycache__")
    parts = ["grader", "kernel_helpers"]
    if with_solutions and (REPO_ROOT / "solutions").is_dir():
        parts.append("solutions")
    for part in parts:
        shutil.copytree(REPO_ROOT / part, root / part, ignore=ignore)
    if not (root / impl_dir.name).exists():
        shutil.copytree(impl_dir, root / impl_dir.name, ignore=ignore)
    return root


def become_subreaper() -> None:
    """Orphans of our children are re-parented to this process, so sweep() can find them."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def sweep() -> int:
    """Kill every process descended from this one (our children are all finished when this runs);
    return how many were found."""
    found = 0
    for _ in range(50):
        survivors = _descendants(os.getpid())
        if not survivors:
            break
        found += len(survivors)
        for pid in survivors:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.02)
        _reap()
    _reap()
    return found


def _descendants(root: int) -> list[int]:
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2 :].split()
            if fields[0] != "Z":
                parents[int(entry)] = int(fields[1])
    found, frontier = [], [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent]
        found += children
        frontier += children
    return found


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


@dataclass
class Finished:
    returncode: int | None  # None: killed at the time limit
    output: str


def run_limited(command: list[str], cwd: Path, env: dict[str, str], timeout_s: float) -> Finished:
    """Run a command in its own session; at its end or its time limit, kill it and all it started.
    Its output goes to a file, not a pipe: a process it detached would hold a pipe open, and reading
    to the pipe's end would wait for that process instead of the command."""
    with tempfile.TemporaryFile("w+", errors="replace") as log:
        child = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                 stderr=subprocess.STDOUT, start_new_session=True)
        try:
            returncode: int | None = child.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            returncode = None
            _kill_group(child.pid)
            child.wait()
        _kill_group(child.pid)
        sweep()
        log.seek(0)
        return Finished(returncode, log.read())


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def python_command(module: str, *args: str) -> list[str]:
    """A Python that ignores the user's site folder, where a student's process could leave a .pth file.

    PYTHON* variables are kept: they are the grader's own environment (a GPU machine may install
    tvm on PYTHONPATH), and student code cannot change the environment its parent starts children with.
    """
    return [sys.executable, "-s", "-m", module, *args]


@dataclass
class ChildRun:
    finished: Finished
    reply: dict | None  # what the child wrote as its result; None: nothing, or nothing readable
    unreadable: bool = False  # a result file that is not JSON


def run_child(module: str, request: dict, impl_dir: Path, *, with_solutions: bool, timeout_s: float,
              env: dict[str, str] | None = None) -> ChildRun:
    """Run `python -m module REQUEST RESULT` in a fresh copy of the course, its working folder (so it imports
    the copy's grader), with request["impl_dir"] naming the copy of impl_dir; return what it wrote as its
    result. The copy is removed after. Comparing the course's files before and after is the caller's part:
    one Watch can span several children (a grade's builds and GPU run)."""
    import json

    become_subreaper()  # what the child detaches is re-parented here, where run_limited's sweep finds it
    copy = course_copy(impl_dir, with_solutions)
    request_path, result_path = copy / "request.json", copy / "result.json"
    request_path.write_text(json.dumps({**request, "impl_dir": str(copy / impl_dir.name)}))
    try:
        finished = run_limited(python_command(module, str(request_path), str(result_path)), cwd=copy,
                               env=dict(os.environ) if env is None else env, timeout_s=timeout_s)
        try:
            return ChildRun(finished, json.loads(result_path.read_text()) if result_path.is_file() else None)
        except ValueError:
            return ChildRun(finished, None, unreadable=True)
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def check_unchanged(watch: Watch, what: str) -> None:
    """Raise Tampered if a file the judging processes read changed since the watch began."""
    changed = watch.changed()
    if changed:
        raise Tampered(f"{what} changed files the grader relies on ({', '.join(changed[:5])}"
                       f"{' ...' if len(changed) > 5 else ''}): the submission tried to change the grader")
