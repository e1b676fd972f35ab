"""The submissions folder: a Gradescope export or a folder of per-student zips or folders, each submission
checked and unpacked into OUT/students/<id>/submission/.

A Gradescope export is a folder with submission_metadata.yml, which maps each submission's folder
(`submission_<n>`) to its `:submitters` (`:name`, `:sid`, `:email`) and `:created_at`; the student's id is
the first submitter's SID. Otherwise each zip (`<id>.zip`) or folder (`<id>/`) in the folder is one student.

A submission is refused, for that student alone and in one line, when it holds an absolute path, a `..`, a link
or anything but plain files and folders, a file over MAX_FILE_BYTES, more than MAX_TOTAL_BYTES or MAX_FILES in
all, or is not a readable zip. Nothing of a refused archive is written.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import yaml

from grader.commands.grade_class.store import Submission, Submitter, student_dir

GRADESCOPE_METADATA = "submission_metadata.yml"
MAX_FILE_BYTES = 8 << 20  # a step file is tens of KiB
MAX_TOTAL_BYTES = 64 << 20
MAX_FILES = 2000


class BadSubmissions(Exception):
    """The submissions folder as a whole cannot be read (one line; exit status 2)."""


class Refused(Exception):
    """One submission cannot be taken, in one line."""


@dataclass(frozen=True)
class Found:
    id: str
    source: Path  # a zip or a folder
    submitters: list[Submitter]
    created_at: str = ""


def find(folder: Path) -> list[Found]:
    """The submissions in `folder`, each with a distinct id made of letters, digits, '.', '_' and '-'."""
    if not folder.is_dir():
        raise BadSubmissions(f"the submissions folder {folder} is not a folder")
    metadata = folder / GRADESCOPE_METADATA
    found = _gradescope(folder, metadata) if metadata.is_file() else _per_student(folder)
    if not found:
        raise BadSubmissions(f"no submissions in {folder}: expected a Gradescope export ({GRADESCOPE_METADATA} and "
                             "its submission folders) or one zip or folder per student")
    taken: set[str] = set()
    distinct = []
    for entry in found:
        student, suffix = entry.id, 2
        while student in taken:  # two submissions with one SID (or one name once cleaned): both are graded
            student, suffix = f"{entry.id}-{suffix}", suffix + 1
        taken.add(student)
        distinct.append(Found(student, entry.source, entry.submitters, entry.created_at))
    return distinct


def _gradescope(folder: Path, metadata: Path) -> list[Found]:
    try:
        entries = yaml.safe_load(metadata.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise BadSubmissions(f"cannot read {metadata}: {' '.join(str(err).split())[:200]}") from None
    if not isinstance(entries, dict):
        raise BadSubmissions(f"{metadata} is not a Gradescope export's metadata (a map of submission folders)")
    found = []
    for name, entry in sorted(entries.items(), key=lambda item: str(item[0])):
        entry = entry if isinstance(entry, dict) else {}
        people = entry.get(":submitters") if isinstance(entry.get(":submitters"), list) else []
        submitters = [Submitter(str(p.get(":name") or ""), str(p.get(":sid") or ""), str(p.get(":email") or ""))
                      for p in people if isinstance(p, dict)]
        sid = next((s.sid for s in submitters if s.sid), "")
        found.append(Found(_clean(sid) or _clean(str(name)), folder / str(name), submitters,
                           str(entry.get(":created_at") or "")))
    return found


def _per_student(folder: Path) -> list[Found]:
    found = []
    for path in sorted(folder.iterdir()):
        if path.name.startswith("."):
            continue
        if path.is_symlink() or path.is_dir() or path.suffix.lower() == ".zip":
            name = path.name[:-4] if path.suffix.lower() == ".zip" else path.name
            found.append(Found(_clean(name) or "student", path, [Submitter("", name, "")]))
    return found


def _clean(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._")[:80]


def take(found: Found, out: Path) -> Submission:
    """Check and unpack one submission into OUT/students/<id>/submission (unless the same content is there);
    a refused one comes back with `refused` set and nothing unpacked."""
    try:
        files = _read_zip(found.source) if found.source.suffix.lower() == ".zip" else _read_folder(found.source)
    except Refused as err:
        return Submission(found.id, str(found.source), found.submitters, _archive_hash(found.source), str(err),
                          found.created_at)
    content = _content_hash(files)
    staged = student_dir(out, found.id) / "submission"
    hash_file = student_dir(out, found.id) / ".submission.sha256"
    if not (staged.is_dir() and hash_file.is_file() and hash_file.read_text() == content):
        _stage(files, staged)
        hash_file.write_text(content)
    return Submission(found.id, str(found.source), found.submitters, content, "", found.created_at)


def _read_zip(path: Path) -> dict[str, bytes]:
    """The archive's files. zipfile never yields more of an entry than its declared size (it stops there and checks
    the CRC), so the declared sizes bound what is unpacked: they are checked before anything is read."""
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
            if len(infos) > MAX_FILES:
                raise Refused(f"the archive holds {len(infos)} entries (at most {MAX_FILES} are taken)")
            for info in infos:
                _safe_name(info.filename)
                kind = stat.S_IFMT(info.external_attr >> 16)
                if kind == stat.S_IFLNK:
                    raise Refused(f"the archive holds a link: {info.filename}")
                if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
                    raise Refused(f"the archive holds {info.filename}, which is not a plain file")
                if info.flag_bits & 0x1:
                    raise Refused(f"the archive holds an encrypted file: {info.filename}")
                if info.file_size > MAX_FILE_BYTES:
                    raise Refused(f"the archive holds a huge file: {info.filename} ({info.file_size} bytes unpacked, "
                                  f"at most {MAX_FILE_BYTES} taken)")
            if sum(info.file_size for info in infos) > MAX_TOTAL_BYTES:
                raise Refused(f"the archive unpacks to more than {MAX_TOTAL_BYTES} bytes")
            return {_safe_name(info.filename): archive.read(info) for info in infos if not info.is_dir()}
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, EOFError, OSError) as err:
        raise Refused(f"not a readable zip archive ({' '.join(str(err).split())[:120]})") from None


def _safe_name(name: str) -> str:
    """The entry's path inside the submission; refused: absolute, with a drive, with `..`, or empty."""
    if name.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", name):
        raise Refused(f"the archive holds an absolute path: {name}")
    parts = PurePosixPath(name.replace("\\", "/")).parts
    if ".." in parts:
        raise Refused(f"the archive holds a path out of its folder: {name}")
    if not parts:
        raise Refused(f"the archive holds an entry without a name: {name!r}")
    return "/".join(parts)


def _read_folder(folder: Path) -> dict[str, bytes]:
    if folder.is_symlink() or not folder.is_dir():
        raise Refused(f"{folder.name} is a link or missing, not a folder of files")
    files: dict[str, bytes] = {}
    total = 0
    for root, subfolders, names in os.walk(folder):  # os.walk does not enter linked folders: they are refused
        for name in sorted(subfolders + names):
            path = Path(root) / name
            relative = path.relative_to(folder).as_posix()
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                raise Refused(f"the submission holds a link: {relative}")
            if stat.S_ISDIR(mode):
                continue
            if not stat.S_ISREG(mode):
                raise Refused(f"the submission holds {relative}, which is not a plain file")
            size = path.lstat().st_size
            if size > MAX_FILE_BYTES:
                raise Refused(f"the submission holds a huge file: {relative} ({size} bytes, at most "
                              f"{MAX_FILE_BYTES} taken)")
            total += size
            if total > MAX_TOTAL_BYTES or len(files) >= MAX_FILES:
                raise Refused(f"the submission holds more than {MAX_TOTAL_BYTES} bytes or {MAX_FILES} files")
            files[relative] = path.read_bytes()
    return files


def _content_hash(files: dict[str, bytes]) -> str:
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(f"{name}\0{hashlib.sha256(files[name]).hexdigest()}\0".encode())
    return digest.hexdigest()


def _archive_hash(path: Path) -> str:
    """A refused submission's hash: its archive's bytes, so that a corrected upload is taken again."""
    if not path.is_file():
        return hashlib.sha256(str(path).encode()).hexdigest()
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _stage(files: dict[str, bytes], staged: Path) -> None:
    """Unpack into a new folder beside `staged`, then put it in place of the old one."""
    fresh = staged.with_name(f".submission.part-{os.getpid()}")
    shutil.rmtree(fresh, ignore_errors=True)
    for name, data in files.items():
        path = fresh / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    shutil.rmtree(staged, ignore_errors=True)
    os.replace(fresh, staged)
