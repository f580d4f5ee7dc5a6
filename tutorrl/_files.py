"""File-system primitives shared by everything that writes (bundles, run records, evidence).

Each writer needs the same two guarantees -- a file that already exists is
never overwritten, and what was written survives a crash before it is
published by a rename or link -- so they live here once.
"""

from __future__ import annotations

import errno
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the compile path writes with os alone: pathlib's import is a cold start's cost
    from pathlib import Path


def write_new(path: Path, data: bytes, mode: int = 0o644, *, durable: bool = True) -> None:
    """Create ``path`` (refusing an existing file), write all of ``data``, and
    (``durable``) fsync it.

    The mode is set explicitly afterwards so the umask cannot make two writers
    of the same content produce different files.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if durable:
            os.fsync(fd)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    """Make the entries of folder ``path`` (a rename, a new file) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class NotARegularFile(OSError):
    """An output path that exists and is not a regular file (``strerror`` says what it is)."""


def replace_atomic(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all (a temporary file beside it, then a rename), for files meant to change.

    Only a regular file is replaced. The rename would swap a device node or a
    FIFO for a file (run as root, ``-o /dev/null`` replaced the machine's), and
    a symbolic link for a file as well: the link is gone and what it pointed
    to unwritten -- following it instead would write wherever it points (into
    a bundle, say), which no caller can check beforehand. Both are refused
    with :class:`NotARegularFile`, an ``OSError`` whose ``strerror`` says why,
    so every caller's ``except OSError`` reports it as it does any other.
    """
    import stat
    import tempfile
    from pathlib import Path

    path = Path(path)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        pass
    else:
        if not stat.S_ISREG(mode):
            from tutorrl._read import file_kind

            kind = "a symbolic link" if stat.S_ISLNK(mode) else file_kind(mode)
            raise NotARegularFile(errno.EEXIST, f"it exists and is {kind}, not a regular file; only a regular "
                                  "file is replaced (give a new path, or remove it first)", str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def display_path(path: str | Path) -> str:
    """``path`` relative to the current folder when it is below it, else as given."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return str(path)
    return str(path) if rel.startswith("..") else rel
