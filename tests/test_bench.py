"""make bench without a GPU, and its table and chart from a known payload."""

from __future__ import annotations

import pytest

from conftest import gpu_arch
from grader.commands import bench

PAYLOAD = {
    "gpu": "TEST GPU",
    "driver": "1.0",
    "torch": "x",
    "track": "hopper",
    "date": "2026-11-23",
    "command": "make bench",
    "rows": [
        {"step": 9, "shape": [4096, 4096, 4096], "kernel_ms": 0.25, "cublas_ms": 0.2, "correct": True},
        {"step": 10, "shape": [4096, 4096, 4096], "kernel_ms": 0.2, "cublas_ms": 0.2, "correct": False},
    ],
}


def test_without_a_gpu_bench_says_so_in_one_line(capsys):
    if gpu_arch():
        pytest.skip("a GPU is here: make bench would run")
    assert bench.main([]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["bench: needs a Hopper or Blackwell GPU (it times the reference solutions against cuBLAS)"]


def test_table_reports_ratio_tflops_and_wrong_results():
    table = bench.markdown(PAYLOAD)
    assert "| 9 | 4096x4096x4096 | 0.2500 | 549.8 | 0.2000 | 687.2 | 0.800x | yes |" in table
    assert "| 10 | 4096x4096x4096 | 0.2000 | 687.2 | 0.2000 | 687.2 | 1.000x | NO |" in table


def test_chart_is_written(tmp_path):
    path = tmp_path / "ladder.png"
    bench.draw(PAYLOAD, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
