"""``tutorrl status``, ``logs``, ``stop`` and ``runs``: looking at runs from any shell.

Every command reconciles first (``lifecycle.reconcile``): a record left open by
a ``tutorrl run`` that died is closed from Ray's view of the job, and the
evidence scan runs, before anything is shown. A record this user's tutorrl did
not write here is shown as it reads, marked so, and never acted on.

What a run folder holds is read as someone else's bytes: ``job.log``,
``metrics.jsonl`` and the bundle's ``spec.toml`` only as regular files (a FIFO
would hang the reader, a link to ``/dev/zero`` fill its memory), and only
bounded amounts of them.

Each returns typed values (what ``tutorrl.api`` hands out); the text and JSON
the commands print of them is :mod:`tutorrl.runtime.text`'s.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Generator, Iterator
from pathlib import Path

import msgspec

from tutorrl._read import ReadError, open_regular, read_file
from tutorrl.errors import RefusedError
from tutorrl.runtime import lifecycle, metrics, records
from tutorrl.runtime.reports import RunRow, RunState

STOP_TIMEOUT_S = 90
MAX_SPEC = 4 * 1024 * 1024
# `logs` copies job.log in pieces of this size, never the whole at once.
_PIECE = 1 << 20


def _total_steps(bundle_path: Path) -> int | None:
    import tomllib

    try:
        spec = tomllib.loads(read_file(bundle_path / "spec.toml", MAX_SPEC).decode("utf-8"))
        value = (spec.get("trainer") or {}).get("total_steps")
        return int(value) if isinstance(value, int) and not isinstance(value, bool) else None
    except (OSError, ValueError, tomllib.TOMLDecodeError, AttributeError):
        return None


def _log_head_and_tail(log: Path, size: int = 1_000_000) -> str:
    """The start of job.log (verl says its total steps there) and its end (the latest steps)."""
    try:
        with open_regular(log) as fh:
            head = fh.read(size)
            end = fh.seek(0, os.SEEK_END)
            fh.seek(max(len(head), end - size))
            tail = fh.read(size)
    except (OSError, ReadError):
        return ""
    return (head + b"\n" + tail).decode("utf-8", errors="replace")


def progress_of(run_dir: Path, bundle_path: Path) -> metrics.Summary:
    """Step k/N, pace, ETA and reward: from metrics.jsonl (written while the run
    was followed), else from verl's console lines in job.log."""
    text = _log_head_and_tail(run_dir / records.LOG_FILE)
    points = metrics.read_points(run_dir / metrics.METRICS_FILE)
    if not points:
        seen = [metrics.parse_console_line(line) for line in text.splitlines()]
        # No times without the record of when each step was seen: no pace, no ETA.
        points = [metrics.Point(step=s, time=0.0, source="console", metrics=m) for s, m in filter(None, seen)]
    return metrics.summarise(points, metrics.total_steps_in(text) or _total_steps(bundle_path))


def run_state(run_dir: Path, record: records.RunRecord) -> RunState:
    open_ = record.status not in records.TERMINAL
    progress = progress_of(run_dir, run_dir.parent.parent)
    dashboard = record.dashboard if (open_ and (record.address_kind == "cluster" or
                                                lifecycle.alive(record.head))) else None
    return RunState(record=record, path=str(run_dir), log=str(run_dir / records.LOG_FILE), dashboard=dashboard,
                    owner_alive=lifecycle.alive(record.owner), verified=records.verified(record),
                    progress=progress if open_ else msgspec.structs.replace(progress, eta_s=None))


def described(dirs: list[Path]) -> list[RunState]:
    """Each run reconciled with Ray first, then described (what `tutorrl status` shows of it)."""
    from tutorrl.runtime.progress import Progress

    progress = Progress()
    found = [(p, lifecycle.reconcile(p, progress)) for p in dirs]
    from tutorrl.runtime.head import sweep_orphans

    sweep_orphans()  # heads' folders a killed tutorrl left (their records were just closed)
    return [run_state(p, r) for p, r in found]


def open_runs(skip: frozenset[Path] = frozenset()) -> list[RunState]:
    """Every open run started on this machine but those in ``skip`` (the runs of a set), described."""
    return described([p for p in lifecycle.open_runs() if p.resolve() not in skip])


def run_rows(bundle: str) -> list[RunRow]:
    """The runs recorded under ``bundles/<id>/runs/``, oldest first, each open one reconciled with Ray."""
    from tutorrl.runtime.progress import Progress

    bundle_path = Path(bundle)
    if not (bundle_path / "manifest.json").is_file():
        from tutorrl.errors import BundleError

        raise BundleError(f"{bundle_path} is not a bundle (no manifest.json)")
    rows = []
    for path, record in records.list_records(bundle_path):
        if record is not None and record.status not in records.TERMINAL:
            try:
                record = lifecycle.reconcile(path, progress=Progress())
            except (OSError, records.RecordError):
                record = None
        rows.append(RunRow(run_id=path.name, path=str(path), record=record,
                           verified=record is not None and records.verified(record)))
    return rows


def _stream_ray_log(client, submission_id: str) -> Iterator[str]:
    """Ray's own follow, as its job client does it (``tail_job_logs``, a websocket):
    the log so far, then each new piece as the job writes it, until the job ends.
    A stream that fails (or never opens) just ends: the polled log completes it."""
    import asyncio

    stream = client.tail_job_logs(submission_id)

    async def next_piece() -> str | None:
        try:
            return await anext(stream)
        except StopAsyncIteration:
            return None

    try:
        # As asyncio.run: Ctrl-C cancels the read and is raised here; leaving closes the stream.
        with asyncio.Runner() as runner:
            while (chunk := runner.run(next_piece())) is not None:
                yield chunk
    except Exception:  # noqa: BLE001 - the stream only feeds the display; the polled log completes it
        return


_RAY_TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")


def _ray_status(client, submission_id: str) -> str | None:
    try:
        return str(client.get_job_status(submission_id).value)
    except Exception:  # noqa: BLE001 - unanswered now; asked again on the next round
        return None


def _between_attempts(record: records.RunRecord) -> bool:
    """A retried run whose attempt failed while its owner lives: the next attempt may follow (runtime/retry.py)."""
    from tutorrl.runtime.retry import may_follow

    return may_follow(record) and bool(lifecycle.alive(record.owner))


def log_chunks(ref: str, follow: bool = False) -> Iterator[bytes]:
    """``tutorrl logs``: a run's job log, piece by piece as its bytes (``follow``: until the run ends).

    The run is found and reconciled now (a bad reference raises here); the log is read as it is iterated."""
    run_dir = lifecycle.find_run(ref)
    return _log_pieces(run_dir, lifecycle.reconcile(run_dir), follow)


def _log_pieces(run_dir: Path, record: records.RunRecord, follow: bool) -> Iterator[bytes]:
    # job.log is written by the run's owner; when no owner is following a job
    # that still runs (its tutorrl run died, on a cluster), Ray has the log.
    if record.status not in records.TERMINAL and not lifecycle.alive(record.owner):
        client = lifecycle.client_for(record)
        if client is not None and (yield from _ray_log(client, run_dir, record.submission_id, follow)):
            return
    log = run_dir / records.LOG_FILE
    offset = 0
    while True:
        chunk = b""
        try:
            with open_regular(log) as fh:
                fh.seek(offset)
                while piece := fh.read(_PIECE):
                    chunk = piece
                    offset += len(piece)
                    yield piece
        except FileNotFoundError:
            pass
        except ReadError as exc:
            raise RefusedError(f"{exc}; nothing read from it") from None
        if not follow or (record.status in records.TERMINAL and not _between_attempts(record)):
            if follow and chunk:
                continue  # drain what the owner wrote before it closed the record
            return
        time.sleep(0.5)
        record = lifecycle.reconcile(run_dir)


def _ray_log(client, run_dir: Path, sid: str, follow: bool) -> Generator[bytes, None, bool]:
    """The log from Ray's Jobs API; returns False where Ray cannot say (job.log is read instead)."""
    shown = 0
    if follow:  # Ray's stream sends each piece once, not the whole log again every second.
        for piece in _stream_ray_log(client, sid):
            yield piece.encode("utf-8", "replace")
            shown += len(piece)
    while True:
        ended = follow and _ray_status(client, sid) in _RAY_TERMINAL
        try:
            text = client.get_job_logs(sid)
        except Exception:  # noqa: BLE001
            text = None
        if text is None and not shown:
            return False
        if text is not None and text[shown:]:
            yield text[shown:].encode("utf-8", "replace")
        shown = max(shown, len(text or ""))
        if not follow or ended or text is None:
            if ended:
                lifecycle.reconcile(run_dir)
            return True
        # The stream broke off before the job ended: the log is polled, its new part shown.
        time.sleep(1.0)


class Stopped(msgspec.Struct, frozen=True):
    """What stopping a run came to: its record afterwards, and whether it is now ended."""

    record: records.RunRecord
    #: True when the record is terminal (stopped here, or it had already ended).
    ended: bool
    #: Why it is not ended, or what it had already ended as; None when this call stopped it.
    note: str | None = None
    already: bool = False


def stop_run(run_dir: Path) -> Stopped:
    """Stop one run: its owner stops the job and then its head (as on Ctrl-C), or, with
    no owner left, the cluster is asked to stop the job. Refuses a record it cannot trust."""
    record = lifecycle.reconcile(run_dir)
    if record.status in records.TERMINAL and not _between_attempts(record):
        return Stopped(record, True, f"already {record.status}", already=True)
    if not records.verified(record):
        raise lifecycle.NotVerified(f"{run_dir}: {lifecycle.UNVERIFIED}; stop it where it was started")
    owner = lifecycle.alive(record.owner)
    if owner:
        # Its owner stops the job, then the head, and closes the record (as on Ctrl-C).
        os.kill(record.owner.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while lifecycle.alive(record.owner) and time.monotonic() < deadline:
            time.sleep(0.2)
        record = lifecycle.reconcile(run_dir)
    elif record.address_kind == "cluster":
        client = lifecycle.client_for(record)
        if client is None:
            return Stopped(record, False, f"cannot reach {record.address} to stop the job")
        from tutorrl.runtime import submit

        submit.stop_job(client, record.submission_id)
        record = lifecycle.reconcile(run_dir)
    if record.status not in records.TERMINAL:
        return Stopped(record, False, f"still {record.status} (its owner did not stop it within {STOP_TIMEOUT_S}s)")
    return Stopped(record, True)
