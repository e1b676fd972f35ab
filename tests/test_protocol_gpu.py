"""GPU validation of the protocol checker: for each hang mutation of the locator's GPU tests and for a
stage-reuse mutation, the checker's CPU verdict must agree with what the H100 does.

Run on the H100: `python -m pytest tests/test_protocol_gpu.py -s -q` (each case prints one table row:
mutation | CPU verdict | GPU outcome)."""

from __future__ import annotations

import re

import pytest

from conftest import gpu_arch, without_static_checks
from grader.core import build
from grader.analysis import protocol
from grader.judge.grade import grade_step
from grader.core.steps import STEPS
from test_gpu import _broken, _config, _solution, _write
from test_locator_gpu import GRADER_TIMEOUT_S, MUTATIONS as LOCATOR_MUTATIONS, SAME_STARTING_PHASE
from test_protocol import RELEASE_CURRENT_STAGE

pytestmark = [pytest.mark.gpu, pytest.mark.skipif("gpu_arch() != 'sm_90a'", reason="mutations of the Hopper solutions")]

# name: (step, [(pattern, replacement)], shape)
CASES = {name: (step, [(pattern, replacement)], shape)
         for name, (step, pattern, replacement, shape, _) in LOCATOR_MUTATIONS.items()}
CASES["producer_on_consumer_phase"] = (SAME_STARTING_PHASE[0], [SAME_STARTING_PHASE[1:3]], SAME_STARTING_PHASE[3])
CASES["consumer_on_producer_phase"] = (5, [(r"phase_tma\[s\] = 0\n", "phase_tma[s] = 1\n")], (256, 384, 1088))
CASES["release_current_stage"] = (8, RELEASE_CURRENT_STAGE, (640, 384, 1088))


def _mutated_tree(tmp_path, step, replacements):
    tree = _broken(tmp_path, step, *replacements[0])
    source = (tree / "hopper" / STEPS["hopper"][step].file_name).read_text()
    for pattern, replacement in replacements[1:]:
        source, count = re.subn(pattern, replacement, source, count=1)
        assert count == 1, pattern
    _write(tree, step, source)
    _write(tree, 3, _solution(3))
    return tree


@pytest.mark.parametrize("name", CASES)
def test_the_cpu_verdict_agrees_with_the_gpu(tmp_path, monkeypatch, name):
    import torch

    step, replacements, shape = CASES[name]
    without_static_checks(monkeypatch, "hopper", step)  # what is compared is the CPU verdict and the GPU's
    tree = _mutated_tree(tmp_path, step, replacements)
    spec = STEPS["hopper"][step]
    sm_count = torch.cuda.get_device_properties(0).multi_processor_count
    verdict = protocol.check_step(build.kernel_factory(tree, "hopper", spec), spec, shape, sm_count)
    assert not verdict.ok, f"the checker found nothing in {name}"
    kinds = {finding.kind for finding, _ in verdict.findings}
    hang_barriers = {label for finding, _ in verdict.findings if finding.kind in ("deadlock", "lapping")
                     for line in finding.lines for label in re.findall(r"wait(?:s|ed)? on (\w+\[\d+\])", line)}

    graded = grade_step(_config(tree, timeout_s=GRADER_TIMEOUT_S, shapes=(shape,)), spec)
    report = "\n".join(graded.problems)
    hung = "where it hangs" in report
    located = set(re.findall(r"waited on (\w+\[\d+\]) for phase", report))
    gpu = f"hang at {', '.join(sorted(located)) or '?'}" if hung else (
        "wrong result" if graded.correctness == "failed" else "correct")
    print(f"\n| {name} | {', '.join(sorted(kinds))} at {sorted(hang_barriers)} | {gpu} |")
    if hung and not located:
        print(report)

    assert graded.correctness == "failed", f"the GPU ran {name} correctly; the checker said: {verdict.lines()}"
    if hung:
        assert hang_barriers, f"the GPU hung but the checker predicted no hang: {verdict.lines()}\n{report}"
        arrays = {label.split("[")[0] for label in located}  # the stage index may differ with timing
        assert arrays and arrays <= {label.split("[")[0] for label in hang_barriers}, (located, hang_barriers)
    else:
        assert kinds & {"overrun", "race", "tx_bytes", "lapping"}, f"wrong result, checker: {verdict.lines()}"
