"""A kernel that does not build is reported in TIRx's or ptxas's own words, never as a traceback."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import REPO
from grader.core import build
from grader.judge.grade import Config, grade_step
from grader.core.steps import STEPS


def _tree_with(tmp_path: Path, source: str) -> Path:
    folder = tmp_path / "hopper"
    folder.mkdir()
    (folder / STEPS["hopper"][1].file_name).write_text(source)
    return tmp_path


def _grade(tree: Path):
    config = Config("steps", tree, REPO / "solutions", "hopper", "sm_90a", None, 132, 0, 60.0, None)
    return grade_step(config, STEPS["hopper"][1])


def _solution() -> str:
    return (REPO / "solutions" / "hopper" / STEPS["hopper"][1].file_name).read_text()


def test_a_tirx_error_names_the_line_and_the_op(tmp_path):
    source = _solution()
    assert "T.ptx.wgmma.fence.sync.aligned()" in source
    result = _grade(_tree_with(tmp_path, source.replace("T.ptx.wgmma.fence.sync.aligned()", "T.ptx.wgmma.fence()")))
    assert result.build == "failed"
    (problem,) = result.problems
    assert problem.startswith("build failed for sm_90a")
    assert "wgmma_fence: missing required modifier(s): sync, aligned" in problem  # the op and TIRx's hint
    assert re.search(r"step01_single_tile\.py:\d+", problem)  # the line of the student's file
    assert "Traceback" not in problem


def test_a_python_error_in_the_file_is_one_message(tmp_path):
    result = _grade(_tree_with(tmp_path, _solution().replace("def hgemm_v1(", "def hgemm_v1((")))
    assert result.build == "failed"
    assert "importing step01_single_tile.py failed: SyntaxError" in result.problems[0]


def test_a_file_without_the_step_function_says_so(tmp_path):
    result = _grade(_tree_with(tmp_path, _solution().replace("def hgemm_v1(", "def hgemm_v0(")))
    assert "step01_single_tile.py defines no function hgemm_v1" in result.problems[0]


def test_ptxas_rejecting_the_arch_is_reported():
    spec = STEPS["hopper"][1]
    factory = build.kernel_factory(REPO / "solutions", "hopper", spec)
    with pytest.raises(build.BuildFailed, match="(nvcc|ptxas) failed") as failure:
        build.build(factory, spec, (128, 128, 64), "sm_100a", 148)
    assert "wgmma" in str(failure.value)


def test_a_python_keyword_in_a_ptx_name_says_how_tirx_spells_it(tmp_path):
    source = _solution()
    assert "T.ptx.fence.proxy.async_.shared__cta()" in source
    result = _grade(_tree_with(tmp_path, source.replace("T.ptx.fence.proxy.async_.shared__cta()",
                                                        "T.ptx.fence.proxy.async.shared__cta()", 1)))
    assert result.build == "failed"
    assert "importing step01_single_tile.py failed: SyntaxError" in result.problems[0]
    assert "`async` is a Python keyword: TIRx spells it `async_`" in result.problems[0]
