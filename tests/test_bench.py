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
        {"step": "triton-seed", "shape": [4096, 4096, 4096], "kernel_ms": 0.22, "cublas_ms": 0.2, "correct": True},
        {"step": "triton-seed-ws", "shape": [4096, 4096, 4096], "kernel_ms": 0.21, "cublas_ms": 0.2, "correct": True},
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
    assert "| triton-seed | 4096x4096x4096 | 0.2200 | 624.7 | 0.2000 | 687.2 | 0.909x | yes |" in table
    assert "| triton-seed-ws | 4096x4096x4096 | 0.2100 | 654.5 | 0.2000 | 687.2 | 0.952x | yes |" in table
    assert "absent" not in table


def test_without_triton_the_table_says_why_its_rows_are_absent():
    rows = [row for row in PAYLOAD["rows"] if isinstance(row["step"], int)]
    table = bench.markdown({**PAYLOAD, "rows": rows, "triton_absent": "no module named triton"})
    assert "Rows triton-seed and triton-seed-ws are absent: no module named triton." in table
    assert "triton-seed |" not in table


def test_the_seed_kernel_is_reported_absent_where_triton_cannot_import_it(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_triton(name, *args, **kwargs):
        if name == "triton" or name.startswith("triton."):
            raise ModuleNotFoundError("No module named 'triton'")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(__import__("sys").modules, "grader.commands.triton_seed", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_triton)
    module, why = bench._triton_seed()
    assert module is None and "No module named 'triton'" in why


def test_chart_is_written(tmp_path):
    path = tmp_path / "ladder.png"
    bench.draw(PAYLOAD, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _run(tmp_path, name: str, **changes) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(__import__("json").dumps({**PAYLOAD, **changes}))
    return str(path)


def test_split_runs_merge_into_one_report_with_both_commands(tmp_path, capsys):
    layer_row = {"step": 12, "shape": [256, 4096, 4096], "kernel_ms": 0.05, "cublas_ms": 0.05, "correct": True,
                 "layer": "Llama-3-8B o"}
    models = _run(tmp_path, "models", command="bench --table models", date="2026-11-28", rows=[layer_row])
    squares = _run(tmp_path, "squares", command="bench --table squares")
    out = tmp_path / "ladder"
    assert bench.main(["--merge", models, squares, "--out", str(out)]) == 1  # PAYLOAD's step 10 row is wrong
    payload = __import__("json").loads(out.with_suffix(".json").read_text())
    assert payload["command"] == "bench --table models; bench --table squares"
    assert payload["date"] == "2026-11-28, 2026-11-23"
    assert [row["step"] for row in payload["rows"]] == [9, 10, "triton-seed", "triton-seed-ws", 12]
    table = out.with_suffix(".md").read_text()
    assert "## Squares" in table and "| Llama-3-8B o | 12 | 256x4096x4096 |" in table


@pytest.mark.parametrize("changes, message", [
    ({"gpu": "OTHER GPU"}, "the runs differ in gpu (OTHER GPU, TEST GPU); merge runs of one GPU"),
    ({"rows": None}, "is not the JSON of a bench run (it has no rows and command)"),
])
def test_runs_that_cannot_be_merged_get_one_line(tmp_path, capsys, changes, message):
    first, second = _run(tmp_path, "first"), _run(tmp_path, "second", **changes)
    assert bench.main(["--merge", first, second, "--out", str(tmp_path / "ladder")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bench: --merge: ") and err[0].endswith(message), err


def test_a_missing_run_gets_one_line(tmp_path, capsys):
    assert bench.main(["--merge", str(tmp_path / "absent.json"), "--out", str(tmp_path / "ladder")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "absent.json cannot be read as JSON (FileNotFoundError" in err[0], err


def test_each_shape_logs_its_ratios_when_it_is_done():
    rows = [
        {"step": 12, "shape": [128, 4096, 4096], "kernel_ms": 0.02, "cublas_ms": 0.021, "correct": True},
        {"step": "triton-seed", "shape": [128, 4096, 4096], "kernel_ms": 0.042, "cublas_ms": 0.021, "correct": False},
    ]
    assert bench.progress_line((128, 4096, 4096), rows) == (
        "bench: 128x4096x4096 done: step 12 1.050x, triton-seed 0.500x (wrong) (cuBLAS 0.0210 ms)"
    )
