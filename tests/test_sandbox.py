"""Known-bad submissions of each class the red team of issue 35 found, on the CPU: each fails for its named
reason, or its attack comes to nothing. Step 1 (and step 4 where a barrier protocol is needed) carry them."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO
from grader.core import build, sandbox
from grader.core.steps import DEFAULT_SM_COUNT, STEPS, static_check_shape
from grader.judge import cli, report
from grader.judge.grade import PROTOCOL_HEADER, grade_step
from grader.runs import build_child
from grader.runs import gpu_child as gpu
from known_bad import VARIANTS
from test_integrity import TRACK, _config, _grade, _solution, _tree
from test_known_bad_cpu import _static_shape_only

MODE = sandbox.confinement().mode


def _deadlocking_step4() -> str:
    """Hopper step 4 whose TMA barrier counts every thread: the protocol checker finds the hang."""
    (variant,) = [v for v in VARIANTS if v.name == "hopper-4-tma-bar-counts-every-thread"]
    source, count = re.subn(variant.pattern, variant.replacement, _solution(4))
    assert count >= 1
    return source


def _grade_step4(tree: Path):
    return grade_step(_config(tree), _static_shape_only(TRACK, 4))


def _fails_the_protocol(result) -> bool:
    return result.correctness == "failed" and any(p.startswith(PROTOCOL_HEADER) for p in result.problems)


# ---- forged child results -------------------------------------------------------------------------

FORGE_AT_EXIT = """
import atexit, json, sys
def _forge():
    json.dump({forged}, open(sys.argv[2], "w"))
atexit.register(_forge)
"""


@pytest.mark.parametrize("forged", [
    '{"kernels": json.load(open(sys.argv[2]))["kernels"], "protocol": {"verdicts": [{"ok": True, "lines": []}]}, '
    '"shapes": [{"artifacts": {}, "cubin": ""}]}',
    '{"error": "", "kernels": [], "shapes": []}',
], ids=["verdicts-added", "emptied"])
def test_a_result_rewritten_at_exit_cannot_pass_a_deadlocking_step(tmp_path, forged):
    plain = _grade_step4(_tree(tmp_path / "plain", 4, _deadlocking_step4()))
    assert _fails_the_protocol(plain), plain.problems  # the kernel itself fails
    result = _grade_step4(_tree(tmp_path / "forged", 4, _deadlocking_step4() + FORGE_AT_EXIT.format(forged=forged)))
    assert not result.passed
    assert _fails_the_protocol(result) or "ended early" in result.problems[0], result.problems


def test_a_factory_that_tells_the_checker_from_the_build_is_judged_on_one_kernel(tmp_path):
    # the good kernel for any caller in the protocol checker, the deadlocking one for the build
    (tmp_path / "steps" / TRACK).mkdir(parents=True)
    (tmp_path / "steps" / TRACK / "_good.py").write_text(_solution(4))
    (tmp_path / "steps" / TRACK / "_bad.py").write_text(_deadlocking_step4())
    switch = """
import importlib.util, inspect, pathlib
def _load(name):
    spec = importlib.util.spec_from_file_location(name, pathlib.Path(__file__).with_name(name + ".py"))
    module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module); return module
def hgemm_v4(M, N, K):
    checker = any("protocol" in frame.filename for frame in inspect.stack())
    return _load("_good" if checker else "_bad").hgemm_v4(M, N, K)
"""
    result = _grade_step4(_tree(tmp_path, 4, switch))
    assert _fails_the_protocol(result), result.problems


@pytest.mark.parametrize("tir,reason", [
    ("not python (", "is not TVMScript"),
    ("@T.prim_func\ndef k():\n    T.evaluate(__import__('os').system('true'))\n", "names '__import__'"),
    ("@T.prim_func\ndef k():\n    T.evaluate(open('/etc/hostname').read())\n", "names 'open'"),
    ("@T.prim_func\ndef k():\n    T.evaluate(T.int32.__class__)\n", "private attribute '__class__'"),
    ("@T.prim_func\ndef k():\n    T.evaluate((lambda: 0)())\n", "never prints (Lambda"),
    ("import os\n@T.prim_func\ndef k():\n    T.evaluate(0)\n", "one @T.prim_func function and nothing else"),
    ("@T.prim_func\ndef k():\n    T.evaluate(T.no_such_thing(0))\n", "which TVMScript does not have"),
    ('@T.prim_func\ndef k():\n    T.evaluate(T.call_extern("int32", "system", "true"))\n', "by its name (call_extern)"),
    ('@T.prim_func\ndef k():\n    T.evaluate(T.call_packed("ffi.anything", 1))\n', "by its name (call_packed)"),
])
def test_a_tir_text_that_is_not_printed_tvmscript_is_a_failed_build_with_one_line(tir, reason):
    assert build.parse_kernel_tir("@T.prim_func\ndef k():\n    T.evaluate(0)\n") is not None  # what it may be
    with pytest.raises(build.BuildFailed, match=re.escape(reason)) as raised:
        build.parse_kernel_tir(tir)
    assert len(str(raised.value).splitlines()) == 1


@pytest.mark.parametrize("track,step", [("hopper", 1), ("hopper", 6), ("blackwell", 1)])
def test_the_kernel_tir_round_trips_to_the_same_cubin(track, step):
    # the judge builds from the printed text: the same cubin as the step's own PrimFunc
    arch = {"hopper": "sm_90a", "blackwell": "sm_100a"}[track]
    spec = STEPS[track][step]
    factory = build.kernel_factory(REPO / "solutions", track, spec)
    prim_func = build.make_prim_func(factory, spec, static_check_shape(spec.correctness_shapes), DEFAULT_SM_COUNT[arch])
    parsed = build.parse_kernel_tir(prim_func.script())
    cubins = [build.compile_cubin(build.compile_module(f, arch).mod.imports[0].inspect_source(), arch)
              for f in (prim_func, parsed)]
    assert cubins[0] == cubins[1]


def test_a_malformed_gpu_child_result_is_an_error_not_a_traceback(tmp_path):
    path = tmp_path / "result.json"
    for text in ["[1, 2]", "{", '{"correctness": [{"shape": "x"}]}', '{"timing": [{"shape": [1, 2, 3], "ms": {"kernel": -1.0}}]}',
                 '{"device": 5}']:
        path.write_text(text)
        assert gpu._read_result(path).error, text
    path.write_text(json.dumps({"device": "H100", "correctness": [{"shape": [128, 128, 64], "seed": 1, "passed": True,
                                                                   "message": "ok", "max_error": 0.0}]}))
    assert gpu._read_result(path).error == ""


# ---- what a step file's process can reach ----------------------------------------------------------

PROBE = """
import json, os, socket
reached = {{}}
def attempt(name, action):
    try:
        action()
        reached[name] = "done"
    except Exception as err:
        reached[name] = type(err).__name__
attempt("write the grader", lambda: open({repo!r} + "/grader/analysis/features.py", "a").close())
attempt("plant a later step", lambda: open({repo!r} + "/steps/hopper/step09_planted.py", "w").close())
attempt("write a solution", lambda: open({repo!r} + "/solutions/hopper/" + {solution!r}, "a").close())
attempt("write an installed package", lambda: open({package!r}, "a").close())
def course_files():  # the course's own .venv is the interpreter, bound alone where the course has it
    if not [name for name in os.listdir({repo!r}) if name != ".venv"]:
        raise FileNotFoundError("only the interpreter's .venv")
attempt("list the course", course_files)
attempt("link into the report folder", lambda: os.symlink({repo!r} + "/autograder/weights", {report!r}))
attempt("see the judge", lambda: os.stat("/proc/{judge}/cwd"))
attempt("reach the network", lambda: socket.create_connection(("127.0.0.1", {port}), timeout=2).close())
attempt("write the scratch folder", lambda: open(os.environ["TMPDIR"] + "/x", "w").close())
others = [os.readlink(f"/proc/{{p}}/cwd") for p in os.listdir("/proc") if p.isdigit() and os.access(f"/proc/{{p}}/cwd", os.R_OK)]
reached["solutions through other processes"] = [c for c in others if os.path.isdir(c + "/solutions")]
raise RuntimeError("PROBE" + json.dumps(reached))
"""


def _probe(tmp_path: Path, instructor: bool) -> dict:
    import numpy

    listener = socket.create_server(("127.0.0.1", 0))
    source = PROBE.format(repo=str(REPO), solution=STEPS[TRACK][1].file_name, package=numpy.__file__,
                          report=str(tmp_path / "r.json"), judge=os.getpid(), port=listener.getsockname()[1])
    try:
        result = _grade(_tree(tmp_path, 1, source), 1, instructor=instructor)
    finally:
        listener.close()
    found = re.search(r"PROBE(\{.*\})", result.problems[0])
    assert found, result.problems
    return json.loads(found.group(1))


@pytest.mark.skipif(MODE != "bwrap", reason=f"bubblewrap cannot start here ({sandbox.confinement().reason})")
def test_a_step_file_reaches_nothing_but_its_scratch_folder(tmp_path):
    reached = _probe(tmp_path, instructor=True)
    assert reached.pop("write the scratch folder") == "done"
    assert reached.pop("solutions through other processes") == []
    assert all(outcome != "done" for outcome in reached.values()), reached
    assert not (REPO / "steps" / "hopper" / "step09_planted.py").exists()
    assert not (tmp_path / "r.json").is_symlink()


def test_a_report_path_that_links_into_the_course_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cli, "detect_gpu", lambda: (None, None, 0))
    (tmp_path / "r.json").symlink_to(REPO / "autograder" / "weights")
    assert cli.main(["--step", "1", "--track", TRACK, "--json", str(tmp_path / "r.json")]) == 2
    assert "inside the course's own files" in capsys.readouterr().err


def test_the_report_is_never_written_through_a_link_planted_beside_it(tmp_path):
    target = tmp_path / "weights"
    target.write_text("5 5 10 10 10 10 15 5 15 15\n")
    (tmp_path / ".r.json.part").symlink_to(target)  # the temporary file's name before issue 35
    config = _config(tmp_path)
    report.write_json(config, [], tmp_path / "r.json")
    assert target.read_text() == "5 5 10 10 10 10 15 5 15 15\n"
    assert json.loads((tmp_path / "r.json").read_text())["steps"] == []


# ---- the judge's own files -------------------------------------------------------------------------


def test_a_package_file_changed_with_its_size_and_time_kept_is_found(tmp_path, monkeypatch):
    folder = tmp_path / "site-packages" / "tvm"
    folder.mkdir(parents=True)
    module = folder / "__init__.py"
    module.write_text("VERSION = 1\n")
    monkeypatch.setattr(sandbox, "_site_folders", lambda: [str(tmp_path / "site-packages")])
    monkeypatch.setattr(sandbox, "JUDGE_PACKAGES", ())
    watch = sandbox.Watch(sandbox.Toolchain({}))
    assert watch.changed() == []
    before = module.stat()
    module.write_text("VERSION = 2\n")  # same size
    os.utime(module, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert watch.changed() == [str(module)]


# ---- processes that outlive the grade ------------------------------------------------------------

MAIN_THREAD_EXITS = """
import ctypes, sys, threading, time
def late():
    time.sleep(1.5)
    open(sys.argv[1], "w").write("written after the grade")
threading.Thread(target=late).start()
ctypes.CDLL(None).pthread_exit(None)  # the leader shows Z in /proc; the process goes on in its thread
"""


def test_a_process_whose_main_thread_exited_is_killed_by_the_sweep(tmp_path):
    late = tmp_path / "late.txt"
    process = subprocess.Popen([sys.executable, "-c", MAIN_THREAD_EXITS, str(late)])
    time.sleep(0.5)
    assert Path(f"/proc/{process.pid}/stat").read_text().split(") ")[1][0] == "Z"  # looks finished
    assert sandbox.sweep() >= 1
    time.sleep(1.5)
    assert not late.exists()


# ---- the GPU child -------------------------------------------------------------------------------


def test_the_student_process_cannot_plant_the_library_the_gpu_child_loads(tmp_path):
    out_dir = tmp_path / "kernels"
    target = tmp_path / "planted.so"
    attack = f"""
import os
os.makedirs({str(out_dir)!r}, exist_ok=True)
os.symlink({str(target)!r}, {str(out_dir / "kernel_128x128x64.so")!r})
"""
    source = _solution(1) + "\ntry:\n" + "".join(f"    {line}\n" for line in attack.strip().splitlines()) + \
        "except OSError:\n    pass\n"
    builds = build_child.build_isolated(_tree(tmp_path, 1, source), TRACK, STEPS[TRACK][1], [(128, 128, 64)], "sm_90a",
                                        132, with_solutions=True, export=True, out_dir=out_dir)
    (built,) = builds.kernels
    library = Path(built.library)
    assert not target.exists()
    assert library.is_file() and not library.is_symlink()  # the judge's build process wrote it, in place


GPU_PROBE = ("import glob, json, torch; print(json.dumps({'count': torch.cuda.device_count(), "
             "'uuid': str(torch.cuda.get_device_properties(0).uuid), 'nodes': sorted(glob.glob('/dev/nvidia[0-9]*'))}))")


@pytest.mark.gpu
@pytest.mark.skipif(MODE != "bwrap", reason=f"bubblewrap cannot start here ({sandbox.confinement().reason})")
def test_the_gpu_child_sees_only_its_own_gpu(tmp_path):
    """Confined as the GPU child is, a process sees one CUDA device, the judge's, and one GPU device node: on a
    node of several GPUs the others are neither listed nor reachable (a class grade pins one student per GPU)."""
    (tmp_path / sandbox.SCRATCH).mkdir()
    gpu = sandbox.this_gpu()
    confined = sandbox.confinement()
    probe = subprocess.run(confined.command([sys.executable, "-c", GPU_PROBE], tmp_path, gpu=gpu),
                           env=confined.environment(dict(os.environ), tmp_path, gpu), capture_output=True, text=True,
                           timeout=120)
    assert probe.returncode == 0, probe.stderr
    seen = json.loads(probe.stdout)
    assert seen["count"] == 1
    assert gpu.uuid.endswith(seen["uuid"].removeprefix("GPU-"))
    print(f"judge's GPU {gpu}; the confined child sees {seen}")
    if gpu.node is not None:  # without the driver's record every GPU node is bound and the UUID alone picks one
        assert seen["nodes"] == [gpu.node]


# ---- bad input: one line, exit status 2 ----------------------------------------------------------


@pytest.mark.parametrize("module,args", [
    ("grader.commands.hint", ["--step", "¹"]),
    ("grader.commands.hint", ["--step", "1", "--level", "two"]),
    ("grader.commands.check", ["--step", "4", "--sm-count", "many"]),
    ("grader.commands.debug", ["--step", "4", "--seed", "word"]),
    ("grader.commands.run_kernel", ["--step", "1", "--seed", "word"]),
    ("grader.commands.inspect_step", ["--step", "1", "--no-such-option"]),
    ("grader.commands.inspect_step", ["--step", "11", "--track", "hopper", "--shape", "7x264x70"]),  # K % 8 != 0
    ("grader.commands.inspect_step", ["--step", "11", "--track", "hopper", "--shape", "7by264"]),
    ("grader.commands.calibrate", ["--margin", "half"]),
    ("grader.commands.timeline", ["--step", "8", "--seed", "word"]),
    ("grader", ["--timeout", "long"]),
])
def test_a_word_for_a_number_is_one_line_and_exit_2(module, args):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr


def test_an_unknown_sandbox_mode_is_one_line_and_exit_2():
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "GRADER_SANDBOX": "off"}
    done = subprocess.run([sys.executable, "-m", "grader", "--step", "1", "--track", TRACK], cwd=REPO,
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2
    assert "GRADER_SANDBOX must be auto, bwrap, user, none, not 'off'" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can run a child as another user")
def test_a_python_the_unprivileged_user_cannot_run_is_one_line_and_exit_2(tmp_path):
    """GRADER_SANDBOX=user with a Python inside a folder only root may enter (a virtual environment linked from
    elsewhere): the probe says so in one line, where the first child's start raised a traceback."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    (private / "env").symlink_to(sys.prefix)
    python = private / "env" / "bin" / Path(sys.executable).name
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "GRADER_SANDBOX": "user"}
    done = subprocess.run([str(python), "-m", "grader", "--step", "1", "--track", TRACK], cwd=REPO,
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2, done.stderr
    assert f"GRADER_SANDBOX=user, but user {sandbox.UNPRIVILEGED_USER} cannot run {python}" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
