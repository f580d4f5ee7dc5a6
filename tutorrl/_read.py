"""Bounded reading of bytes that someone else controls.

Evidence records, checkpoint metadata and HTTP answers are written by other
processes, other people or other machines. Every reader of them goes through
here, so each gets the same guarantees at once instead of one bug at a time:

* only a regular file is read: a symlink is refused (``O_NOFOLLOW``), and a
  FIFO, device or directory is named as such after ``fstat`` -- opening with
  ``O_NONBLOCK`` means a FIFO with no writer cannot hang the ``open``;
* never more than ``limit`` bytes are read, whatever the file claims or grows to;
* decoded JSON is at most ``MAX_DEPTH`` deep and holds no integer outside
  64 bits, so no later walk recurses without end and no count or sequence
  number read from it can drive unbounded work.

Every failure is a :class:`ReadError` whose message names the source and what
was wrong; callers turn it into a failed check or a ``TutorrlError``.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from pathlib import Path

import msgspec

MAX_DEPTH = 64
_INT_RANGE = range(-(2**63), 2**63)
_KINDS = {stat.S_IFDIR: "a directory", stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket",
          stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device"}


class ReadError(ValueError):
    """A source that could not be read within its limits; the message says which and why."""


def file_kind(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def _open_checked(path, label: str, follow: bool) -> tuple[int, os.stat_result]:
    """A descriptor of ``path`` and its stat, only if it is a regular file (and,
    unless ``follow``, not a symlink); ``FileNotFoundError`` passes through."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW))
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ReadError(f"{label}: is a symlink; not followed") from None
        raise ReadError(f"{label}: cannot read ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ReadError(f"{label}: is {file_kind(st.st_mode)}, not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_file(path: str | os.PathLike, limit: int, *, name: str | None = None, follow: bool = False) -> bytes:
    """All bytes of regular file ``path``, at most ``limit`` of them.

    Raises :class:`ReadError` for a symlink (unless ``follow``: a file the
    user named, not one found inside a tree), anything but a regular file, a
    file over ``limit``, and any ``OSError`` (``FileNotFoundError`` is passed
    through unchanged: "absent" is often a normal answer for the caller).
    """
    label = name or str(path)
    fd, st = _open_checked(path, label, follow)
    try:
        if st.st_size > limit:
            raise ReadError(f"{label}: {st.st_size} bytes, over the {limit}-byte limit")
        chunks, total = [], 0
        while total <= limit:  # the file may grow after fstat: stop one byte past the limit
            chunk = os.read(fd, min(limit + 1 - total, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limit:
            raise ReadError(f"{label}: grew past the {limit}-byte limit while read")
        return b"".join(chunks)
    except OSError as exc:
        raise ReadError(f"{label}: cannot read ({exc.strerror})") from None
    finally:
        os.close(fd)


def open_regular(path: str | os.PathLike, *, name: str | None = None):
    """``path`` opened for binary reading, only if it is a regular file and not a symlink.

    For readers that seek or read in pieces (a log's head and tail); they bound
    what they read themselves. ``FileNotFoundError`` passes through unchanged.
    """
    fd, _st = _open_checked(path, name or str(path), follow=False)
    return os.fdopen(fd, "rb")


_CHUNK = 1 << 16


def read_stream(stream, limit: int, *, name: str, within: float | None = None) -> bytes:
    """At most ``limit`` bytes from a file-like ``stream`` (an HTTP answer); more is an error.

    ``within``: seconds for the whole answer. A socket timeout bounds each read,
    not their sum: a server that sends a byte just inside it would hold the
    reader for as long as it likes.
    """
    deadline = None if within is None else time.monotonic() + within
    read = getattr(stream, "read1", None) or stream.read
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        if deadline is not None and time.monotonic() > deadline:
            raise ReadError(f"{name}: no complete answer within {within:.3g} s")
        chunk = read(min(_CHUNK, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > limit:
        raise ReadError(f"{name}: answer larger than the {limit}-byte limit")
    if deadline is not None and time.monotonic() > deadline:
        # The end came late: a connection cut at its deadline (`_http`) reads as an early end of data.
        raise ReadError(f"{name}: no complete answer within {within:.3g} s")
    return b"".join(chunks)


def check_tree(obj: object, *, name: str, max_depth: int = MAX_DEPTH) -> object:
    """``obj`` if its nesting is at most ``max_depth`` and its integers fit 64 bits.

    Iterative, so checking the depth cannot itself hit the recursion limit.
    """
    stack = [(obj, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > max_depth:
                raise ReadError(f"{name}: nested deeper than {max_depth} levels")
            values = item.values() if isinstance(item, dict) else item
            stack.extend((v, depth + 1) for v in values)
        elif type(item) is int and item not in _INT_RANGE:
            raise ReadError(f"{name}: integer {str(item)[:20]}... does not fit 64 bits")
    return obj


def decode_json(data: bytes, *, name: str, max_depth: int = MAX_DEPTH) -> object:
    """Untyped JSON from ``data``, bounded as :func:`check_tree` says; RFC 8259 only (no NaN)."""
    try:
        obj = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:  # ValidationError too: numbers out of any range
        raise ReadError(f"{name}: not JSON: {exc}") from None
    except RecursionError:  # msgspec recurses per level, bounded by the interpreter's limit
        raise ReadError(f"{name}: nested deeper than {max_depth} levels") from None
    return check_tree(obj, name=name, max_depth=max_depth)


def read_json(path: str | os.PathLike, limit: int, *, name: str | None = None) -> object:
    label = name or str(path)
    return decode_json(read_file(path, limit, name=label), name=label)


def inside(path: Path, root: Path) -> bool:
    """Whether ``path``, with every symlink resolved, is ``root`` or below it."""
    real, base = os.path.realpath(path), os.path.realpath(root)
    return real == base or real.startswith(base.rstrip(os.sep) + os.sep)
