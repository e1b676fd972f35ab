"""The speed floors: the grader reads them from grader/speed_floors.json, `make calibrate` writes them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import REPO, gpu_arch
from grader.commands import calibrate
from grader.core.steps import SPEED_FLOORS, SPEED_FLOORS_FILE, SpeedFloorsError, STEPS, load_speed_floors

HAND_WRITTEN = {
    "sm_90a": {1: 0.3, 2: 0.03, 3: 0.12, 4: 0.3, 5: 0.4, 6: 0.44, 7: 0.43, 8: 0.46, 9: 0.42, 10: 0.48, 11: 0.25, 12: 0.45},
    "sm_100a": {1: 0.0005, 2: 0.0005, 3: 0.001, 4: 0.1, 5: 0.18, 6: 0.2, 7: 0.18, 8: 0.33, 9: 0.4, 10: 0.4, 11: 0.1, 12: 0.25},
}


def test_the_shipped_table_holds_the_hand_written_floors_and_marks_blackwell_as_estimates():
    assert SPEED_FLOORS == {**HAND_WRITTEN, "sm_103a": HAND_WRITTEN["sm_100a"]}
    archs = json.loads(SPEED_FLOORS_FILE.read_text())["archs"]
    assert {arch: entry["estimate"] for arch, entry in archs.items()} == {
        "sm_90a": False, "sm_100a": True, "sm_103a": True}


def test_a_calibrated_table_is_what_the_grader_reads(tmp_path):
    table = json.loads(SPEED_FLOORS_FILE.read_text())
    measured = {4: {"2048x2048x2048": 0.8, "4096x4096x4096": 0.7}}
    about = {"gpu": "TEST GPU", "driver": "1.0", "date": "2026-11-24",
             "command": "python -m grader.commands.calibrate --step 4"}
    table = calibrate.updated_table(table, "sm_100a", measured, 0.5, about)
    path = tmp_path / "floors.json"
    path.write_text(json.dumps(table))

    floors = load_speed_floors(path)
    assert floors["sm_100a"] == {**HAND_WRITTEN["sm_100a"], 4: 0.35}  # half the lower share
    assert floors["sm_90a"] == HAND_WRITTEN["sm_90a"]  # other archs untouched
    entry = table["archs"]["sm_100a"]
    assert entry["estimate"] is True  # steps 1-3, 5-10 are still the estimates
    assert entry["measured"] == {"4": measured[4]} and entry["margin"] == 0.5 and entry["gpu"] == "TEST GPU"

    every_step = {step: {"4096x4096x4096": 0.9} for step in STEPS["blackwell"]}
    entry = calibrate.updated_table(table, "sm_100a", every_step, 0.5, about)["archs"]["sm_100a"]
    assert entry["estimate"] is False and entry["source"] == "make calibrate"
    assert set(entry["floors"].values()) == {0.45}


@pytest.mark.parametrize("contents", ["{", '{"archs": {"sm_90a": {"floors": {"1": "fast"}}}}', '{"floors": {}}',
                                      '{"archs": {"sm_90a": {"floors": {"1": 0}}}}'])
def test_a_broken_table_is_named_with_what_to_do(tmp_path, contents):
    path = tmp_path / "floors.json"
    path.write_text(contents)
    with pytest.raises(SpeedFloorsError, match="floors.json"):
        load_speed_floors(path)


@pytest.mark.skipif(gpu_arch() is not None, reason="a GPU is here: make calibrate would run")
def test_without_a_gpu_calibrate_says_so_in_one_line_and_exits_2():
    done = subprocess.run(["make", "-s", "calibrate", f"PYTHON={sys.executable}"], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2
    assert done.stdout == ""
    message = "calibrate: needs a Hopper or Blackwell GPU (it times the reference solutions against cuBLAS)"
    assert done.stderr.splitlines()[0] == message  # then make's own "Error 2" line


@pytest.mark.gpu
def test_calibrate_one_step_at_one_shape(tmp_path):
    out = tmp_path / "floors.json"
    arch = gpu_arch()
    track = "hopper" if arch == "sm_90a" else "blackwell"
    assert calibrate.main(["--step", "4", "--shape", "2048x2048x2048", "--out", str(out)]) == 0
    table = json.loads(out.read_text())
    entry = table["archs"][arch]
    assert set(entry["floors"]) == {str(step) for step in STEPS[track]}
    (share,) = entry["measured"]["4"].values()
    assert list(entry["measured"]) == ["4"] and list(entry["measured"]["4"]) == ["2048x2048x2048"]
    assert 0 < share < 5 and entry["floors"]["4"] == round(0.5 * share, 4)
    assert entry["gpu"] and entry["driver"] and entry["date"] and "--step 4" in entry["command"]
    assert load_speed_floors(out)[arch][4] == entry["floors"]["4"]
