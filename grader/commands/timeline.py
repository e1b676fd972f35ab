"""`make timeline STEP=8`: a measured producer/consumer timeline of CTA 0 of a Hopper step: the step's timeline
build (analysis/timeline.py: %globaltimer stamps around its mbarrier helpers), run once on the GPU; the
JSON the notebook reads and its figure. Without a GPU: the build is made, and what it would record is said.

The step file is imported only in a child process over a copy of the course (runs/timeline_child.py), with
the course's files compared before and after; this process writes the outputs, checked before any work.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from grader.analysis import locator
from grader.analysis.locator import Barrier
from grader.analysis.timeline import ARCH, CAPACITY, STEPS_COVERED, TRACK
from grader.core import sandbox
from grader.core.build import REPO_ROOT
from grader.core.outputs import UnwritableOutput, writable_file
from grader.core.steps import STEPS, format_shape
from grader.judge.cli import UsageError as CliUsageError, detect_gpu, parse_shape
from grader.runs.timeline_child import TimelineRequest, record


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        raise UsageError(message)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = _Parser(prog="python -m grader.commands.timeline", description="A measured producer/consumer timeline "
                     "of one CTA of a step: an instrumented build with %globaltimer stamps, run once on the GPU.")
    parser.add_argument("--step", required=True)
    parser.add_argument("--track", default=TRACK)
    parser.add_argument("--impl", default="solutions")
    parser.add_argument("--shape", default="4096x4096x4096")
    parser.add_argument("--tiles", default="2", help="output tiles of CTA 0 kept in the events")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="the JSON to write (GPU)")
    parser.add_argument("--png", help="the figure to draw (GPU)")
    try:
        args = parser.parse_args(argv)
        if args.track != TRACK:
            raise UsageError(f"the timeline covers the Hopper track (stamps at wgmma's mbarriers), not {args.track!r}")
        if args.impl not in ("steps", "solutions"):
            raise UsageError(f"--impl must be steps or solutions, not {args.impl!r}")
        if not args.step.isdigit() or int(args.step) not in STEPS_COVERED:
            raise UsageError(f"--step must be one of {', '.join(map(str, STEPS_COVERED))} (a producer and consumers), "
                             f"not {args.step!r}")
        if not args.tiles.isdigit() or int(args.tiles) < 1:
            raise UsageError(f"--tiles must be a whole number >= 1, not {args.tiles!r}")
        spec = STEPS[TRACK][int(args.step)]
        shape = parse_shape(args.shape)
        if spec.shapes.violation(shape):
            raise UsageError(f"step {spec.number} cannot run at {format_shape(shape)}: {spec.shapes.violation(shape)}")
        out = writable_file(args.out, "--out") if args.out else None
        png = writable_file(args.png, "--png") if args.png else None
        gpu_name, gpu_arch, sm_count = detect_gpu()
        if gpu_arch and gpu_arch != ARCH:
            raise UsageError(f"the {gpu_name} here runs {gpu_arch} kernels: the Hopper timeline needs an sm_90a GPU")
        if gpu_arch and not out:
            raise UsageError("give --out FILE.json for the measured timeline")
    except (UsageError, CliUsageError, UnwritableOutput) as err:
        print(f"timeline: {err}", file=sys.stderr)
        return 2

    where = f"step {spec.number} ({args.impl}/{TRACK}) at {format_shape(shape)}"
    watch = sandbox.Watch(sandbox.Toolchain.resolve())
    result = record(TimelineRequest(str(REPO_ROOT / args.impl), args.impl, spec.number, shape, sm_count, args.seed,
                                    int(args.tiles), measure=gpu_arch is not None))
    try:
        sandbox.check_unchanged(watch, f"the timeline build of step {spec.number}")
    except sandbox.Tampered as err:
        print(f"step {spec.number}: {err}", file=sys.stderr)
        return 1
    if result.build_error or result.error:
        print(f"step {spec.number}: {result.build_error or result.error}", file=sys.stderr)
        return 1
    if not gpu_arch:
        print(f"timeline build of {where} for {ARCH}: built (nvcc -cubin)")
        print("it would record, in CTA 0, one lane per warp: " + ", ".join(
            f"{kind} at {n} site{'s' if n != 1 else ''}" for kind, n in result.sites.items()))
        print("warp roles: " + ", ".join(f"warp {w} {r}" for w, r in result.roles.items()))
        barriers = [Barrier(**{**b, "wait_lines": tuple(b["wait_lines"])}) for b in result.barriers]
        print("\n".join(locator.format_barrier_map(barriers)))
        print("no Hopper GPU here that runs it: nothing was run")
        return 0
    data = {"command": "python -m grader.commands.timeline " + shlex.join(argv), **result.data}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"timeline of {where} on {data['gpu']}: {len(data['events'])} events from {data['stamps']} stamps "
          f"({data['timer']}); result check: {data['check']}")
    print(f"written to {out}")
    if png:
        draw(data, png)
        print(f"drawn to {args.png}")
    if data["overflowed"]:
        print(f"(more than {CAPACITY} stamps: only the first were kept)")
    if data["check"] != "ok":
        print("the instrumented kernel's result is wrong: the timeline is of a broken run", file=sys.stderr)
        return 1
    return 0


def draw(data: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    sys.path.insert(0, str(REPO_ROOT / "notebooks"))
    import figures

    title = (f"step {data['step']} ({data['impl']}/{data['track']}), CTA 0, first {data['tiles']} output tiles "
             f"of {data['k_tiles']} K tiles at {format_shape(tuple(data['shape']))}, measured on {data['gpu']}")
    figures.draw_timeline(data["events"], title).savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
