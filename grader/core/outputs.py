"""The files a command writes, checked before it does any work: a path that cannot take the output is the
option's fault (one line, exit status 2), not a traceback after minutes of building and timing."""

from __future__ import annotations

import stat
import tempfile
from pathlib import Path


class UnwritableOutput(Exception):
    """The named output cannot be written: the message is one line."""


def writable_file(given: str | Path, option: str) -> Path:
    """The absolute path of an output file that can be written: an existing regular file that opens for
    writing, or a new file whose nearest existing folder takes a new file (missing folders are made at
    write time). Refused: a folder, a device, a pipe or a special file such as /proc/version, a path
    under a file, and a folder that is read-only (or on a read-only file system)."""
    path = Path(given).absolute()
    if path.is_dir():
        raise UnwritableOutput(f"{option} {path} is a folder: name a file")
    existing = next(p for p in [path, *path.parents] if p.exists() or p.is_symlink())
    if existing == path:
        if not stat.S_ISREG(path.stat().st_mode):
            raise UnwritableOutput(f"{option} {path} is not a regular file")
        try:
            with open(path, "ab"):  # append mode: the file's content is not touched
                pass
        except OSError as err:
            raise UnwritableOutput(f"{option} {path} cannot be written ({err.strerror or err})") from None
        return path
    if not existing.is_dir():
        raise UnwritableOutput(f"{option} {path}: {existing} is a file, not a folder")
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as err:
        raise UnwritableOutput(f"{option} {path} cannot be written: {existing} takes no new file "
                               f"({err.strerror or err})") from None
    return path
