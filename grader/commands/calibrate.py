"""`make calibrate`: measure the reference solutions on the GPU here and write the speed floors.

The grader judges a step's speed against the reference solution timed beside it; where none is
timed (grading the solutions themselves) it needs a floor, a minimum share of cuBLAS per step and
arch (grader/speed_floors.json). This grades each reference solution of the GPU's track as the
grader does (its build, its GPU child, its timing) and sets the step's floor to `margin` times the
lowest share of cuBLAS it reached over the timing shapes. Other archs and other steps keep their values.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import secrets
import shlex
import sys

from grader.core import build, outputs, sandbox
from grader.commands.bench import driver_version
from grader.core.build import REPO_ROOT
from grader.judge.cli import (
    DEFAULT_TIMEOUT_S, UsageError, _Parser, detect_gpu, parse_shape, resolve_arch_and_track, select_steps,
)
from grader.judge.grade import Config, grade_step
from grader.core.steps import SPEED_FLOORS_FILE, format_shape

# room for a slower clock or another cuBLAS version, still far above a kernel that lost the step's idea
DEFAULT_MARGIN = 0.5


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(prog="python -m grader.commands.calibrate", description=__doc__)
    parser.add_argument("--step", default="all", help="1..10 or all (default: all)")
    parser.add_argument("--shape", action="append", default=[],
                        help="MxNxK to time instead of the step's timing shapes")
    parser.add_argument("--margin", type=float, default=DEFAULT_MARGIN, help="floor = margin x measured share")
    parser.add_argument("--out", default=str(SPEED_FLOORS_FILE), help="the table to update (default: the grader's)")
    try:
        args = parser.parse_args(argv)
        out = outputs.writable_file(args.out, "--out")
    except (UsageError, outputs.UnwritableOutput) as err:
        print(f"calibrate: {err}", file=sys.stderr)
        return 2
    gpu_name, gpu_arch, sm_count = detect_gpu()
    if gpu_arch is None:
        print("calibrate: needs a Hopper or Blackwell GPU (it times the reference solutions against cuBLAS)",
              file=sys.stderr)
        return 2
    arch, track = resolve_arch_and_track("auto", "auto", gpu_name, gpu_arch)
    try:
        specs = select_steps(args.step, track, REPO_ROOT / "solutions" / track)
        shapes = tuple(parse_shape(text) for text in args.shape)
        for spec in specs:
            problem = next(filter(None, (spec.shapes.violation(shape) for shape in shapes)), None)
            if problem:
                raise UsageError(f"--shape does not fit step {spec.number}: {problem}")
        if not 0 < args.margin <= 1:
            raise UsageError(f"--margin must be above 0 and at most 1, not {args.margin}")
    except UsageError as err:
        print(f"calibrate: {err}", file=sys.stderr)
        return 2

    solutions = REPO_ROOT / "solutions"
    config = Config("solutions", solutions, solutions, track, arch, gpu_name, sm_count, secrets.randbelow(2**31),
                    DEFAULT_TIMEOUT_S, shapes or None)
    build.TOOLCHAIN = sandbox.Toolchain.resolve()
    sandbox.become_subreaper()
    measured: dict[int, dict[str, float]] = {}
    for spec in specs:
        print(f"calibrate: step {spec.number} ...", file=sys.stderr, flush=True)
        # the floor judged here is the one being replaced: only the timings are read
        result = grade_step(config, dataclasses.replace(spec, timing_shapes=shapes) if shapes else spec)
        if result.correctness != "passed" or not result.timings:
            print(f"calibrate: step {spec.number}'s reference solution did not run to the end: "
                  f"{'; '.join(result.problems) or result.correctness}", file=sys.stderr)
            return 1
        measured[spec.number] = {format_shape(t.shape): round(t.share_of_cublas, 4) for t in result.timings}

    arguments = argv if argv is not None else sys.argv[1:]
    about = {
        "gpu": gpu_name, "driver": driver_version(), "date": datetime.date.today().isoformat(),
        "command": "python -m grader.commands.calibrate " + " ".join(map(shlex.quote, arguments)),
    }
    table = updated_table(json.loads((out if out.exists() else SPEED_FLOORS_FILE).read_text()), arch, measured,
                          args.margin, about)
    out.write_text(json.dumps(table, indent=2) + "\n")
    for step, floor in sorted(table["archs"][arch]["floors"].items(), key=lambda item: int(item[0])):
        print(f"step {step:>2}: floor {floor:.4f}" + (" (measured now)" if int(step) in measured else ""))
    print(f"written: {out} ({arch}, {gpu_name})")
    return 0


def updated_table(table: dict, arch: str, measured: dict[int, dict[str, float]], margin: float, about: dict) -> dict:
    """The table with `arch`'s floors of the measured steps replaced by margin x their lowest share."""
    entry = table["archs"].get(arch, {"floors": {}})
    all_measured = {**entry.get("measured", {}), **{str(step): shares for step, shares in measured.items()}}
    floors = {**entry["floors"], **{str(step): round(margin * min(shares.values()), 4)
                                    for step, shares in measured.items()}}
    unmeasured = [step for step in floors if step not in all_measured]
    table["archs"][arch] = {
        "floors": dict(sorted(floors.items(), key=lambda item: int(item[0]))),
        # steps left with their earlier values keep that value's standing
        "estimate": bool(unmeasured) and entry.get("estimate", False),
        "source": "make calibrate" + (f" (steps {', '.join(unmeasured)}: {entry.get('source', 'earlier values')})"
                                      if unmeasured else ""),
        **about,
        "margin": margin,
        "measured": dict(sorted(all_measured.items(), key=lambda item: int(item[0]))),
    }
    return table


if __name__ == "__main__":
    sys.exit(main())
