"""The files a command writes, checked before it does any work: a path that cannot take the output is the
option's fault (one line, exit status 2), not a traceback after minutes of building and timing."""

from __future__ import annotations

import stat
import tempfile
from pathlib import Path


class UnwritableOutput(Exception):
    """The named output cannot be written: the message is one line."""


def writable_file(given: str | Path, option: str) -> Path:
    """The absolute path of an output file that can be written, whole (a new file beside it, then renamed):
    an existing regular file that opens for writing, or a new one; folders it lacks are made at write
    time. Refused: a folder, a device, a pipe or a special file such as /proc/version, a path under a
    file, and a folder that takes no new file (read-only, or on a read-only file system)."""
    path = Path(given).absolute()
    if path.is_dir():
        raise UnwritableOutput(f"{option} {path} is a folder: name a file")
    if path.exists():
        if not stat.S_ISREG(path.stat().st_mode):
            raise UnwritableOutput(f"{option} {path} is not a regular file")
        try:
            with open(path, "ab"):  # append mode: the file's content is not touched
                pass
        except OSError as err:
            raise UnwritableOutput(f"{option} {path} cannot be written ({err.strerror or err})") from None
    folder = next(p for p in path.parents if p.exists())
    if not folder.is_dir():
        raise UnwritableOutput(f"{option} {path}: {folder} is a file, not a folder")
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:
        raise UnwritableOutput(f"{option} {path} cannot be written: {folder} takes no new file "
                               f"({err.strerror or err})") from None
    return path
