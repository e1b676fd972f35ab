"""Shared fixtures: which GPU (if any) is here, and a helper to build a step of either tree."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# Tests run side by side (make test: pytest -n auto), and a grade fingerprints the course's grader/, solutions/,
# steps/, kernel_helpers/, hints/ and every file of the installed packages while it runs (sandbox.Watch): a .pyc that
# another test's first import writes there is a change the grade reports as the student's tampering. No process
# of the tests writes bytecode: set before the course is imported, inherited by every process they start.
sys.dont_write_bytecode = True
os.environ["PYTHONDONTWRITEBYTECODE"] = "1"

from grader.core import build  # noqa: E402
from grader.judge import cli  # noqa: E402
from grader.analysis import features  # noqa: E402
from grader.core.steps import DEFAULT_SM_COUNT, STEPS, static_check_shape  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
TRACK_ARCH = {"blackwell": "sm_100a", "hopper": "sm_90a"}


def gpu_arch() -> str | None:
    """The arch of a GPU here that can run the course's kernels, else None."""
    return cli.detect_gpu()[1]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """`pytest -n auto`: a worker per core, but one alone where a Hopper or Blackwell GPU is: the GPU tests time
    kernels against cuBLAS and the notebooks run GPU cells, on the one GPU; no test there may share it."""
    return 1 if gpu_arch() is not None else len(os.sched_getaffinity(0))


# Files whose tests share nothing but the checkout (each grades or checks in its own tmp_path): under `make test`'s
# --dist loadfile their tests go to the workers one by one, not as one unit. test_known_bad_cpu.py alone is 24 minutes
# of one worker's grades on a 2-core machine (1435 s, 2026-12-02); as one unit it kept one worker busy while the other
# ran out of files.
SPREAD_FILES = {"tests/test_known_bad_cpu.py", "tests/test_skeletons.py", "tests/test_protocol.py",
                "tests/test_integrity.py"}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """--dist loadfile, but the tests of SPREAD_FILES each a unit of their own; any other --dist as xdist has it."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class LoadFileSpreadingSome(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = super()._split_scope(nodeid)
            return nodeid if file in SPREAD_FILES else file

    return LoadFileSpreadingSome(config, log)


def pytest_collection_modifyitems(config, items):
    if gpu_arch() is None:
        skip = pytest.mark.skip(reason="no Hopper or Blackwell GPU here")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


def present_steps(tree: str) -> list[tuple[str, int]]:
    """(track, step) for every step file present in steps/ or solutions/."""
    return [
        (track, number)
        for track in TRACK_ARCH
        for number, spec in STEPS[track].items()
        if (REPO / tree / track / spec.file_name).exists()
    ]


def build_step(tree: Path, track: str, number: int, shape=None, arch=None) -> build.Artifacts:
    spec = STEPS[track][number]
    arch = arch or TRACK_ARCH[track]
    shape = shape or static_check_shape(spec.correctness_shapes)
    factory = build.kernel_factory(tree, track, spec)
    return build.build(factory, spec, shape, arch, DEFAULT_SM_COUNT[arch])


def without_static_checks(monkeypatch, track: str, step: int) -> None:
    """Set a step's static checks aside for one test: kernels they already reject on a CPU reach the GPU,
    so that what is tested is the GPU-side judgement (the comparison, the unwritten-tile report)."""
    monkeypatch.setitem(features.CHECKS[track], step, [])
