"""Fast sha256 of checkpoint files and of byte ranges inside them.

SHA-256 is CPU-bound (~1 GB/s per core with SHA-NI) and hashlib releases the
GIL on large updates, so a thread pool scales with cores. Jobs are scheduled
largest first (LPT) so one huge file does not start last and leave cores idle;
each thread reuses one big buffer (`preadv`, no per-chunk allocation).

A job may name an already open descriptor instead of opening its path: the
in-run recorder opens every file of a checkpoint the moment verl reports the
save, so a checkpoint that verl's retention deletes while it waits is still
hashed as it was saved. Reads are positional (`os.preadv`), so several jobs
(the tensors of one big file) share one descriptor across threads safely.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from tutorrl._read import file_kind
from tutorrl.evidence.schema import FileManifest, FileResource, Serialization

CHUNK = 8 * 1024 * 1024
_local = threading.local()


def default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True, slots=True)
class Job:
    """Hash each (key, start, end) range of one file with its own sha256."""

    path: Path
    ranges: tuple[tuple[str, int, int], ...]
    # An open read-only descriptor of `path` to read instead (owned by the caller).
    fd: int | None = None

    @property
    def nbytes(self) -> int:
        return sum(end - start for _, start, end in self.ranges)


class Progress:
    """A one-line byte counter on stderr, drawn only when stderr is a terminal."""

    def __init__(self, total: int, label: str = "hashing", stream: TextIO | None = None, enabled: bool | None = None):
        self.total, self.label = total, label
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.done = 0
        self._lock = threading.Lock()
        self._start = time.monotonic()
        self._last = 0.0

    def add(self, n: int) -> None:
        if not self.enabled:
            return
        with self._lock:
            self.done += n
            now = time.monotonic()
            if now - self._last >= 0.2 or self.done >= self.total:
                self._last = now
                self._draw(now)

    def _draw(self, now: float) -> None:
        gib = 1024**3
        pct = 100.0 * self.done / self.total if self.total else 100.0
        rate = self.done / max(now - self._start, 1e-9) / 1e9
        self.stream.write(f"\r{self.label}: {self.done / gib:6.2f}/{self.total / gib:.2f} GiB {pct:5.1f}% {rate:5.2f} GB/s")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


def _buffer() -> memoryview:
    buf = getattr(_local, "buf", None)
    if buf is None:
        buf = _local.buf = memoryview(bytearray(CHUNK))
    return buf


def _run(job: Job, progress: Progress | None) -> dict[str, str]:
    buf = _buffer()
    out: dict[str, str] = {}
    fd = job.fd if job.fd is not None else os.open(job.path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        for key, start, end in job.ranges:
            h = hashlib.sha256()
            pos, left = start, end - start
            while left > 0:
                n = os.preadv(fd, [buf[: min(CHUNK, left)]], pos)
                if not n:
                    raise OSError(f"{job.path}: file shrank while hashing (expected {end - start} bytes at {start})")
                h.update(buf[:n])
                pos += n
                left -= n
                if progress is not None:
                    progress.add(n)
            out[key] = h.hexdigest()
    finally:
        if job.fd is None:
            os.close(fd)
    return out


# The nice value of hashing threads beside training (`hash_jobs(background=True)`):
# the lowest priority. A nice-0 trainer thread sharing a core with one gets
# 1024/(1024+15) of it from CFS; where nothing else runs the threads still get
# every core. The cost: beside other busy processes too (a loaded host) the
# hash waits for them, several times slower than at nice 0, while the trainer
# keeps most of its rate (benchmarks/bench_hash_beside.py; the figures in
# docs/architecture.md, "Measured"). A record that slow makes the next save
# wait for a queue slot (the callback's MAX_WAITING): training slows, no record
# is lost. Nice 10 (`nice`'s default) kept too little of the trainer's rate.
BACKGROUND_NICE = 19


def lower_this_thread() -> bool:
    """The lowest CPU priority (BACKGROUND_NICE) for the calling thread; False where not for it alone.

    Linux keeps a nice value per thread (``setpriority`` of a thread id), so
    only the hashing thread yields: the trainer's threads keep theirs. POSIX
    says the call is process-wide, and elsewhere (macOS) it is, so it is made
    on Linux only. A nice value cannot be lowered again without privilege, so
    only threads that end with the hash (the pool's) are ever given one.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, max(os.getpriority(os.PRIO_PROCESS, tid), BACKGROUND_NICE))
    except OSError:
        return False
    return True


def hash_jobs(jobs: list[Job], *, workers: int | None = None, progress: Progress | None = None,
              errors: dict[str, OSError] | None = None, background: bool = False) -> dict[str, str]:
    """sha256 hex of every range key in `jobs`, computed in parallel.

    A job that cannot be read raises its OSError, unless `errors` is given:
    then every range key of that job maps to the error there and the rest go on.

    `background`: the hash runs beside other work in this process (the
    in-run callback beside verl's trainer). Its threads take the lowest
    priority (:func:`lower_this_thread`): on a small host they no longer take
    the cores from a CPU-bound trainer (with both cores hashing at normal
    priority, a trainer thread kept a fraction of its idle rate, issue 26), and where nothing else runs
    they still get every core, so an idle host hashes at full speed.
    """
    workers = workers or default_workers()
    ordered = sorted(jobs, key=lambda j: j.nbytes, reverse=True)

    def one(job: Job) -> dict[str, str]:
        if errors is None:
            return _run(job, progress)
        try:
            return _run(job, progress)
        except OSError as exc:
            errors.update((key, exc) for key, _, _ in job.ranges)
            return {}

    results: dict[str, str] = {}
    if (workers == 1 or len(ordered) <= 1) and not background:
        for job in ordered:
            results.update(one(job))
        return results
    # In the background even one job gets a pool thread: the caller's own thread keeps its priority.
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(ordered))), thread_name_prefix="tutorrl-hash",
                            initializer=lower_this_thread if background else None) as pool:
        for part in pool.map(one, ordered):
            results.update(part)
    return results


def shown_name(name: str | os.PathLike) -> str:
    """``name`` with the bytes that are not UTF-8 (held as surrogates by os.walk) written as ``\\xNN``."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def list_files(root: Path) -> tuple[list[tuple[str, Path, int]], list[str]]:
    """Regular files under `root` as (posix relative name, path, size), and symlinks and special files found."""
    files: list[tuple[str, Path, int]] = []
    links: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        base = Path(dirpath)
        for name in dirnames + filenames:
            p = base / name
            if p.is_symlink():
                links.append(shown_name(p.relative_to(root).as_posix()))
        for name in sorted(filenames):
            p = base / name
            st = p.lstat()
            rel = p.relative_to(root).as_posix()
            if stat.S_ISLNK(st.st_mode):
                continue
            if not stat.S_ISREG(st.st_mode):
                # A FIFO would block the hashing open() forever; no special file holds weights.
                links.append(f"{shown_name(rel)} ({file_kind(st.st_mode)})")
                continue
            if shown_name(rel) != rel:
                # A record is JSON text: a name that is not UTF-8 cannot be written into it, so it
                # would go unhashed; it is named (escaped) as a file the record does not cover.
                links.append(f"{shown_name(rel)} (name not UTF-8)")
                continue
            files.append((rel, p, st.st_size))
    files.sort(key=lambda t: t[0])
    return files, sorted(links)


def manifest_root(resources: list[FileResource]) -> str:
    # OpenSSF model-signing: sha256 over raw digest bytes in identifier order.
    h = hashlib.sha256()
    for r in sorted(resources, key=lambda r: r.name):
        h.update(bytes.fromhex(r.digest))
    return "sha256:" + h.hexdigest()


def build_manifest(files: list[tuple[str, Path, int]], digests: dict[str, str]) -> FileManifest:
    resources = [FileResource(name=name, algorithm="sha256", digest=digests[name], size=size) for name, _, size in files]
    return FileManifest(serialization=Serialization(), resources=resources, root=manifest_root(resources))
