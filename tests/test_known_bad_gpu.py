"""On a Hopper GPU: what each known-bad Hopper kernel (tests/known_bad.py) really does, through the grader.

The static checks are set aside for the variant's step so that the kernel reaches the GPU; the
outcome (hang, wrong, slow or passed) is written to reports/known-bad-gpu.json next to the
expectation. A variant that passes on the GPU is a mistake the CPU grade rejects without need:
the test fails and says so.
"""

from __future__ import annotations

import json

import pytest

from conftest import REPO, gpu_arch
from grader.analysis import features
from grader.judge.grade import Config, grade_step
from grader.core.steps import STEPS
from known_bad import GPU_ONLY_VARIANTS, VARIANTS, Variant

pytestmark = pytest.mark.gpu

# with the step 12 mistakes that no CPU check catches (known_bad.GPU_ONLY_VARIANTS)
HOPPER_VARIANTS = [v for v in (*VARIANTS, *GPU_ONLY_VARIANTS) if v.track == "hopper"]
RECORD = REPO / "reports" / "known-bad-gpu.json"


def _config(tree) -> Config:
    import torch

    return Config("steps", tree, REPO / "solutions", "hopper", "sm_90a", torch.cuda.get_device_name(),
                  torch.cuda.get_device_properties(0).multi_processor_count, 1234, 60.0, None)


def _outcome(result) -> str:
    if result.build == "failed":
        return "build"
    # the GPU run ran out of time: at its first launch, or only at a later one (a lock left counted hangs the timing)
    if any(problem.startswith("did not finish in") for problem in result.problems):
        return "hang"
    if result.correctness == "failed":
        first = result.problems[0] if result.problems else ""
        # the run raised (a CUDA error, or a launch the driver refused) instead of returning a result
        return "fault" if first.startswith("failed while") else "wrong"
    return "slow" if result.speed == "failed" else "passed"


@pytest.mark.parametrize("variant", HOPPER_VARIANTS, ids=[v.name for v in HOPPER_VARIANTS])
def test_known_bad_hopper_kernel_on_the_gpu(tmp_path, monkeypatch, variant: Variant):
    if gpu_arch() != "sm_90a":
        pytest.skip("the Hopper variants run on a Hopper GPU")
    monkeypatch.setitem(features.CHECKS["hopper"], variant.step, [])
    result = grade_step(_config(variant.write(tmp_path / "steps")), STEPS["hopper"][variant.step])
    outcome = _outcome(result)
    records = json.loads(RECORD.read_text()) if RECORD.is_file() else {}
    records[variant.name] = {"expected": variant.gpu, "observed": outcome, "problems": result.problems[:3]}
    RECORD.parent.mkdir(parents=True, exist_ok=True)
    RECORD.write_text(json.dumps(records, indent=2))
    if variant.gpu not in ("race", "redundant"):  # those came out right on the H100 too: see known_bad.Variant
        assert outcome != "passed", f"{variant.name} passes on the GPU (expected {variant.gpu}): {result.problems}"
    # a build that fails here for another reason (tvm missing on the machine) has not run the mistake
    assert (outcome == "build") == (variant.gpu == "build"), f"{variant.name}: {outcome}: {result.problems[:1]}"
