"""The grade as a terminal table and as a JSON file."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict
from pathlib import Path

from grader.judge.grade import PROTOCOL_NOT_SIMULATED, Config, StepResult
from grader.core.steps import STEPS, format_shape

_COLUMNS = ("step", "build", "features", "correctness", "speed", "TFLOP/s", "% cuBLAS", "vs ref")


def print_report(config: Config, results: list[StepResult]) -> None:
    where = config.gpu_name or "no GPU: build and static checks only"
    seed = "seed hidden (instructor mode)" if config.instructor else f"seed {config.seed} (--seed reproduces the run)"
    print(f"\ngrading {config.impl}/{config.track} for {config.arch} on {where}; {seed}\n")
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
        if result.cubin_sha256:
            print(f"\nstep {result.step}: {_shapes_built(config, result)}")
    for result in results:
        for problem in result.problems:
            print(f"\nstep {result.step}: {problem}")
        for note in result.notes:
            print(f"\nstep {result.step}: note: {note}")
    if config.gpu_name is None:
        print("\nno GPU that runs this arch is present: correctness here is the barrier protocol simulated on "
              f"the CPU (steps 4-{max(STEPS[config.track])}); the numerical result and the speed were not measured.")
        for result in results:
            if result.passed:
                shapes = len(STEPS[config.track][result.step].correctness_shapes)
                print(f"step {result.step}: build and static checks passed; {cpu_blind_spots(result, shapes)}")
    failed = [r.step for r in results if not r.passed]
    print(f"\n{len(results) - len(failed)} passed, {len(failed)} failed" + (f" (steps {failed})" if failed else ""))


def _shapes_built(config: Config, result: StepResult) -> str:
    """Which shapes the kernel was built (and checked, and run) at; the drawn one is named only when the
    seed is not hidden."""
    done = "built and checked" if config.gpu_name is None else "built, checked and run"
    drawn = _drawn_shape(result)
    listed = [shape for shape in result.cubin_sha256 if shape != drawn]
    if config.instructor:
        names = [f"{len(listed)} listed shape{'s' if len(listed) != 1 else ''}"] if listed else []
        names += ["one drawn for this run"] if drawn else []
    else:
        names = listed + ([f"{drawn} (drawn for this run from the step's rule)"] if drawn else [])
    shapes = names[-1] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return f"{done} at {shapes}; the sha256 of each cubin is in the JSON report"


def cpu_blind_spots(result: StepResult, correctness_shapes: int) -> str:
    """What a grade without a GPU cannot see for a step, in one line; where it simulated the barriers, at how many
    shapes (all the step's correctness shapes, whichever SHAPES were built: a student trial took the built ones
    for the simulated ones)."""
    simulated = result.step >= 4 and not any(note.startswith(PROTOCOL_NOT_SIMULATED) for note in result.notes)
    barriers = (f"; its barriers were simulated by the protocol checker at all {correctness_shapes} of the step's "
                f"correctness shapes (`make check STEP={result.step}` names them)") if simulated else ""
    return "not checked without a GPU: numerical result, speed" + barriers


def write_json(config: Config, results: list[StepResult], path: Path) -> None:
    """In instructor mode the report holds no seed and no shape drawn for the run: nothing to tune to."""
    path.parent.mkdir(parents=True, exist_ok=True)
    hidden = ("seed",) if config.instructor else ()
    config_fields = {key: value for key, value in asdict(config).items() if key not in hidden}
    payload = {
        "config": {**config_fields, "impl_dir": str(config.impl_dir), "solutions_dir": str(config.solutions_dir)},
        "steps": [
            {
                **asdict(result),
                **({"random_shape": None, "correctness_shapes": [
                    {k: v for k, v in c.items() if k not in ("seed", "shape")} for c in result.correctness_shapes
                ], "cubin_sha256": _hide_drawn_shape(result)} if config.instructor else {}),
                # a check's hint states the step's answer (a value, a call): only a failed check earns it
                "checks": [{**asdict(c), "hint": c.hint if not c.passed else None} for c in result.checks],
                "features": result.features,
                "passed": result.passed,
                "timings": [
                    {**asdict(t), "tflops": t.tflops, "share_of_cublas": t.share_of_cublas} for t in result.timings
                ],
            }
            for result in results
        ],
    }
    # whole or not at all, and never through a link: a fresh file of a new name (O_EXCL), renamed over the path
    handle, written = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    with os.fdopen(handle, "w") as file:
        file.write(json.dumps(payload, indent=2))
    os.replace(written, path)


def _row(result: StepResult) -> tuple[str, ...]:
    largest = max(result.timings, key=lambda t: t.shape[0] * t.shape[1] * t.shape[2], default=None)
    if largest is None:
        numbers = ("-", "-", "-")
    else:
        vs_reference = f"{largest.kernel_ms / largest.reference_ms:.2f}x" if largest.reference_ms else "-"
        numbers = (f"{largest.tflops:.1f}", f"{largest.share_of_cublas:.1%}", vs_reference)
    return (str(result.step), result.build, result.features, result.correctness, result.speed) + numbers


def _drawn_shape(result: StepResult) -> str | None:
    return format_shape(result.random_shape) if result.random_shape else None


def _hide_drawn_shape(result: StepResult) -> dict[str, str]:
    drawn = _drawn_shape(result)
    return {("drawn" if shape == drawn else shape): digest for shape, digest in result.cubin_sha256.items()}
