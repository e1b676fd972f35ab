"""Where a student's file runs, and what the grader checks after it ran.

A student's file is Python: whatever process imports it can rewrite any function, any file it may
write, and start processes of its own. So it is imported only in child processes (grader/runs/: the
build, the locator's debug run, the timeline's run; `run_child`) under a time limit, each confined by
the operating system (`Confinement`, one of three modes, the first that works here):
- "bwrap" (bubblewrap): a new mount, PID, network, IPC and user namespace. The child sees the system
  folders, the interpreter and its packages and the CUDA tools read-only, a fresh copy of the course
  (without solutions/ in instructor mode) read-only, and one writable scratch folder; nothing else of
  the machine's files (not the judge's course, not /tmp), no other process, no network. Everything it
  starts dies with it. The GPU child gets the device nodes of its own GPU only.
- "user": where namespaces are forbidden (some containers) and the grader runs as root, the child runs
  as the unprivileged user `nobody` over the same copy: it cannot write the copy, the course or the
  packages (root's), nor look into root's processes (/proc/<pid>/cwd); it can read what any user may
  read and use the network.
- "none": neither works (no bubblewrap, not root): the child runs as the grader's user; only the
  checks below stand between it and the course. One line says so.
Then, whatever the mode:
- every process it left behind is killed: the grader is a child subreaper (Linux prctl), so a process
  that detaches (double fork, setsid) is re-parented to the grader instead of init and found;
- the files the judging processes read are fingerprinted before and after (Watch): the grader, the
  reference solutions, kernel_helpers, the CUDA tools by content, the Python packages by status. A change
  fails the grade.
The CUDA tools are resolved to absolute paths once, before any student code runs.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import importlib.util
import json
import os
import pwd
import shutil
import signal
import site
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
COURSE_PARTS = ("grader", "kernel_helpers", "solutions", "Makefile", "pyproject.toml")
JUDGE_PACKAGES = ("tvm", "tvm_ffi", "torch", "numpy")  # imported by the judging processes, wherever installed
TOOLS = ("nvcc", "ptxas", "cuobjdump", "nvdisasm")
HOST_COMPILERS = ("g++", "gcc", "c++", "cc")
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
    """Fingerprints of what the judging processes read: the course's own files and the tools by content,
    every file of the Python packages' folders (site-packages: whatever a judging process may import) by
    its status (_status: inode, size, modification and change time, mode), and the folders' listings (a
    new .pth or sitecustomize.py runs in every Python started after it). A write that restores a file's
    size and modification time still moves its change time, which only the kernel sets: the status is
    enough to see a change, and the packages' 1.5 GB are not read in every grading process (5 s each).
    A course file or tool is hashed again only when its status moved (_digest)."""

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
                prints[str(file.relative_to(REPO_ROOT))] = _digest(str(file))
        for tool in self.toolchain.paths.values():
            prints[tool] = _digest(tool)
        for folder in _site_folders():
            prints[folder] = ",".join(sorted(os.listdir(folder)))
        for folder in _package_folders():
            for parent, _, files in os.walk(folder):
                for name in files:
                    path = os.path.join(parent, name)
                    prints[path] = str(_status(path))
        return prints


def _status(path: str) -> tuple[int, ...] | None:
    """What a write to `path` moves (None: no such file)."""
    try:
        status = os.lstat(path)
    except OSError:
        return None
    return (status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns, status.st_mode)


# path -> (its status when hashed, the digest): a process hashes each file once
_digests: dict[str, tuple[tuple[int, ...], str]] = {}


def _digest(path: str) -> str:
    key = _status(path)
    if key is None:
        return "missing"
    known = _digests.get(path)
    if known is None or known[0] != key:
        try:
            digest = os.readlink(path) if os.path.islink(path) else _sha256(Path(path))
        except OSError:
            digest = "unreadable"
        known = _digests[path] = (key, digest)
    return known[1]


def _site_folders() -> list[str]:
    folders = [*site.getsitepackages(), site.getusersitepackages()]
    return [folder for folder in dict.fromkeys(folders) if os.path.isdir(folder)]


def _package_folders() -> list[str]:
    """The site folders, and the judge's packages installed elsewhere (PYTHONPATH on a GPU machine)."""
    folders = _site_folders()
    for package in JUDGE_PACKAGES:
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.origin is not None:
            folder = str(Path(spec.origin).parent)
            if not any(Path(folder).is_relative_to(site_folder) for site_folder in folders):
                folders.append(folder)
    return folders


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def course_copy(impl_dir: Path, with_solutions: bool) -> Path:
    """A private copy of the course for one child: the grader, kernel_helpers, the tree being graded, and
    solutions/ unless the student must not reach them or the course was handed out without them; and an
    empty scratch/, the only folder the child may write. The copy is readable by every user and writable
    by its owner only (the "user" confinement runs the child as another user)."""
    root = Path(tempfile.mkdtemp(prefix="grader-build-"))
    ignore = shutil.ignore_patterns("__pycache__")
    parts = ["grader", "kernel_helpers"]
    if with_solutions and (REPO_ROOT / "solutions").is_dir():
        parts.append("solutions")
    for part in parts:
        shutil.copytree(REPO_ROOT / part, root / part, ignore=ignore, symlinks=True)
    if not (root / impl_dir.name).exists():
        shutil.copytree(impl_dir, root / impl_dir.name, ignore=ignore, symlinks=True)
    for folder, _, files in os.walk(root):
        os.chmod(folder, 0o755)
        for name in files:
            if not os.path.islink(os.path.join(folder, name)):
                os.chmod(os.path.join(folder, name), 0o644)
    (root / SCRATCH).mkdir()
    return root


SCRATCH = "scratch"  # the one folder of a course copy its child may write


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
                status = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            # a zombie too: a leader whose main thread exited shows Z while its other threads run on
            parents[int(entry)] = int(status[status.rfind(")") + 2 :].split()[1])
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


def run_limited(command: list[str], cwd: Path, env: dict[str, str], timeout_s: float, **popen) -> Finished:
    """Run a command in its own session; at its end or its time limit, kill it and all it started.
    Its output goes to a file, not a pipe: a process it detached would hold a pipe open, and reading
    to the pipe's end would wait for that process instead of the command. `popen`: the confinement's
    arguments (Confinement.popen_arguments)."""
    with tempfile.TemporaryFile("w+", errors="replace") as log:
        child = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                 stderr=subprocess.STDOUT, start_new_session=True, **popen)
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
    """A Python that ignores the user's site folder, where a student's process could leave a .pth file,
    and writes no bytecode (a .pyc it left would be run by the next Python that imports the module).

    PYTHON* variables are kept: they are the grader's own environment (a GPU machine may install
    tvm on PYTHONPATH), and student code cannot change the environment its parent starts children with.
    """
    return [sys.executable, "-s", "-B", "-m", module, *args]


# ---- confinement ----------------------------------------------------------------------------------

MODES = ("bwrap", "user", "none")
UNPRIVILEGED_USER = "nobody"
SYSTEM_FOLDERS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc")
GPU_CONTROL_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset")


@dataclass(frozen=True)
class Gpu:
    """The GPU a child may use: its UUID (CUDA_VISIBLE_DEVICES takes it) and its device node."""

    uuid: str  # "GPU-..."
    node: str | None  # /dev/nvidiaN; None: unknown, every GPU node is bound and the UUID picks one


@dataclass(frozen=True)
class Confinement:
    """How children that run student code are confined here (see the module's docstring)."""

    mode: str  # one of MODES
    reason: str = ""  # why not bwrap, one line; empty for bwrap

    def command(self, command: list[str], copy: Path, readable: list[Path] = (), writable: list[Path] = (),
                gpu: Gpu | None = None) -> list[str]:
        """`command` as it runs confined over a course copy: `readable` and `writable` are further folders
        it may read or write, `gpu` the GPU it may use (none: no GPU device at all in bwrap)."""
        if self.mode != "bwrap":
            return command
        return [*bwrap_arguments(copy, readable, writable, gpu), "--", *command]

    def environment(self, env: dict[str, str], copy: Path, gpu: Gpu | None = None) -> dict[str, str]:
        scratch = str(copy / SCRATCH)
        env = {**env, "HOME": scratch, "TMPDIR": scratch}
        if gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = gpu.uuid
        return env

    def popen_arguments(self) -> dict:
        if self.mode != "user":
            return {}
        account = pwd.getpwnam(UNPRIVILEGED_USER)
        return {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}

    def prepare(self, copy: Path, readable: list[Path] = (), writable: list[Path] = ()) -> None:
        """Give the child's user its scratch and writable folders, and the right to read the folders it reads."""
        if self.mode != "user":
            return
        account = pwd.getpwnam(UNPRIVILEGED_USER)
        for folder in [copy / SCRATCH, *writable]:
            os.chown(folder, account.pw_uid, account.pw_gid)
        for folder in [copy, *readable, *writable]:
            temporary = Path(tempfile.gettempdir())
            for ancestor in Path(folder).parents:  # the grader's private temporary folders above it: let the user pass
                if ancestor.is_relative_to(temporary) and ancestor != temporary:
                    os.chmod(ancestor, ancestor.stat().st_mode | stat.S_IXOTH)
        for folder in [copy, *readable]:
            for parent, _, files in os.walk(folder):
                os.chmod(parent, 0o755)
                for name in files:
                    os.chmod(os.path.join(parent, name), 0o644)


def bwrap_arguments(copy: Path, readable: list[Path] = (), writable: list[Path] = (), gpu: Gpu | None = None) -> list[str]:
    """bubblewrap's arguments: a user namespace in which the child is `nobody` without capabilities,
    its own PID, network, IPC and UTS namespaces, a new session, death with its parent; read-only
    system folders, interpreter, packages and tools; a private /tmp; the course copy read-only but its
    scratch folder."""
    arguments = ["bwrap", "--unshare-user", "--uid", "65534", "--gid", "65534", "--cap-drop", "ALL",
                 "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--die-with-parent",
                 "--new-session", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/dev/shm"]
    for folder in SYSTEM_FOLDERS:
        if os.path.islink(folder):
            arguments += ["--symlink", os.readlink(folder), folder]
        elif os.path.isdir(folder):
            arguments += ["--ro-bind", folder, folder]
    if os.path.isdir("/sys"):
        arguments += ["--ro-bind", "/sys", "/sys"]
    arguments += ["--tmpfs", "/tmp"]
    for folder in _runtime_folders():
        arguments += ["--ro-bind", folder, folder]
    arguments += ["--ro-bind", str(copy), str(copy), "--bind", str(copy / SCRATCH), str(copy / SCRATCH)]
    for folder in readable:  # a kernel's folder that is gone is the GPU child's error to report, not bwrap's
        arguments += ["--ro-bind-try", str(folder), str(folder)]
    for folder in writable:
        arguments += ["--bind", str(folder), str(folder)]
    if gpu is not None:
        nodes = [gpu.node] if gpu.node else sorted(str(p) for p in Path("/dev").glob("nvidia[0-9]*"))
        for node in [*GPU_CONTROL_NODES, *nodes]:
            if os.path.exists(node):
                arguments += ["--dev-bind", node, node]
    return arguments + ["--chdir", str(copy)]


def _runtime_folders() -> list[str]:
    """What a child needs beyond the system folders: the interpreter's prefixes, its packages, the
    PYTHONPATH entries, the CUDA tools' installation. Never a folder that holds the judge's course
    (the course's own .venv, inside it, is taken alone); folders inside another are dropped."""
    wanted = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
              str(Path(os.path.realpath(sys.executable)).parent.parent), *_package_folders()}
    wanted.update(entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry)
    wanted.update(str(Path(path).parent.parent) for path in Toolchain.resolve().paths.values())
    # the host C/C++ compiler that nvcc and TVM's export_library run (an H200 image had it under /opt/gcc)
    compilers = [os.environ.get(name, "") for name in ("CXX", "CC")] + [shutil.which(name) or "" for name in HOST_COMPILERS]
    wanted.update(str(Path(path).parent.parent) for path in compilers if os.path.isabs(path))
    course = REPO_ROOT.resolve()
    folders = sorted({os.path.realpath(folder) for folder in wanted if os.path.isdir(folder)})
    folders = [folder for folder in folders if not course.is_relative_to(folder)
               and not any(folder.startswith(system + "/") or folder == system for system in SYSTEM_FOLDERS)]
    return [folder for folder in folders
            if not any(folder != other and folder.startswith(other + "/") for other in folders)]


@functools.cache
def confinement() -> Confinement:
    """The strongest confinement that works here, found once per process. GRADER_SANDBOX=bwrap|user|none
    asks for one mode (tests, comparisons); a mode that cannot work here is refused as it would be found."""
    asked = os.environ.get("GRADER_SANDBOX", "auto")
    if asked not in ("auto", *MODES):
        raise SandboxUnavailable(f"GRADER_SANDBOX must be auto, {', '.join(MODES)}, not {asked!r}")
    bwrap_problem = _bwrap_problem() if asked in ("auto", "bwrap") else "GRADER_SANDBOX asks for another mode"
    if asked in ("auto", "bwrap") and bwrap_problem is None:
        return Confinement("bwrap")
    if asked == "bwrap":
        raise SandboxUnavailable(f"GRADER_SANDBOX=bwrap, but bubblewrap cannot start here: {bwrap_problem}")
    user_problem = _user_problem() if asked in ("auto", "user") else "GRADER_SANDBOX=none"
    if asked in ("auto", "user") and user_problem is None:
        return _announce(Confinement("user", f"bubblewrap cannot start here ({bwrap_problem}): student code runs "
                                             f"as user {UNPRIVILEGED_USER} over read-only files instead"))
    if asked == "user":
        raise SandboxUnavailable(f"GRADER_SANDBOX=user, but {user_problem}")
    return _announce(Confinement("none", f"no sandbox here (bubblewrap: {bwrap_problem}; {user_problem}): "
                                         "student code runs as this user, watched by file fingerprints only"))


class SandboxUnavailable(Exception):
    """The confinement asked for (GRADER_SANDBOX) cannot work here: one line."""


def _announce(confined: Confinement) -> Confinement:
    print(f"grader: {confined.reason}", file=sys.stderr, flush=True)
    return confined


def _bwrap_problem() -> str | None:
    """Why bubblewrap cannot confine a child here, or None: it is tried with the very arguments a child gets."""
    if shutil.which("bwrap") is None:
        return "bwrap is not installed (Debian/Ubuntu: apt-get install bubblewrap; `make setup` does it as root)"
    with tempfile.TemporaryDirectory(prefix="grader-probe-") as folder:
        (Path(folder) / SCRATCH).mkdir()
        return _probe_python([*bwrap_arguments(Path(folder)), "--"])


def _user_problem() -> str | None:
    if os.geteuid() != 0:
        return f"the grader does not run as root, so it cannot run children as {UNPRIVILEGED_USER}"
    try:
        pwd.getpwnam(UNPRIVILEGED_USER)
    except KeyError:
        return f"there is no user {UNPRIVILEGED_USER}"
    # the Python must be one that user can run (not one inside a folder only root may enter)
    problem = _probe_python([], cwd="/", **Confinement("user").popen_arguments())
    return problem and f"user {UNPRIVILEGED_USER} cannot run {sys.executable} ({problem})"


def _probe_python(prefix: list[str], **popen) -> str | None:
    """Why this Python does not start under `prefix` and `popen` as a child would, or None: its last error line."""
    try:
        done = subprocess.run([*prefix, sys.executable, "-s", "-B", "-c", "pass"], capture_output=True, text=True,
                              timeout=60, **popen)
    except (OSError, subprocess.TimeoutExpired) as err:
        return str(err)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return None if done.returncode == 0 else (lines[-1] if lines else f"exit status {done.returncode}")


def this_gpu() -> Gpu | None:
    """The GPU the judge uses (device 0 of what it sees), as a child is given it; None without one."""
    import torch

    if not torch.cuda.is_available():
        return None
    properties = torch.cuda.get_device_properties(0)
    uuid = str(properties.uuid)
    node = None
    try:  # the driver's record of the GPU at its PCI address names its device node's minor number
        bus = f"{properties.pci_domain_id:04x}:{properties.pci_bus_id:02x}:{properties.pci_device_id:02x}.0"
        information = Path(f"/proc/driver/nvidia/gpus/{bus}/information").read_text()
        minor = next(line.split(":")[1].strip() for line in information.splitlines() if line.startswith("Device Minor"))
        node = f"/dev/nvidia{int(minor)}"
    except (AttributeError, OSError, StopIteration, ValueError):
        pass
    return Gpu(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}", node)


@dataclass
class ChildRun:
    finished: Finished
    reply: dict | None  # what the child wrote as its result; None: nothing, or nothing readable
    unreadable: bool = False  # a result file that is not a JSON object


def run_child(module: str, request: dict, impl_dir: Path, *, with_solutions: bool, timeout_s: float,
              env: dict[str, str] | None = None, readable: list[Path] = (), writable: list[Path] = (),
              gpu: Gpu | None = None) -> ChildRun:
    """Run `python -m module REQUEST RESULT` confined over a fresh copy of the course, its working folder (so
    it imports the copy's grader), with request["impl_dir"] naming the copy of impl_dir and RESULT in its
    scratch folder; return what it wrote as its result. `readable` and `writable`: further folders it may
    read, or write (the judge's build exports its library); `gpu`: the GPU it may use. The copy is removed
    after. Comparing the course's files before and after is the caller's part: one Watch can span several
    children."""
    confined = confinement()
    become_subreaper()  # what the child detaches is re-parented here, where run_limited's sweep finds it
    copy = course_copy(impl_dir, with_solutions)
    request_path, result_path = copy / "request.json", copy / SCRATCH / "result.json"
    request_path.write_text(json.dumps({**request, "impl_dir": str(copy / impl_dir.name)}))
    request_path.chmod(0o644)
    try:
        confined.prepare(copy, list(readable), list(writable))
        finished = run_limited(
            confined.command(python_command(module, str(request_path), str(result_path)), copy, list(readable),
                             list(writable), gpu),
            cwd=copy, env=confined.environment(dict(os.environ) if env is None else env, copy, gpu),
            timeout_s=timeout_s, **confined.popen_arguments())
        return ChildRun(finished, *read_reply(result_path))
    finally:
        shutil.rmtree(copy, ignore_errors=True)


MAX_REPLY_BYTES = 256 * 2**20


def read_reply(path: Path) -> tuple[dict | None, bool]:
    """A child's result: (the JSON object, False), (None, False) when there is none, (None, True) when it is
    not a JSON object. A link or anything but a regular file is not read (the child could name any file)."""
    try:
        status = os.lstat(path)
    except OSError:
        return None, False
    if not stat.S_ISREG(status.st_mode) or status.st_size > MAX_REPLY_BYTES:
        return None, True
    try:
        reply = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None, True
    return (reply, False) if isinstance(reply, dict) else (None, True)


def check_unchanged(watch: Watch, what: str) -> None:
    """Raise Tampered if a file the judging processes read changed since the watch began."""
    changed = watch.changed()
    if changed:
        raise Tampered(f"{what} changed files the grader relies on ({', '.join(changed[:5])}"
                       f"{' ...' if len(changed) > 5 else ''}): the submission tried to change the grader")
