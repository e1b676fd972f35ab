"""`make check STEP=N`: run a step's barrier protocol on the CPU (analysis/protocol.py) and report deadlocks,
stage races and barrier misuse. No GPU needed.

The checker needs the kernel's TIR, so it runs where the step file is imported: in the build process,
over a copy of the course (runs/build_child.py), with the course's files compared before and after.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from grader.core.options import OneLineParser
from grader.core import build, sandbox
from grader.core.build import REPO_ROOT
from grader.core.steps import DEFAULT_SM_COUNT, format_shape
from grader.judge.cli import UsageError, detect_gpu, parse_shape, resolve_arch_and_track, select_steps
from grader.runs.build_child import build_isolated


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m grader.commands.check", description="Run a step's barrier "
                                     "protocol on the CPU and report deadlocks, stage races and barrier misuse.")
    parser.add_argument("--step")
    parser.add_argument("--impl", default="steps")
    parser.add_argument("--track", default="auto")
    parser.add_argument("--shape", action="append", default=[], help="MxNxK (default: the step's correctness shapes)")
    parser.add_argument("--sm-count", type=int)
    args = parser.parse_args(argv)

    gpu_name, gpu_arch, gpu_sms = detect_gpu()
    try:
        if args.step is None or not args.step.isdigit():
            raise UsageError("give one step: STEP=1..10")
        if args.impl not in ("steps", "solutions"):
            raise UsageError(f"IMPL must be steps or solutions, not {args.impl!r}")
        arch, track = resolve_arch_and_track("auto", args.track, gpu_name, gpu_arch)
        (spec,) = select_steps(args.step, track, REPO_ROOT / args.impl / track)
        shapes = [parse_shape(s) for s in args.shape] or list(spec.correctness_shapes)
        for shape in shapes:
            problem = spec.shapes.violation(shape)
            if problem:
                raise UsageError(f"step {spec.number} cannot run at {format_shape(shape)}: {problem}")
        if args.sm_count is not None and args.sm_count < 1:
            raise UsageError("--sm-count must be positive")
    except UsageError as err:
        print(f"check: {err}", file=sys.stderr)
        return 2
    sm_count = args.sm_count or (gpu_sms if gpu_arch else DEFAULT_SM_COUNT[arch])
    watch = sandbox.Watch(sandbox.Toolchain.resolve())
    try:
        with tempfile.TemporaryDirectory(prefix="grader-check-") as out_dir:
            try:
                builds = build_isolated(REPO_ROOT / args.impl, track, spec, [], arch, sm_count, with_solutions=True,
                                        export=False, out_dir=Path(out_dir), protocol_shapes=shapes)
            finally:
                sandbox.check_unchanged(watch, f"checking step {spec.number}")
    except (build.StepNotImplemented, build.BuildFailed, sandbox.Tampered) as err:
        print(f"step {spec.number}: {err}", file=sys.stderr)
        return 1
    if builds.protocol_unsupported:
        print(f"step {spec.number}: the protocol checker cannot run this kernel: {builds.protocol_unsupported}",
              file=sys.stderr)
        return 1
    print(f"protocol check of step {spec.number} ({args.impl}/{track}, {sm_count} SMs)")
    for verdict in builds.protocol_verdicts:
        print("\n".join(verdict.lines))
    return 0 if all(verdict.ok for verdict in builds.protocol_verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
