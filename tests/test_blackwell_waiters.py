"""Blackwell steps 4-6: inside the K loop only the elected thread that issues the MMA waits on mbarriers.

A parity wait cannot tell phase n from phase n + 2. On Blackwell one thread drives tma_bar and
mma_bar, so a warp that waits on them without arriving could be lapped and hang (issue 16). The
generated CUDA shows who waits: every mbarrier wait must sit inside the `elect.sync` branch.
The Hopper twins let all warps wait (all four issue wgmma and stay in step), so they are not checked.
"""

from __future__ import annotations

import re

import pytest

from conftest import REPO, build_step
from grader.analysis import features
from grader.core.steps import DEFAULT_SM_COUNT, STEPS, static_check_shape

_STRING = re.compile(r'"(?:\\.|[^"\\])*"')
_WAIT = re.compile(r"tvm_builtin_cuda_mbarrier_wait\((\(&\(\(\(uint64_t\*\)\w+\)\[\d+\]\)\))")
_COMMIT = re.compile(r"tcgen05_commit\w*\(tvm_builtin_cuda_cvta_generic_to_shared\((\(&\(\(\(uint64_t\*\)\w+\)\[\d+\]\)\))")


def waits_outside_elect(cuda_source: str) -> list[str]:
    """The barrier addresses of mbarrier waits that are not nested in an elect.sync branch."""
    open_blocks: list[str] = []
    outside = []
    for line in cuda_source.splitlines():
        code = _STRING.sub('""', line)
        found = _WAIT.search(code)
        if found and not any("elect_one_sync" in opener for opener in open_blocks):
            outside.append(found.group(1))
        for char in code:
            if char == "{":
                open_blocks.append(code)
            elif char == "}" and open_blocks:
                open_blocks.pop()
    return outside


def _mma_bar(cuda_source: str) -> str:
    commits = set(_COMMIT.findall(cuda_source))
    assert len(commits) == 1, f"expected one barrier that tcgen05.commit arrives on, found {commits}"
    return commits.pop()


def _build(step: int, arch: str):
    spec = STEPS["blackwell"][step]
    if not (REPO / "solutions" / "blackwell" / spec.file_name).exists():
        pytest.skip(f"solutions/blackwell lacks step {step}")
    return build_step(REPO / "solutions", "blackwell", step, arch=arch)


@pytest.mark.parametrize("step", [4, 5, 6])
def test_only_the_elected_thread_waits_in_the_k_loop(step):
    # sm_103a here; test_static_checks builds the same solutions for sm_100a
    arch = "sm_103a"
    artifacts = _build(step, arch)
    source = artifacts.cuda_source
    mma_bar = _mma_bar(source)
    assert mma_bar in _WAIT.findall(source), "no wait on mma_bar at all"
    assert waits_outside_elect(source) == []
    launch = features.Launch(static_check_shape(STEPS["blackwell"][step].correctness_shapes), DEFAULT_SM_COUNT[arch])
    failed = [c.name for c in features.run_checks("blackwell", step, artifacts, launch) if not c.passed]
    assert failed == []


def test_all_thread_waits_are_found():
    """Step 3 lets all 128 threads wait on mma_bar (safe there: every K tile has a cta_sync); the
    parser must see those waits as outside the elected branch."""
    source = _build(3, "sm_100a").cuda_source
    assert _mma_bar(source) in waits_outside_elect(source)
