"""The grade as a terminal table and as a JSON file."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from grader.grade import Config, StepResult
from grader.steps import format_shape

_COLUMNS = ("step", "build", "features", "correctness", "speed", "TFLOP/s", "% cuBLAS", "vs ref")


def print_report(config: Config, results: list[StepResult]) -> None:
    where = config.gpu_name or "no GPU: build and static checks only"
    print(f"\ngrading {config.impl}/{config.track} for {config.arch} on {where}; seed {config.seed}\n")
    rows = [_COLUMNS] + [_row(result) for result in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS))]
    for index, row in enumerate(rows):
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
        if index == 0:
            print("  ".join("-" * width for width in widths))

    timed = [(r.step, t) for r in results for t in r.timings]
    if timed:
        print("\nspeed, per shape (median of per-call CUDA-event times, L2 flushed, interleaved):")
        for step, t in timed:
            reference = f", reference {t.reference_ms:.3f} ms" if t.reference_ms is not None else ""
            print(
                f"  step {step:>2} {format_shape(t.shape):>16}: {t.kernel_ms:8.3f} ms {t.tflops:7.1f} TFLOP/s "
                f"= {t.share_of_cublas:6.1%} of cuBLAS ({t.cublas_ms:.3f} ms){reference}"
            )
    for result in results:
        for problem in result.problems:
            print(f"\nstep {result.step}: {problem}")
    if config.gpu_name is None:
        print("\ncorrectness and speed skipped: no GPU that runs this arch is present.")
    failed = [r.step for r in results if not r.passed]
    print(f"\n{len(results) - len(failed)} passed, {len(failed)} failed" + (f" (steps {failed})" if failed else ""))


def write_json(config: Config, results: list[StepResult], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "config": {**asdict(config), "impl_dir": str(config.impl_dir), "solutions_dir": str(config.solutions_dir)},
        "steps": [
            {
                **asdict(result),
                "features": result.features,
                "passed": result.passed,
                "timings": [
                    {**asdict(t), "tflops": t.tflops, "share_of_cublas": t.share_of_cublas} for t in result.timings
                ],
            }
            for result in results
        ],
    }
    path.write_text(json.dumps(payload, indent=2))


def _row(result: StepResult) -> tuple[str, ...]:
    largest = max(result.timings, key=lambda t: t.shape[0] * t.shape[1] * t.shape[2], default=None)
    if largest is None:
        numbers = ("-", "-", "-")
    else:
        vs_reference = f"{largest.kernel_ms / largest.reference_ms:.2f}x" if largest.reference_ms else "-"
        numbers = (f"{largest.tflops:.1f}", f"{largest.share_of_cublas:.1%}", vs_reference)
    return (str(result.step), result.build, result.features, result.correctness, result.speed) + numbers
