"""`make debug STEP=N`: which warp waits on which barrier when a step hangs.

On a GPU: the step's debug build (every mbarrier wait bounded, analysis/locator.py) runs once and the
waits that gave up are reported. Without one: the debug build is made and assembled, and its barrier
map printed. Either way the step file is imported only in a child process over a copy of the course
(runs/debug_child.py), and the course's files are compared before and after.
"""

from __future__ import annotations

import sys

from grader.core.options import OneLineParser
from grader.analysis.locator import BOUND_S, format_barrier_map
from grader.core import sandbox
from grader.core.build import REPO_ROOT
from grader.core.steps import DEFAULT_SM_COUNT, format_shape
from grader.judge.cli import UsageError, detect_gpu, one_run_shape, resolve_arch_and_track, select_steps
from grader.runs.debug_child import BUILD_ONLY_TIMEOUT_S, CHILD_TIMEOUT_S, LocateRequest, barriers, explain, locate


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m grader.commands.debug", description="Build a step's debug build "
                                     "(bounded mbarrier waits); run it on a GPU, or show the barriers it watches.")
    parser.add_argument("--step")
    parser.add_argument("--impl", default="steps", choices=("steps", "solutions"))
    parser.add_argument("--track", default="auto")
    parser.add_argument("--arch", default="auto")
    parser.add_argument("--shape", help="MxNxK (default: the step's second correctness shape)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    gpu_name, gpu_arch, sm_count = detect_gpu()
    try:
        if args.step is None or not args.step.isdigit():
            raise UsageError("give one step: STEP=1..10")
        arch, track = resolve_arch_and_track(args.arch, args.track, gpu_name, gpu_arch)
        (spec,) = select_steps(args.step, track, REPO_ROOT / args.impl / track)
        shape = one_run_shape(spec, args.shape)
    except UsageError as err:
        print(f"debug: {err}", file=sys.stderr)
        return 2
    sm_count = sm_count if gpu_arch else DEFAULT_SM_COUNT[arch]
    where = f"step {spec.number} ({args.impl}/{track}) at {format_shape(shape)} for {arch}"
    watch = sandbox.Watch(sandbox.Toolchain.resolve())
    located = locate(LocateRequest(str(REPO_ROOT / args.impl), track, spec.number, arch, sm_count, shape, args.seed,
                                   run=gpu_arch is not None),
                     CHILD_TIMEOUT_S if gpu_arch else BUILD_ONLY_TIMEOUT_S)
    try:
        sandbox.check_unchanged(watch, f"the debug build of step {spec.number}")
    except sandbox.Tampered as err:
        print(f"step {spec.number}: {err}", file=sys.stderr)
        return 1
    if located.build_error:
        print(f"step {spec.number}: {located.build_error}", file=sys.stderr)
        return 1
    if not gpu_arch:
        if located.error:
            print(f"step {spec.number}: {located.error}", file=sys.stderr)
            return 1
        print(f"debug build of {where}: built (nvcc -cubin); every mbarrier wait gives up after {BOUND_S} s")
        print("\n".join(format_barrier_map(barriers(located))))
        print("no GPU here that runs it: nothing was run")
        return 0
    print(f"debug run of {where} on {gpu_name}; every mbarrier wait gives up after {BOUND_S} s")
    print("\n".join(format_barrier_map(barriers(located))))
    if located.finished and not located.records and not located.error:
        print("the kernel finished and no wait gave up: no deadlock at this shape")
        return 0
    print("\n".join(explain(located)))
    return 1


if __name__ == "__main__":
    sys.exit(main())
