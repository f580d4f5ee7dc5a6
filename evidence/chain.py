"""The append-only, hash-chained evidence directory.

`evidence/000001.json`, `000002.json`, ...: record n names the sha256 of record
n-1's bytes, and `HEAD` names the newest, so a record removed (even the last),
reordered or edited breaks a link that `verify` checks.

Concurrency without a lock around the slow part: each writer builds its record
against the newest record it sees, writes it to a private temp file (O_EXCL,
fsync) and publishes it with `link()`, which fails with EEXIST if another
writer took that sequence number first -- then it re-reads the new
predecessor and retries. `link()` makes a record appear complete or not at all,
so a reader never chains to a half-written predecessor (an O_EXCL create of the
final name would be visible while still empty). Only the tiny HEAD update is
serialised, by `flock`, so HEAD never moves backwards.
"""

from __future__ import annotations

import fcntl
import os
import re
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

from tutorrl._files import fsync_dir, write_new
from tutorrl.evidence.schema import ChainLink, Head, Statement
from tutorrl.evidence.statement import RecordFormatError, canonical, decode_head, digest

RECORD = re.compile(r"(\d{6,})\.json")
HEAD_NAME = "HEAD"
_LOCK_NAME = ".lock"
MAX_ATTEMPTS = 10_000


def record_name(sequence: int) -> str:
    return f"{sequence:06d}.json"


def record_files(evdir: Path) -> dict[int, Path]:
    out: dict[int, Path] = {}
    if evdir.is_dir():
        for p in evdir.iterdir():
            m = RECORD.fullmatch(p.name)
            if m and p.name == record_name(int(m.group(1))):
                out[int(m.group(1))] = p
    return out


def _tail(evdir: Path) -> tuple[int, str | None]:
    files = record_files(evdir)
    if not files:
        return 0, None
    last = max(files)
    return last, digest(files[last].read_bytes())


def _write_private(evdir: Path, data: bytes) -> Path:
    tmp = evdir / f".tmp-{os.getpid()}-{threading.get_ident()}-{uuid.uuid4().hex}"
    write_new(tmp, data)
    return tmp


def append(evdir: Path, build: Callable[[ChainLink], Statement]) -> Path:
    """Append one record built for the link it will occupy; returns its path."""
    created = not evdir.exists()
    evdir.mkdir(parents=True, exist_ok=True)
    if created:
        fsync_dir(evdir.parent)
    for _ in range(MAX_ATTEMPTS):
        last, prev = _tail(evdir)
        link = ChainLink(sequence=last + 1, previous=prev)
        data = canonical(build(link))
        final = evdir / record_name(link.sequence)
        tmp = _write_private(evdir, data)
        try:
            os.link(tmp, final)
        except FileExistsError:
            continue  # another writer took this number: chain to its record instead
        finally:
            tmp.unlink()
        fsync_dir(evdir)
        _advance_head(evdir)
        return final
    raise RuntimeError(f"could not append to {evdir} after {MAX_ATTEMPTS} attempts")


def _advance_head(evdir: Path) -> None:
    fd = os.open(evdir / _LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        last, last_digest = _tail(evdir)
        head_path = evdir / HEAD_NAME
        try:
            current = decode_head(head_path.read_bytes()).sequence
        except (FileNotFoundError, RecordFormatError):
            current = 0
        if last > current and last_digest is not None:
            tmp = _write_private(evdir, canonical(Head(sequence=last, digest=last_digest)))
            os.replace(tmp, head_path)
            fsync_dir(evdir)
    finally:
        os.close(fd)  # releases the flock
