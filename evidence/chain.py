"""The append-only, hash-chained evidence directory.

`evidence/000001.json`, `000002.json`, ...: record n names the sha256 of record
n-1's bytes, and `HEAD` names the newest, so a record removed (even the last),
reordered or edited breaks a link that `verify` checks. Each record is a DSSE
envelope (`statement.encode_record`), signed when a key is configured
(`sign.py`); the link is over the envelope's bytes, signatures included. The
links alone prove consistency, not authorship or completeness: what signing
and anchors add is in docs/evidence.md.

Concurrency: the slow part (hashing a checkpoint) happens before `append` is
called; publishing -- reading the tail, building the record against it,
`link()`-ing it into place and advancing HEAD -- happens under an exclusive
`flock` on `evidence/.lock`. That keeps the instant of publishing serial and,
as important, lets `verify` take the same lock shared and see HEAD and the
record list as one consistent snapshot: without it, a verify racing a writer
could list the records before a new one and read HEAD after it, and report a
removal that never happened. `link()` from a private temp file still makes a
record appear complete or not at all for readers that take no lock.

Every read goes through `tutorrl._read` (regular files only, no symlinks, size
limits), and the directory itself must be a real directory inside the bundle:
a symlinked `evidence/` would put records somewhere `verify` cannot vouch for.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import stat
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from tutorrl._files import fsync_dir, write_new
from tutorrl._read import ReadError, file_kind, read_file
from tutorrl.contract import EVIDENCE_HEAD as HEAD_NAME
from tutorrl.contract import RECORD_DIGITS, RECORD_PATTERN
from tutorrl.errors import ChainError  # its home; importable from here too
from tutorrl.evidence.schema import ChainLink, Head, Statement
from tutorrl.evidence.statement import RecordFormatError, canonical, decode_head, digest, encode_record, is_signed

RECORD = re.compile(RECORD_PATTERN)
LOCK_NAME = ".lock"
# What a writer's private temp file is called (see `_write_private`); left behind only by a crash.
TEMP = re.compile(r"\.tmp-\d+-\d+-[0-9a-f]{32}")
# A record holds one digest per file and per tensor: tens of MB for the largest
# models. HEAD is one small object.
MAX_RECORD = 64 * 1024 * 1024
MAX_HEAD = 4096
# How long a reader or writer waits for the lock before saying so (a writer
# holds it only for the instant of publishing).
LOCK_WAIT_S = 60.0


def record_name(sequence: int) -> str:
    return f"{sequence:0{RECORD_DIGITS}d}.json"


def record_files(evdir: Path) -> dict[int, Path]:
    """Entries named like records (`NNNNNN.json`), by sequence; not yet opened or checked."""
    out: dict[int, Path] = {}
    if evdir.is_dir() and not evdir.is_symlink():
        for p in evdir.iterdir():
            m = RECORD.fullmatch(p.name)
            if m and p.name == record_name(int(m.group(1))):
                out[int(m.group(1))] = p
    return out


def read_record(path: Path) -> bytes:
    """A record's bytes (regular file, not a symlink, at most MAX_RECORD); ReadError otherwise."""
    return read_file(path, MAX_RECORD, name=path.name)


def read_head(evdir: Path) -> bytes | None:
    """HEAD's bytes, None when absent; ReadError when it is not a small regular file."""
    try:
        return read_file(evdir / HEAD_NAME, MAX_HEAD, name=HEAD_NAME)
    except FileNotFoundError:
        return None


def directory_problem(evdir: Path) -> str | None:
    """Why `evdir` cannot hold records (a symlink, not a directory); None when it can or is absent."""
    try:
        st = os.lstat(evdir)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return f"{evdir}: is a symlink; evidence must live inside the bundle, not be redirected out of it"
    if not stat.S_ISDIR(st.st_mode):
        return f"{evdir}: is {file_kind(st.st_mode)}, not a directory"
    return None


@contextlib.contextmanager
def chain_lock(evdir: Path, *, exclusive: bool) -> Iterator[bool]:
    """Hold `evidence/.lock`: exclusive to publish, shared to read a consistent snapshot.

    A reader does not create the lock file (verify must work on a read-only
    copy); without one there is no writer of this protocol to wait for, and
    the reader gets False: it must look again, under the lock, if a first
    writer creates the file while it reads (`verify._chain_problems`).
    """
    flags = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | (os.O_RDWR | os.O_CREAT if exclusive else os.O_RDONLY)
    try:
        fd = os.open(evdir / LOCK_NAME, flags, 0o644)
    except FileNotFoundError:
        yield False
        return
    except OSError as exc:
        raise ChainError(f"{evdir / LOCK_NAME}: cannot open the evidence lock ({exc.strerror}; a symlink?)") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ChainError(f"{evdir / LOCK_NAME}: the evidence lock is not a regular file")
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ChainError(f"{evdir}: another process has held the evidence lock for "
                                     f"{LOCK_WAIT_S:.0f} s; try again when it is done") from None
                time.sleep(0.01)
        yield True
    finally:
        os.close(fd)  # releases the flock


def _tail(evdir: Path) -> tuple[int, str | None]:
    last, data = _tail_bytes(evdir)
    return last, (digest(data) if data is not None else None)


def _tail_bytes(evdir: Path) -> tuple[int, bytes | None]:
    files = record_files(evdir)
    if not files:
        return 0, None
    last = max(files)
    # Chaining past a gap would bless it, and a crafted huge sequence number
    # would be carried into every later record: the count of files present
    # bounds what a sound chain can hold.
    if last != len(files):
        raise ChainError(f"{evdir}: the newest record is {record_name(last)} but only {len(files)} record(s) "
                         "exist; the chain is broken (run `tutorrl verify`), nothing appended")
    try:
        return last, read_record(files[last])
    except (ReadError, FileNotFoundError) as exc:
        raise ChainError(f"{evdir}: cannot chain to the newest record: {exc}") from None


def _write_private(evdir: Path, data: bytes) -> Path:
    # 0600 from creation: records and HEAD are the run owner's alone, as the seed's
    # training loop writes its publication evidence, and link() keeps the mode.
    tmp = evdir / f".tmp-{os.getpid()}-{threading.get_ident()}-{uuid.uuid4().hex}"
    write_new(tmp, data, 0o600)
    return tmp


def append(evdir: Path, build: Callable[[ChainLink], Statement], signers: Sequence = ()) -> Path:
    """Append one record built for the link it will occupy, signed by `signers`; returns its path.

    Without a signer, refuses a chain whose newest record is signed: a key
    missing from one process (a trainer on a node without it) must not make
    an unsigned record that verifies like a forged one; the post-run scan, run
    where the key is, records that checkpoint instead.
    """
    evdir = Path(evdir)
    created = not os.path.lexists(evdir)
    if created:
        evdir.mkdir(parents=True, exist_ok=True)
        fsync_dir(evdir.parent)
    problem = directory_problem(evdir)
    if problem:
        raise ChainError(problem)
    with chain_lock(evdir, exclusive=True):
        # Under the lock nobody else publishes, so the tail read here is the
        # predecessor; EEXIST can only come from a writer that takes no lock.
        for _ in range(100):
            last, tail = _tail_bytes(evdir)
            prev = digest(tail) if tail is not None else None
            if not signers and tail is not None and is_signed(tail):
                raise ChainError(f"{evdir}: {record_name(last)} is signed but no signing key was found here "
                                 f"(TUTORRL_EVIDENCE_KEY, or the default key file); nothing appended: a signed "
                                 "chain is never continued unsigned")
            link = ChainLink(sequence=last + 1, previous=prev)
            final = evdir / record_name(link.sequence)
            tmp = _write_private(evdir, encode_record(build(link), signers))
            try:
                os.link(tmp, final)
            except FileExistsError:
                continue
            finally:
                tmp.unlink()
            fsync_dir(evdir)
            _advance_head(evdir)
            return final
    raise ChainError(f"could not append to {evdir}: another writer kept taking the next number")


def _advance_head(evdir: Path) -> None:
    """Point HEAD at the newest record; the caller holds the lock, so HEAD never moves backwards."""
    last, last_digest = _tail(evdir)
    try:
        raw = read_head(evdir)
        current = decode_head(raw).sequence if raw is not None else 0
    except (ReadError, RecordFormatError):
        current = 0  # an unreadable HEAD is replaced by a correct one; verify reports the records
    if last > current and last_digest is not None:
        tmp = _write_private(evdir, canonical(Head(sequence=last, digest=last_digest)))
        try:
            os.replace(tmp, evdir / HEAD_NAME)
        except OSError as exc:  # HEAD made a directory, say
            tmp.unlink()
            raise ChainError(f"{evdir}: {record_name(last)} was written but HEAD could not be advanced "
                             f"({exc.strerror}); run `tutorrl verify`") from None
        fsync_dir(evdir)
