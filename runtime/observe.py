"""``tutorrl status``, ``logs``, ``stop`` and ``runs``: looking at runs from any shell.

Every command reconciles first (``lifecycle.reconcile``): a record left open by
a ``tutorrl run`` that died is closed from Ray's view of the job, and the
evidence scan runs, before anything is shown. A record this user's tutorrl did
not write here is shown as it reads, marked so, and never acted on.

What a run folder holds is read as someone else's bytes: ``job.log``,
``metrics.jsonl`` and the bundle's ``spec.toml`` only as regular files (a FIFO
would hang the reader, a link to ``/dev/zero`` fill its memory), and only
bounded amounts of them.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import msgspec

from tutorrl._read import ReadError, open_regular, read_file
from tutorrl.errors import RefusedError
from tutorrl.runtime import lifecycle, metrics, records, tracker

STOP_TIMEOUT_S = 90
MAX_SPEC = 4 * 1024 * 1024
# `logs` copies job.log in pieces of this size, never the whole at once.
_PIECE = 1 << 20


def _out(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


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


def describe(run_dir: Path, record: records.RunRecord) -> dict:
    bundle_path = run_dir.parent.parent
    owner = lifecycle.alive(record.owner)
    open_ = record.status not in records.TERMINAL
    out = msgspec.to_builtins(record)
    out["path"] = str(run_dir)
    out["log"] = str(run_dir / records.LOG_FILE)
    # The dashboard only while something serves it (an embedded head dies with its run).
    out["dashboard"] = record.dashboard if (open_ and (record.address_kind == "cluster" or
                                                       lifecycle.alive(record.head))) else None
    out["owner_alive"] = owner
    out["verified"] = records.verified(record)
    progress = progress_of(run_dir, bundle_path)
    out["step"] = progress.step
    out["total_steps"] = progress.total
    out["progress"] = msgspec.to_builtins(progress)
    if not open_:
        out["progress"]["eta_s"] = None
    return out


def attempt_lines(attempts: list[dict], retries: int | None) -> list[str]:
    """A retried run's submissions (`--retries`), one line each: its status and exit, the step it resumed
    from (or from scratch), the last step it reached."""
    if retries is None:
        return []
    lines = [f"  attempts:  {len(attempts)} of at most {retries + 1}"]
    for n, a in enumerate(attempts, 1):
        status = a.get("status") or "running"
        exit_code = a.get("exit_code")
        start = "from scratch" if a.get("resumed_step") is None else f"resumed from step {a['resumed_step']}"
        reached = a.get("reached_step")
        lines.append(f"    {n}. {a['submission_id']}: {status}" + ("" if exit_code is None else f" (exit {exit_code})")
                     + f", {start}" + ("" if reached is None else f", reached step {reached}"))
        for skipped in a.get("skipped") or []:
            lines.append(f"       not resumed from {skipped}")
    return lines


def _text(d: dict) -> str:
    where = "embedded Ray head" if d["address_kind"] == "embedded" else f"cluster {d['address']}"
    lines = [f"{d['run_id']}: {d['status']}" + (" (dry run)" if d["dry_run"] else "")
             + ("" if d["exit_code"] is None else f", exit code {d['exit_code']}")]
    if d.get("message"):
        lines.append(f"  {d['message']}")
    if d.get("evidence_problems"):
        lines.append(f"  evidence:  failed (`tutorrl run` exits {d['evidence_exit_code']}): "
                     + "; ".join(d["evidence_problems"]))
    if not d["verified"]:
        lines.append(f"  {lifecycle.UNVERIFIED}")
    lines.append(f"  where:     {where}" + (" (detached)" if d["detached"] else ""))
    if d["dashboard"]:
        lines.append(f"  dashboard: {d['dashboard']}")
    p = msgspec.convert(d["progress"], metrics.Summary)
    if p.step is not None:
        lines.append(f"  progress:  {metrics.status_text(p)}")
    if p.rewards:
        values = [v for _, v in p.rewards]
        lines.append(f"  {p.reward_key}: {metrics.sparkline(values)}")
        lines.append(f"             steps {p.rewards[0][0]}-{p.rewards[-1][0]}, min {min(values):.4g}, "
                     f"max {max(values):.4g}, last {values[-1]:.4g}")
    lines += attempt_lines(d.get("attempts") or [], d.get("retries"))
    tracked = tracker.text(d.get("tracker_id"), d.get("mlflow_run_id"))
    if tracked:
        lines.append(f"  tracker:   {tracked}")
    lines.append(f"  started:   {d['started']}" + (f"  ended: {d['ended']}" if d["ended"] else ""))
    lines.append(f"  record:    {d['path']}")
    return "\n".join(lines) + "\n"


def described(dirs: list[Path]) -> list[dict]:
    """Each run reconciled with Ray first, then described (what `tutorrl status` shows of it)."""
    from tutorrl.runtime.progress import Progress

    progress = Progress()
    found = [(p, lifecycle.reconcile(p, progress)) for p in dirs]
    from tutorrl.runtime.head import sweep_orphans

    sweep_orphans()  # heads' folders a killed tutorrl left (their records were just closed)
    return [describe(p, r) for p, r in found]


def open_runs(skip: frozenset[Path] = frozenset()) -> list[dict]:
    """Every open run started on this machine but those in ``skip`` (the runs of a set), described."""
    return described([p for p in lifecycle.open_runs() if p.resolve() not in skip])


run_text = _text


def status_command(args) -> int:
    data = described([lifecycle.find_run(args.run)] if args.run else lifecycle.open_runs())
    if args.format == "json":
        body = data[0] if args.run else data
        _out(msgspec.json.format(msgspec.json.encode(body), indent=2).decode() + "\n")
        return 0
    if not data:
        print("no open runs started on this machine (tutorrl status <run-id> shows any run)", file=sys.stderr)
        return 0
    _out("".join(_text(d) for d in data))
    return 0


def _stream_ray_log(client, submission_id: str) -> int:
    """Ray's own follow, as its job client does it (``tail_job_logs``, a websocket):
    the log so far, then each new piece as the job writes it, until the job ends.
    Returns how many characters were shown (0 where the stream never opened)."""
    import asyncio

    shown = 0

    async def follow() -> None:
        nonlocal shown
        async for chunk in client.tail_job_logs(submission_id):
            _out(chunk)
            shown += len(chunk)

    try:
        asyncio.run(follow())
    except Exception:  # noqa: BLE001 - the stream only feeds the display; the polled log completes it
        pass
    return shown


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


def logs_command(args) -> int:
    run_dir = lifecycle.find_run(args.run)
    record = lifecycle.reconcile(run_dir)
    log = run_dir / records.LOG_FILE
    # job.log is written by the run's owner; when no owner is following a job
    # that still runs (its tutorrl run died, on a cluster), Ray has the log.
    if record.status not in records.TERMINAL and not lifecycle.alive(record.owner):
        client = lifecycle.client_for(record)
        if client is not None:
            sid = record.submission_id
            # --follow: Ray's stream sends each piece once, not the whole log again every second.
            shown = _stream_ray_log(client, sid) if args.follow else 0
            while True:
                ended = args.follow and _ray_status(client, sid) in _RAY_TERMINAL
                try:
                    text = client.get_job_logs(sid)
                except Exception:  # noqa: BLE001
                    text = None
                if text is None and not shown:
                    break  # Ray cannot say: job.log is read below
                _out(text[shown:] if text is not None else "")
                shown = max(shown, len(text or ""))
                if not args.follow or ended or text is None:
                    if ended:
                        lifecycle.reconcile(run_dir)
                    return 0
                # The stream broke off before the job ended: the log is polled, its new part shown.
                time.sleep(1.0)
    offset = 0
    while True:
        chunk = b""
        try:
            with open_regular(log) as fh:
                fh.seek(offset)
                while piece := fh.read(_PIECE):
                    chunk = piece
                    offset += len(piece)
                    sys.stdout.buffer.write(piece)
                    sys.stdout.buffer.flush()
        except FileNotFoundError:
            pass
        except ReadError as exc:
            raise RefusedError(f"{exc}; nothing read from it") from None
        if not args.follow or (record.status in records.TERMINAL and not _between_attempts(record)):
            if args.follow and chunk:
                continue  # drain what the owner wrote before it closed the record
            return 0
        time.sleep(0.5)
        record = lifecycle.reconcile(run_dir)


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
