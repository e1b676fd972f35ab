"""A generated class for `make grade-class`, in both layouts, each student with Hopper steps 1 and 2:

DIR/export/  a Gradescope export (submission_metadata.yml, a folder per submission): a hang at import (first, so
             that it holds one worker while the others grade the rest), a group handing in the reference solutions,
             a wrong kernel (step 2 runs one K tile), a file that tampers with the grader, a folder with a link;
DIR/zips/    per-student zips and folders: the reference solutions, a crash at import, archives with `..`, a link,
             an absolute path and a huge file, a kernel whose wgmma runs on one warp (faults on a GPU; the static
             checks reject it), only the other track's files, step 2 not handed in;
             with --out-of-bounds also one whose step 1 stores 1 GiB past D: it builds and passes the static checks,
             and on a GPU faults with an illegal address (what makes the grade check the GPU before reusing it).

tests/test_grade_class.py grades it on the CPU; on a GPU machine: `python tests/sample_class.py DIR --out-of-bounds`.
"""

from __future__ import annotations

import stat
import sys
import zipfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the course's grader, when run as a script
from known_bad import REPO, VARIANTS  # noqa: E402

from grader.commands.grade_class import intake  # noqa: E402
from grader.core.steps import STEPS  # noqa: E402

TRACK = "hopper"
STEP_FILES = {n: STEPS[TRACK][n].file_name for n in (1, 2)}

HANG_AT_IMPORT = "\nimport time\ntime.sleep(3600)\n"
CRASH_AT_IMPORT = "\nraise RuntimeError('the student file crashed at import')\n"
# rewrites a file of the judging course copy (the build process's parent works there); the grade must catch it
TAMPER = ("\nimport os\nwith open(os.path.join(os.readlink(f'/proc/{os.getppid()}/cwd'), 'grader', 'speed_floors.json'), "
          "'a') as floors:\n    floors.write(' ')\n")
STORE_ROW = "D[m_st + acc_row(h, warp_id, lane_id, i)"
OUT_OF_BOUNDS_ROW = "D[m_st + (1 << 22) + acc_row(h, warp_id, lane_id, i)"  # 2^22 rows of 128 fp16: 1 GiB past D


def solution(step: int) -> str:
    return (REPO / "solutions" / TRACK / STEP_FILES[step]).read_text()


def variant(name: str) -> str:
    return next(v for v in VARIANTS if v.name == name).source()


def both_steps() -> dict[int, str]:
    return {1: solution(1), 2: solution(2)}


def export_submissions() -> dict[str, tuple[list[tuple[str, str, str]], dict[str, str]]]:
    """Each submission folder: its submitters (name, SID, email) and its files."""
    return {
        "submission_100": ([("Dana Dix", "dana", "dana@uni.edu")],  # a hang at import
                           {STEP_FILES[1]: solution(1) + HANG_AT_IMPORT, STEP_FILES[2]: solution(2)}),
        "submission_102": ([("Bob Beck", "bob", "bob@uni.edu"), ("Bea Bell", "bea", "bea@uni.edu")],  # a group
                           {f"hw/steps/{TRACK}/{STEP_FILES[n]}": s for n, s in both_steps().items()}),
        "submission_103": ([("Carl Cole", "carl", "carl@uni.edu")],  # a wrong kernel: one K tile
                           {STEP_FILES[1]: solution(1), STEP_FILES[2]: variant("hopper-2-one-k-tile")}),
        "submission_105": ([("Eve Ennis", "eve", "eve@uni.edu")],  # tampering with the grader
                           {STEP_FILES[1]: solution(1) + TAMPER, STEP_FILES[2]: solution(2)}),
        "submission_106": ([("Fay Ford", "fay", "fay@uni.edu")], {STEP_FILES[1]: solution(1)}),  # + a link
    }


def write_zip(path: Path, files: dict[str, bytes], links: dict[str, str] | None = None) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        for name, target in (links or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, target)


def write_export(root: Path) -> Path:
    export = root / "export"
    metadata = {}
    for folder, (people, files) in export_submissions().items():
        for name, source in files.items():
            (export / folder / name).parent.mkdir(parents=True, exist_ok=True)
            (export / folder / name).write_text(source)
        metadata[folder] = {":submitters": [{":name": n, ":sid": s, ":email": e} for n, s, e in people],
                            ":created_at": "2026-11-20 10:00:00.000000000 -08:00", ":score": 0.0}
    (export / "submission_106" / "grader_link").symlink_to(REPO / "solutions")
    (export / intake.GRADESCOPE_METADATA).write_text(yaml.safe_dump(metadata))
    return export


def write_zips(root: Path, out_of_bounds: bool = False) -> Path:
    zips = root / "zips"
    zips.mkdir(parents=True)
    both = {STEP_FILES[n]: source.encode() for n, source in both_steps().items()}
    write_zip(zips / "gus.zip", both)
    write_zip(zips / "hal.zip", {**both, STEP_FILES[1]: (solution(1) + CRASH_AT_IMPORT).encode()})
    write_zip(zips / "ivy.zip", {**both, "../../evil.py": b"print('out of the folder')\n"})
    write_zip(zips / "jon.zip", {STEP_FILES[2]: both[STEP_FILES[2]]}, links={STEP_FILES[1]: "/etc/passwd"})
    write_zip(zips / "kim.zip", {**both, "/etc/cron.d/evil": b"* * * * * root true\n"})
    write_zip(zips / "lea.zip", {**both, "big.bin": bytes(intake.MAX_FILE_BYTES + 1)})  # small zipped, huge unpacked
    write_zip(zips / "max.zip", {**both, STEP_FILES[1]: variant("hopper-1-wgmma-on-one-warp").encode()})
    (zips / "ned" / "steps" / "blackwell").mkdir(parents=True)  # only the other track's files
    (zips / "ned" / "steps" / "blackwell" / STEPS["blackwell"][1].file_name).write_text(
        (REPO / "solutions" / "blackwell" / STEPS["blackwell"][1].file_name).read_text())
    (zips / "oli").mkdir()
    (zips / "oli" / STEP_FILES[1]).write_text(solution(1))  # step 2 not handed in: the skeleton is graded
    if out_of_bounds:
        assert STORE_ROW in solution(1), "the reference's store no longer reads as expected"
        write_zip(zips / "paz.zip", {**both, STEP_FILES[1]: solution(1).replace(STORE_ROW, OUT_OF_BOUNDS_ROW).encode()})
    return zips


def main(argv: list[str]) -> int:
    if not argv or argv[1:] not in ([], ["--out-of-bounds"]) or Path(argv[0]).exists():
        print("usage: python tests/sample_class.py NEW_DIR [--out-of-bounds]", file=sys.stderr)
        return 2
    root = Path(argv[0])
    print(write_export(root), write_zips(root, out_of_bounds=argv[1:] == ["--out-of-bounds"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
