"""The Hopper known-bad variants of some steps through tests/test_known_bad_gpu.py on the GPU here, several at once.

    python3 experiments/every_shape/known_bad_gpu.py --steps 11,12 --part 1/2 --out /tmp/results

One grade of a variant takes one to three minutes, most of it on the CPU (the protocol checker's simulation runs in
one process), so the variants of `--part` are dealt to `--shards` pytest processes, each in its own copy of this
tree (the test keeps its record in the tree's reports/known-bad-gpu.json). Contention can slow a kernel, not make it
right or wrong; so a variant that came out slow or passed there, where neither is expected of it, one whose build ran
out of the judge's time, and every variant expected slow, are graded again alone afterwards, while the time left
allows (on an H200, 2026-12-02: 18 variants in 12 shards took 550 s, and three of their alone runs did not fit).
Writes OUT/known-bad-gpu.json (expected, observed, contended, the first problems) and prints one line per variant.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from known_bad import GPU_ONLY_VARIANTS, VARIANTS  # noqa: E402

TEST = "tests/test_known_bad_gpu.py::test_known_bad_hopper_kernel_on_the_gpu"
RECORD = Path("reports") / "known-bad-gpu.json"


def _copy_tree(target: Path) -> None:
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(REPO, target, ignore=shutil.ignore_patterns(".device", ".git", "reports", "__pycache__", ".venv"))


def _pytest(tree: Path, names: list[str], log: Path, seconds: float) -> subprocess.Popen:
    return subprocess.Popen(
        ["timeout", str(int(seconds)), sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA",
         *[f"{TEST}[{name}]" for name in names]],
        cwd=tree, stdout=log.open("w"), stderr=subprocess.STDOUT)


def _records(tree: Path) -> dict:
    path = tree / RECORD
    return json.loads(path.read_text()) if path.is_file() else {}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", default="11,12", help="comma-separated step numbers")
    parser.add_argument("--part", default="1/1", help="I/N: the I-th of N equal parts of the variants (one per call)")
    parser.add_argument("--names", default="", help="comma-separated variant names: only these (of --steps)")
    parser.add_argument("--shards", type=int, default=4, help="pytest processes at once")
    parser.add_argument("--seconds", type=float, default=540, help="the whole run's limit")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    steps = {int(s) for s in args.steps.split(",")}
    index, parts = (int(x) for x in args.part.split("/"))
    variants = [v for v in (*VARIANTS, *GPU_ONLY_VARIANTS) if v.track == "hopper" and v.step in steps]
    if args.names:
        names = set(args.names.split(","))
        unknown = names - {v.name for v in variants}
        if unknown:
            parser.error(f"no Hopper variant of steps {args.steps} is named {', '.join(sorted(unknown))}")
        variants = [v for v in variants if v.name in names]
    variants = variants[index - 1::parts]
    expected = {v.name: v.gpu for v in variants}
    deadline = time.monotonic() + args.seconds
    args.out.mkdir(parents=True, exist_ok=True)

    shared = [v.name for v in variants if v.gpu != "slow"]
    trees = [Path(f"/tmp/known-bad-shard-{i}") for i in range(args.shards)]
    runs = []
    for i, tree in enumerate(trees):
        names = shared[i::args.shards]
        if names:
            _copy_tree(tree)
            runs.append((tree, _pytest(tree, names, args.out / f"shard-{i}.log", deadline - time.monotonic())))
    for _, run in runs:
        run.wait()
    results = {}
    for tree, _ in runs:
        for name, record in _records(tree).items():
            results[name] = {**record, "contended": True}

    def alone_again(name: str) -> bool:
        """What contention may have caused: slow or passed (a race may pass anywhere), a build out of time."""
        if name not in results:  # expected slow, or its shard ran out of time
            return True
        observed = results[name]["observed"]
        if observed == "build":  # twelve builds at once: one took the judge's 420 s (2026-12-02)
            return expected[name] != "build"
        return observed in ("slow", "passed") and expected[name] not in ("race", "redundant")

    alone = Path("/tmp/known-bad-alone")
    _copy_tree(alone)
    for name in filter(alone_again, expected):
        left = deadline - time.monotonic()
        if left < 60:
            break
        _pytest(alone, [name], args.out / f"alone-{name}.log", left).wait()
        record = _records(alone).get(name)
        if record is not None:
            results[name] = {**record, "contended": False}

    (args.out / "known-bad-gpu.json").write_text(json.dumps(results, indent=2))
    for name, gpu in expected.items():
        record = results.get(name)
        seen = "not run" if record is None else record["observed"] + (" (contended)" if record["contended"] else "")
        print(f"{name:55s} expected {gpu:9s} observed {seen}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
