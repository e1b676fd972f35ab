"""`python -m grader`: read the options, find the GPU, grade each step, report, exit.

Exit status: 0 every graded step passed, 1 a step failed, 2 the options were wrong.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import secrets
import sys
from pathlib import Path

from grader.core import build, outputs, sandbox
from grader.judge import report
from grader.core.build import REPO_ROOT
from grader.judge.grade import Config, StepResult, grade_step
from grader.core.steps import DEFAULT_SM_COUNT, STEPS, TRACK_ARCHS, TRACKS, Shape, StepSpec, format_shape

ARCH_OF_CAPABILITY = {(9, 0): "sm_90a", (10, 0): "sm_100a", (10, 3): "sm_103a"}
DEFAULT_TRACK = "blackwell"
DEFAULT_TIMEOUT_S = 180.0


class UsageError(Exception):
    """Wrong options: reported as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        raise UsageError(message)


def main(argv: list[str] | None = None) -> int:
    try:
        args = _parse(argv)
        runs = _resolve(args)
        json_paths = [_report_path(args.json, config, len(runs) > 1) for config, _ in runs]
        sandbox.confinement()  # which confinement the children get, said once before any work
    except (UsageError, sandbox.SandboxUnavailable) as err:
        print(f"grader: {err}", file=sys.stderr)
        return 2
    # before any student code runs: the tools the checks execute, and what the judging processes read
    build.TOOLCHAIN = sandbox.Toolchain.resolve()
    sandbox.become_subreaper()
    watch = sandbox.Watch(build.TOOLCHAIN)
    status = 0
    for (config, steps), json_path in zip(runs, json_paths):
        results = _grade_steps(config, steps, watch)
        # one verdict, taken after the last check, for the terminal, the JSON report and the exit status
        report.print_report(config, results)
        report.write_json(config, results, json_path)
        print(f"report written to {json_path}")
        if not all(result.passed for result in results):
            status = 1
    return status


def _grade_steps(config: Config, steps: list, watch: sandbox.Watch) -> list[StepResult]:
    """Each step's result; a change to the files the grader relies on fails the step that made it and ends
    the run. The last check comes after every process the steps started is gone: a change that lands
    late (a process the student's file left behind) fails the last step graded, before anything is reported."""
    results: list[StepResult] = []
    try:
        for spec in steps:
            print(f"grading {config.track} step {spec.number} ...", file=sys.stderr, flush=True)
            results.append(grade_step(config, spec, watch))
    except sandbox.Tampered as err:
        return [*results, tampered_result(config, steps[len(results)], str(err))]
    finally:
        sandbox.sweep()
    try:
        sandbox.check_unchanged(watch, f"grading step {steps[-1].number}")
    except sandbox.Tampered as err:
        results[-1] = tampered_result(config, steps[-1], f"{err}; graded as failed")
    return results


def _report_path(given: str | None, config: Config, several: bool) -> Path:
    """The JSON report's path; when two tracks are graded in one run, each gets its own file."""
    default = REPO_ROOT / REPORTS / f"grade-{config.impl}-{config.track}-{config.arch}.json"
    if given is None:
        return writable_report_path(default)
    path = Path(given)
    return writable_report_path(path.with_name(f"{path.stem}-{config.track}{path.suffix}") if several else path)


def tampered_result(config: Config, spec, message: str) -> StepResult:
    result = StepResult(step=spec.number, file=str(build.step_file(config.impl_dir, config.track, spec)))
    result.build = "failed"
    result.problems.append(message + " (grading stopped; restore the course files, e.g. `git checkout -- .`)")
    return result


MAX_TIMEOUT_S = 3600.0
MAX_SEED = 2**64 - 1
MAX_INDEX = 2**31 - 1  # TIRx indexes buffers with int32
GPU_BYTES_PER_OUTPUT = 2 + 2 * 4 + 2 * 2  # two fp32 references, the kernel's and cuBLAS's fp16 outputs (timing)


def writable_report_path(path: str | Path) -> Path:
    """The report path, refused before any work when it cannot be written or is a file of the course."""
    try:
        path = outputs.writable_file(path, "--json")
    except outputs.UnwritableOutput as err:
        raise UsageError(str(err)) from None
    course = REPO_ROOT.resolve()
    for named in {path, path.resolve()}:  # as given, and where its links lead
        if named.is_relative_to(course) and not named.is_relative_to(course / REPORTS):
            raise UsageError(f"--json {path} is inside the course's own files: write the report elsewhere "
                             f"(e.g. {REPORTS}/)")
    return path


REPORTS = "reports"  # the one folder of the course that takes reports


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = _Parser(prog="python -m grader", description="Grade the GEMM course's steps.")
    parser.add_argument("--step", default="all", help="1..12 or all (default: all)")
    parser.add_argument("--impl", default="steps", help="steps (yours, default) or solutions (the reference)")
    parser.add_argument("--track", default="auto", help="blackwell or hopper (default: the GPU's, else blackwell)")
    parser.add_argument("--arch", default="auto", help="auto, sm_100a, sm_103a or sm_90a")
    parser.add_argument("--shape", action="append", default=[], help="MxNxK to check instead of the step's shapes")
    parser.add_argument("--seed", help="seed for the random inputs and the drawn shape (default: a fresh one, printed)")
    parser.add_argument("--timeout", default=str(DEFAULT_TIMEOUT_S), help="seconds of GPU work per step")
    parser.add_argument("--json", help="where to write the JSON report (default: reports/grade-...json)")
    parser.add_argument("--instructor", action="store_true", help="hidden seed from GRADER_SEED, no solutions "
                        "reachable by the build, correctness re-checked after timing (also: GRADER_INSTRUCTOR=1)")
    return parser.parse_args(argv)


def _resolve(args: argparse.Namespace) -> list[tuple[Config, list]]:
    """One (config, steps) per track to grade: one track, or on a machine without a GPU and with
    TRACK=auto ARCH=auto, every track whose step files are filled in (see cpu_tracks)."""
    if args.impl not in ("steps", "solutions"):
        raise UsageError(f"--impl must be steps or solutions, not {args.impl!r}")
    gpu_name, gpu_arch, sm_count = detect_gpu()
    if gpu_arch is None and args.track == "auto" and args.arch == "auto":
        tracks, reason = cpu_tracks(args.step, REPO_ROOT / args.impl)
        if reason:
            print(f"grader: {reason}", file=sys.stderr)
    else:
        tracks = [resolve_arch_and_track(args.arch, args.track, gpu_name, gpu_arch)[1]]
    return [_resolve_track(args, track, gpu_name, gpu_arch, sm_count) for track in tracks]


def cpu_tracks(step: str, impl_dir: Path) -> tuple[list[str], str | None]:
    """Without a GPU to pick the track: the tracks whose step files are filled in (no `todo(` call
    left: the file is read, never imported), and a line that says which was chosen and why."""
    filled = [track for track in TRACKS if _filled(step, impl_dir, track)]
    if len(filled) == 1:
        other = next(track for track in TRACKS if track != filled[0])
        return filled, (f"no GPU and TRACK=auto: grading the {filled[0]} track, the one whose step file"
                        f"{'s are' if step == 'all' else ' is'} filled in (TRACK={other} grades the other)")
    if len(filled) == len(TRACKS):
        return list(TRACKS), "no GPU and TRACK=auto: both tracks are filled in, grading both (TRACK=... picks one)"
    return [DEFAULT_TRACK], None


_TODO_CALL = re.compile(r"^[^#\n]*\btodo\(", re.MULTILINE)


def _filled(step: str, impl_dir: Path, track: str) -> bool:
    """The step's file (or, for all, any step file) exists and calls todo() nowhere."""
    specs = STEPS[track]
    numbers = list(specs) if step == "all" else [int(step)] if ASCII_NUMBER.fullmatch(step) and int(step) in specs else []
    files = [impl_dir / track / specs[number].file_name for number in numbers]
    return any(path.is_file() and not _TODO_CALL.search(path.read_text(errors="replace")) for path in files)


def _resolve_track(args: argparse.Namespace, track: str, gpu_name: str | None, gpu_arch: str | None,
                   sm_count: int) -> tuple[Config, list]:
    arch, track = resolve_arch_and_track(args.arch, track, gpu_name, gpu_arch)
    steps = select_steps(args.step, track, REPO_ROOT / args.impl / track)
    shapes = tuple(parse_shape(text) for text in args.shape) or None
    for spec in steps:
        for shape in shapes or ():
            problem = spec.shapes.violation(shape)
            if problem:
                raise UsageError(f"shape {format_shape(shape)} does not fit step {spec.number}: {problem}")
    for shape in shapes or ():
        check_size(shape, gpu_memory_bytes() if gpu_arch else None)
    timeout = parse_timeout(args.timeout)
    instructor = args.instructor or os.environ.get("GRADER_INSTRUCTOR") == "1"
    if instructor:
        if args.seed is not None:
            raise UsageError("--seed is not taken in instructor mode: the seed comes from GRADER_SEED")
        seed = parse_seed(os.environ["GRADER_SEED"], "GRADER_SEED") if "GRADER_SEED" in os.environ else secrets.randbits(63)
    else:
        seed = parse_seed(args.seed, "--seed") if args.seed is not None else secrets.randbelow(2**31)
    config = Config(
        impl=args.impl,
        impl_dir=REPO_ROOT / args.impl,
        solutions_dir=REPO_ROOT / "solutions",
        track=track,
        arch=arch,
        gpu_name=gpu_name if gpu_arch else None,
        sm_count=sm_count if gpu_arch else DEFAULT_SM_COUNT[arch],
        seed=seed,
        timeout_s=timeout,
        shapes=shapes,
        instructor=instructor,
    )
    return config, steps


def detect_gpu() -> tuple[str | None, str | None, int]:
    """(name, arch it runs or None if the course has no track for it, SM count); no GPU: (None, None, 0)."""
    if not any(Path("/dev").glob("nvidia[0-9]*")) and not Path("/dev/dxg").exists():
        return None, None, 0  # no GPU's device node (WSL's is dxg): not worth importing torch to hear it
    import torch

    if not torch.cuda.is_available():
        return None, None, 0
    properties = torch.cuda.get_device_properties(0)
    arch = ARCH_OF_CAPABILITY.get((properties.major, properties.minor))
    if arch is None:
        print(
            f"grader: {properties.name} (compute capability {properties.major}.{properties.minor}) cannot run "
            "this course's kernels (Hopper sm_90 or Blackwell sm_100/sm_103 needed): building only",
            file=sys.stderr,
        )
    return properties.name, arch, properties.multi_processor_count


def resolve_arch_and_track(arch: str, track: str, gpu_name: str | None, gpu_arch: str | None) -> tuple[str, str]:
    known_archs = [a for t in TRACKS for a in TRACK_ARCHS[t]]
    if arch != "auto" and arch not in known_archs:
        raise UsageError(f"unknown arch {arch!r}: choose auto, {', '.join(known_archs)}")
    if track != "auto" and track not in TRACKS:
        raise UsageError(f"unknown track {track!r}: choose blackwell or hopper")
    if gpu_arch and arch not in ("auto", gpu_arch):
        raise UsageError(f"the {gpu_name} here runs {gpu_arch} kernels, not {arch}: use ARCH=auto or ARCH={gpu_arch}")
    if arch == "auto":
        arch = gpu_arch or TRACK_ARCHS[DEFAULT_TRACK if track == "auto" else track][0]
    track_of_arch = next(t for t in TRACKS if arch in TRACK_ARCHS[t])
    if track not in ("auto", track_of_arch):
        raise UsageError(f"track {track} builds for {', '.join(TRACK_ARCHS[track])}, not {arch}")
    return arch, track_of_arch


def select_steps(text: str, track: str, track_dir: Path) -> list:
    specs = STEPS[track]
    if text == "all":
        present = [spec for spec in specs.values() if (track_dir / spec.file_name).exists()]
        if not present:
            raise UsageError(f"no step files in {track_dir}")
        return present
    if not ASCII_NUMBER.fullmatch(text) or not 1 <= int(text) <= max(specs):
        raise UsageError(f"--step must be a number from 1 to {max(specs)} or 'all', not {text!r}")
    if int(text) not in specs:
        raise UsageError(f"step {text} is not part of the course yet (steps {min(specs)}-{max(specs)} are)")
    return [specs[int(text)]]


def parse_shape(text: str) -> Shape:
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(ASCII_NUMBER.fullmatch(part) for part in parts):
        raise UsageError(f"--shape must look like 256x512x128 (M x N x K), not {text!r}")
    return tuple(int(part) for part in parts)



def one_run_shape(spec: StepSpec, shape_text: str | None) -> Shape:
    """The shape a one-run command (debug, run_kernel) uses: the one given, else the step's second
    correctness shape (a few tiles); a shape the step cannot run at is a usage error."""
    shapes = spec.correctness_shapes
    shape = parse_shape(shape_text) if shape_text else shapes[min(1, len(shapes) - 1)]
    if spec.shapes.violation(shape):
        raise UsageError(f"step {spec.number} cannot run at {format_shape(shape)}: {spec.shapes.violation(shape)}")
    return shape

def check_size(shape: Shape, gpu_bytes: int | None) -> None:
    """Shapes TIRx cannot index (int32) or the GPU cannot hold are the option's fault, not the kernel's."""
    m, n, k = shape
    if max(m * k, n * k, m * n) > MAX_INDEX:
        raise UsageError(f"shape {format_shape(shape)} too large: a matrix of it has more than 2^31 - 1 elements "
                         "(the kernels index with 32-bit integers)")
    needed = 2 * 2 * (m * k + n * k) + GPU_BYTES_PER_OUTPUT * m * n  # two input sets while timing
    if gpu_bytes is not None and needed > gpu_bytes:
        raise UsageError(f"shape {format_shape(shape)} too large: needs {needed / 2**30:.1f} GiB, "
                         f"the GPU has {gpu_bytes / 2**30:.1f} GiB")


def gpu_memory_bytes() -> int:
    import torch

    return torch.cuda.get_device_properties(0).total_memory


def parse_timeout(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not ASCII_DECIMAL.fullmatch(text) or not math.isfinite(value) or not 0 < value <= MAX_TIMEOUT_S:
        raise UsageError(f"--timeout must be a number of seconds above 0 and at most {MAX_TIMEOUT_S:.0f}, not {text!r}")
    return value


def parse_seed(text: str, what: str) -> int:
    if not ASCII_NUMBER.fullmatch(text) or int(text) > MAX_SEED:
        raise UsageError(f"{what} must be a whole number from 0 to 2^64 - 1, not {text!r}")
    return int(text)


ASCII_NUMBER = re.compile(r"[0-9]+")
ASCII_DECIMAL = re.compile(r"[0-9]+(\.[0-9]*)?|\.[0-9]+")
