"""File-system primitives shared by everything that writes (bundles, run records, evidence).

Each writer needs the same two guarantees -- a file that already exists is
never overwritten, and what was written survives a crash before it is
published by a rename or link -- so they live here once.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the compile path writes with os alone: pathlib costs a cold start ~3 ms
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


def replace_atomic(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all (a temporary file beside it, then a rename), for files meant to change."""
    import tempfile
    from pathlib import Path

    path = Path(path)
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
