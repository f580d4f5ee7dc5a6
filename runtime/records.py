"""Run records: ``bundles/<id>/runs/<run-id>/run.json`` and ``job.log``.

A run directory is claimed with ``mkdir`` (atomic: exactly one process gets a
given attempt number) and ``run.json`` is first created with ``O_EXCL``, so two
concurrent ``tutorrl run`` of one bundle never share or overwrite a record.
Later updates replace the file atomically (write, fsync, rename): a reader sees
the old record or the new one, never half of one.

Nothing secret is ever recorded: passthrough values live only in the
submission request, and the address is stored without credentials.

Every record written here is sealed (``trust.py``); only a record whose seal
checks may direct what a later command does (``verified``). Reading one is
bounded like any input someone else controls: a regular file of at most
``MAX_RECORD`` bytes, JSON of bounded depth, every field of its type.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import os
import re
import threading
from pathlib import Path
from collections.abc import Iterator
from typing import Literal

import msgspec

from tutorrl._files import write_new
from tutorrl._read import ReadError, decode_json, read_file
from tutorrl.errors import BundleError
from tutorrl.runtime import trust

from tutorrl.contract import JOB_LOG  # noqa: E402
from tutorrl.contract import RUN_RECORD as RECORD_FILE  # noqa: E402
from tutorrl.contract import RUNS_DIR  # noqa: E402

# The job's log in a run's folder, as other modules read it (records.LOG_FILE).
LOG_FILE = JOB_LOG
LOCK_FILE = ".lock"
SCHEMA = 1
# A record is a few KB; the evidence verdict it may carry stays far below this.
MAX_RECORD = 4 * 1024 * 1024

Status = Literal["starting", "pending", "running", "succeeded", "failed", "stopped", "refused"]
TERMINAL = ("succeeded", "failed", "stopped", "refused")


class Versions(msgspec.Struct, forbid_unknown_fields=False):
    tutorrl: str
    ray: str | None
    python: str
    verl: str | None = None


class Attempt(msgspec.Struct, forbid_unknown_fields=False):
    """One submission of a retried run (``tutorrl run --retries``): the first, and each resubmission."""

    submission_id: str
    started: str
    ended: str | None = None
    status: str | None = None
    exit_code: int | None = None
    # The step this attempt resumed from (its folder and the record that vouched for it); None: from scratch.
    resumed_step: int | None = None
    resumed_from: str | None = None
    resumed_record: str | None = None
    # Checkpoints passed over when choosing where to resume, each with why.
    skipped: list[str] = []
    # The steps this attempt trained -- verl's metrics lines, and the checkpoints its evidence records cover (a
    # trainer killed after a save may never print that step's line) -- and the last one.
    trained: list[int] = []
    reached_step: int | None = None
    message: str | None = None


class RunRecord(msgspec.Struct, forbid_unknown_fields=False):
    schema: int
    run_id: str
    bundle: str
    submission_id: str
    attempt: int
    address_kind: Literal["embedded", "cluster"]
    address: str
    dry_run: bool
    versions: Versions
    started: str
    status: Status
    ended: str | None = None
    exit_code: int | None = None
    message: str | None = None
    working_dir_upload: bool = False
    cwd: str | None = None
    # Who closes this record: the process following the job (``tutorrl run``,
    # or the supervisor of a detached run), identified by host, pid and the
    # kernel's start time of that pid (a reused pid is not mistaken for it).
    owner: "Process | None" = None
    detached: bool = False
    # submit_job returned: Ray has the job (a record still "starting" may not).
    submitted: bool = False
    # The embedded head (its process and its private temp folder, which holds
    # the token file): what a later command needs to check on a run whose
    # owner died, and to clean up after it. Never the token itself.
    head: "Process | None" = None
    head_dir: str | None = None
    dashboard: str | None = None
    # The post-run evidence scan's verdict on this run, when it failed: each
    # failing record (or why none could be written), and the exit code `tutorrl
    # run` gives it (4: trained, evidence failed; 5: stopped by evidence). Kept
    # here so a detached run, or one closed by a later command, says it too.
    evidence_problems: list[str] = []
    evidence_exit_code: int | None = None
    # The spec's roots as this run passed them to the job (set in the
    # submitter's environment; launch.sh applies the spec's defaults to the
    # rest): where the post-run scan looks for "$CKPT_ROOT/..." checkpoints.
    roots: dict[str, str] = {}
    # The output folder as the run found it (evidence/lineage.py): the steps already there are an
    # earlier run's, never claimed by this one; the step verl resumes from links the run's first record.
    prior_steps: list[int] = []
    resumed_step: int | None = None
    # `--retries N`: how many resubmissions the run may make, and each submission so far; the current one is
    # `submission_id`. `evidence_since`: the chain's newest record when the current attempt started (None:
    # the first attempt), so the scan records again a step that attempt wrote again and links its lineage.
    retries: int | None = None
    attempts: list[Attempt] = []
    evidence_since: int | None = None
    # The W&B run id the job logs into (runtime/tracker.py): a retried run's every attempt, and a later run
    # resuming from this run's checkpoints, reuse it.
    tracker_id: str | None = None
    # The MLflow run of this run and of the runs it resumes from (runtime/mlflow_run.py), and the run each
    # launch of verl logged into, nested under it, in the order of the submissions.
    mlflow_run_id: str | None = None
    mlflow_runs: list[str] = []
    # HMAC of every other field under the writer's per-user key (trust.py).
    seal: str | None = None


from tutorrl.errors import RecordError  # noqa: E402 (its home is tutorrl.errors)


class Process(msgspec.Struct, forbid_unknown_fields=False):
    host: str
    pid: int
    start: int | None = None


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def submission_id(bundle_id: str, attempt: int) -> str:
    return f"tutorrl-{bundle_id}-{attempt}"


def _attempts(runs: Path, bundle_id: str) -> list[int]:
    pattern = re.compile(rf"^tutorrl-{re.escape(bundle_id)}-(\d+)$")
    out = []
    if runs.is_dir():
        for entry in runs.iterdir():
            m = pattern.match(entry.name)
            if m:
                out.append(int(m.group(1)))
    return out


def claim_run_dir(bundle_path: Path, bundle_id: str, *, start_after: int = 0) -> tuple[int, Path]:
    """Reserve the next free attempt number; the directory is the reservation."""
    runs = bundle_path / RUNS_DIR
    try:
        runs.mkdir(exist_ok=True)
    except OSError as exc:
        raise BundleError(f"cannot create {runs}: {exc.strerror}") from exc
    attempt = max([start_after, *_attempts(runs, bundle_id)]) + 1
    while True:
        path = runs / submission_id(bundle_id, attempt)
        try:
            path.mkdir()
            return attempt, path
        except FileExistsError:
            attempt += 1  # another run took it between our scan and mkdir
        except OSError as exc:
            raise BundleError(f"cannot create {path}: {exc.strerror}") from exc


def _payload(record: RunRecord) -> bytes:
    return msgspec.json.encode(msgspec.structs.replace(record, seal=None))


def _encode(record: RunRecord) -> bytes:
    record.seal = trust.seal(_payload(record))
    return msgspec.json.format(msgspec.json.encode(record), indent=2) + b"\n"


def verified(record: RunRecord) -> bool:
    """Whether this user's tutorrl on this machine wrote ``record`` as it reads now."""
    return trust.verify(_payload(record), record.seal)


def create_record(run_dir: Path, record: RunRecord) -> None:
    write_new(run_dir / RECORD_FILE, _encode(record))


def update_record(run_dir: Path, record: RunRecord) -> None:
    """Replace run.json whole (temporary file, fsync, rename); the temporary
    file is removed on any failure, an exception raised mid-write included."""
    data = _encode(record)
    tmp = run_dir / f".{RECORD_FILE}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        # The name is predictable: whatever sits there (a link planted to make us truncate its target) goes first.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, run_dir / RECORD_FILE)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


@contextlib.contextmanager
def locked(run_dir: Path) -> Iterator[None]:
    """An exclusive lock on one run (``flock`` on ``runs/<run-id>/.lock``), held
    by whoever closes its record, so two observers never both close it."""
    try:
        fd = os.open(run_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise RecordError(f"{run_dir / LOCK_FILE}: cannot lock the run ({exc.strerror})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def read_record(run_dir: Path) -> RunRecord:
    """The record of ``run_dir``; ``RecordError`` for anything that is not one (``FileNotFoundError`` when absent)."""
    path = run_dir / RECORD_FILE
    try:
        obj = decode_json(read_file(path, MAX_RECORD), name=str(path))
        return msgspec.convert(obj, RunRecord)
    except ReadError as exc:
        raise RecordError(f"not a run record: {exc}") from None
    except msgspec.ValidationError as exc:
        raise RecordError(f"{path}: not a run record: {exc}") from None


def list_records(bundle_path: Path) -> list[tuple[Path, RunRecord | None]]:
    """Every run directory of a bundle, oldest attempt first; unreadable records as None."""
    runs = bundle_path / RUNS_DIR
    if not runs.is_dir():
        return []
    out: list[tuple[int, str, Path, RunRecord | None]] = []
    for entry in runs.iterdir():
        if not entry.is_dir():
            continue
        try:
            record = read_record(entry)
            key = record.attempt
        except (OSError, RecordError):
            record = None
            m = re.search(r"-(\d+)$", entry.name)
            key = int(m.group(1)) if m else 0
        out.append((key, entry.name, entry, record))
    out.sort(key=lambda t: (t[0], t[1]))
    return [(p, r) for _, _, p, r in out]


def process_start_time(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot), None when it is gone or a
    zombie: with the pid, it names one process for good (pids are reused)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    # comm may hold spaces and parentheses: fields resume after the last ')'.
    fields = stat[stat.rfind(b")") + 2:].split()
    if fields and fields[0] == b"Z":  # a zombie has ended; only its parent has not reaped it
        return None
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None
