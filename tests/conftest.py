"""Shared fixtures: which GPU (if any) is here, and a helper to build a step of either tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.core import build
from grader.judge import cli
from grader.analysis import features
from grader.core.steps import DEFAULT_SM_COUNT, STEPS, static_check_shape

REPO = Path(__file__).resolve().parent.parent
TRACK_ARCH = {"blackwell": "sm_100a", "hopper": "sm_90a"}


def gpu_arch() -> str | None:
    """The arch of a GPU here that can run the course's kernels, else None."""
    return cli.detect_gpu()[1]


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
