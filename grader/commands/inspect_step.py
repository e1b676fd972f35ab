"""`python -m grader.commands.inspect_step --step N`: print a step's generated CUDA and the features found in it.

Works without a GPU. Use it to see what TIRx made of your kernel before you run it. The step file is
imported only in the build process, over a copy of the course (runs/build_child.py), as in a grade.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

from grader.core.options import OneLineParser
from grader.analysis import features
from grader.core import build, sandbox
from grader.core.build import REPO_ROOT
from grader.core.steps import DEFAULT_SM_COUNT, format_shape, static_check_shape
from grader.judge.cli import UsageError, one_run_shape, resolve_arch_and_track, select_steps
from grader.runs.build_child import build_isolated

# Instruction families worth counting in the SASS, so a reader sees what the hardware will execute.
SASS_FAMILIES = ("UTCHMMA", "UTCBAR", "LDTM", "HGMMA", "UTMALDG", "UTMASTG", "SYNCS", "LDG", "STG", "BAR.SYNC")


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m grader.commands.inspect_step", description=__doc__)
    parser.add_argument("--step", required=True)
    parser.add_argument("--impl", default="steps", choices=("steps", "solutions"))
    parser.add_argument("--track", default="auto")
    parser.add_argument("--arch", default="auto")
    parser.add_argument("--shape", help="MxNxK to build at (default: the shape the CPU grade checks)")
    parser.add_argument("--source", action="store_true", help="print only the CUDA source")
    args = parser.parse_args(argv)
    try:
        if args.step == "all":
            raise UsageError("inspect shows one step at a time: give STEP=N")
        arch, track = resolve_arch_and_track(args.arch, args.track, None, None)
        (spec,) = select_steps(args.step, track, REPO_ROOT / args.impl / track)
        shape = one_run_shape(spec, args.shape) if args.shape else static_check_shape(spec.correctness_shapes)
    except UsageError as err:
        print(f"inspect: {err}", file=sys.stderr)
        return 2

    sm_count = DEFAULT_SM_COUNT[arch]
    watch = sandbox.Watch(sandbox.Toolchain.resolve())
    try:
        with tempfile.TemporaryDirectory(prefix="grader-inspect-") as out_dir:
            try:
                (built,) = build_isolated(REPO_ROOT / args.impl, track, spec, [shape], arch, sm_count,
                                          with_solutions=True, export=False, out_dir=Path(out_dir)).kernels
            finally:
                sandbox.check_unchanged(watch, f"building step {spec.number}")
    except (build.StepNotImplemented, build.BuildFailed, sandbox.Tampered) as err:
        print(f"step {spec.number}: {err}", file=sys.stderr)
        return 1
    artifacts = built.artifacts

    print(artifacts.cuda_source)
    if args.source:
        return 0
    file = build.step_file(REPO_ROOT / args.impl, track, spec).relative_to(REPO_ROOT)
    print(f"\n==== step {spec.number} ({file}) built for {arch} at {format_shape(shape)} in {artifacts.seconds:.1f} s")
    print(f"grid {artifacts.grid}, {artifacts.threads_per_cta} threads per CTA, "
          f"fp16 shared buffers {artifacts.shared_fp16_buffers}, tile loop: {artifacts.has_tile_loop}")
    counts = {name: len(re.findall(rf"\b{re.escape(name)}\b", artifacts.sass)) for name in SASS_FAMILIES}
    print("SASS instructions: " + ", ".join(f"{name} x{count}" for name, count in counts.items() if count))
    for check in features.run_checks(track, spec.number, artifacts, features.Launch(shape, sm_count)):
        print(f"  [{'x' if check.passed else ' '}] {check.name}" + ("" if check.passed else f" — {check.hint}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
