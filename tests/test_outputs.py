"""Every file a command writes is checked before any work: a folder, a special file, a path under a file or
a folder that takes no new file is one line and exit status 2, never a traceback after the build."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO
from grader.commands import autograder, bench, calibrate
from grader.commands import timeline as timeline_command
from grader.judge import cli


def _bad_paths(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "a-file").write_text("")
    (tmp_path / "a-folder.json").mkdir()
    return {
        "proc": Path("/proc/version"),  # a regular file to stat, which no one can write
        "new-in-proc": Path("/proc/report.json"),
        "device": Path("/dev/null"),
        "folder": tmp_path / "a-folder.json",
        "under-a-file": tmp_path / "a-file" / "report.json",
    }


COMMANDS = {
    "grade --json": lambda path: cli.main(["--step", "3", "--impl", "solutions", "--track", "hopper",
                                           "--json", str(path)]),
    "bench --out": lambda path: bench.main(["--out", str(path.with_suffix(""))]),  # a prefix: .json, .md, .png
    "calibrate --out": lambda path: calibrate.main(["--out", str(path)]),
    "autograder package --out": lambda path: autograder.main(["package", "--out", str(path)]),
    "timeline --out": lambda path: timeline_command.main(["--step", "8", "--out", str(path)]),
    "timeline --png": lambda path: timeline_command.main(["--step", "8", "--png", str(path)]),
}


CASES = ["proc", "new-in-proc", "device", "folder", "under-a-file"]


# bench's --out is a prefix of three new files: /dev/null.json is an ordinary new file, not a device
@pytest.mark.parametrize("command,case", [(command, case) for command in COMMANDS for case in CASES
                                          if (command, case) != ("bench --out", "device")])
def test_an_output_that_cannot_be_written_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys, command, case):
    monkeypatch.setattr(cli, "detect_gpu", lambda: (None, None, 0))
    path = _bad_paths(tmp_path)[case]
    assert COMMANDS[command](path) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1, err
    assert str(path.with_suffix("") if command == "bench --out" else path) in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a folder without write permission")
def test_a_folder_without_write_permission_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli, "detect_gpu", lambda: (None, None, 0))
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    assert cli.main(["--step", "3", "--track", "hopper", "--json", str(folder / "r.json")]) == 2
    assert "takes no new file" in capsys.readouterr().err


def test_a_special_report_path_is_refused_before_any_build():
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "grader", "--step", "3", "--impl", "solutions", "--track", "hopper",
                           "--json", "/proc/version"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stdout == "" and done.stderr.strip().splitlines() == [
        "grader: --json /proc/version cannot be written (Invalid argument)"]
    assert time.monotonic() - started < 60  # torch's import and the GPU lookup; no build
