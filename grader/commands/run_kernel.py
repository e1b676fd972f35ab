"""`python -m grader.commands.run_kernel --step N --shape MxNxK`: build a step, run it once, check the result.

No timing: made to sit under compute-sanitizer (`make sanitize STEP=N`) or ncu. The step file is imported
only in the build process, over a copy of the course (runs/build_child.py); the built library runs here, in
this process, where the sanitizer watches it, loaded as the grade's GPU child loads it (the checked cubin).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch

from grader.core.options import OneLineParser
from grader.analysis import diagnosis
from grader.core import build, sandbox
from grader.core.build import REPO_ROOT
from grader.core.steps import format_shape
from grader.judge.cli import UsageError, detect_gpu, one_run_shape, resolve_arch_and_track, select_steps
from grader.runs import gpu_child
from grader.runs.build_child import build_isolated


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m grader.commands.run_kernel", description=__doc__)
    parser.add_argument("--step", required=True)
    parser.add_argument("--impl", default="steps", choices=("steps", "solutions"))
    parser.add_argument("--shape", help="MxNxK (default: the step's second correctness shape, a few tiles)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    gpu_name, gpu_arch, sm_count = detect_gpu()
    try:
        if gpu_arch is None:
            raise UsageError("needs a Hopper or Blackwell GPU")
        arch, track = resolve_arch_and_track("auto", "auto", gpu_name, gpu_arch)
        (spec,) = select_steps(args.step, track, REPO_ROOT / args.impl / track)
        shape = one_run_shape(spec, args.shape)
    except UsageError as err:
        print(f"run_kernel: {err}", file=sys.stderr)
        return 2

    watch = sandbox.Watch(sandbox.Toolchain.resolve())
    with tempfile.TemporaryDirectory(prefix="grader-run-kernel-") as work:
        try:
            try:
                (built,) = build_isolated(REPO_ROOT / args.impl, track, spec, [shape], arch, sm_count,
                                          with_solutions=True, export=True, out_dir=Path(work)).kernels
            finally:
                sandbox.check_unchanged(watch, f"building step {spec.number}")
        except (build.StepNotImplemented, build.BuildFailed, sandbox.Tampered) as err:
            print(f"step {spec.number}: {err}", file=sys.stderr)
            return 1
        kernel = gpu_child.load(gpu_child.Kernel.of("kernel", built, Path(work)), arch)
        a, b = diagnosis.random_inputs(shape, args.seed)
        d = torch.full((shape[0], shape[1]), float("nan"), dtype=torch.float16, device="cuda")
        kernel(a, b, d)
        torch.cuda.synchronize()
    verdict = diagnosis.compare(d, diagnosis.reference(a, b))
    print(f"step {spec.number} ({args.impl}/{track}) at {format_shape(shape)}: {verdict.message}; "
          f"max error {verdict.max_error:.2e} x rms")
    return 0 if verdict.passed else 1


if __name__ == "__main__":
    sys.exit(main())
