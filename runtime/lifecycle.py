"""How a run ends, whoever sees it end.

A run record is closed by the process that follows the job (``tutorrl run``,
or the supervisor of a detached run). When that process died without closing
it (``kill -9``, the machine going away), the next command that reads the
record -- ``runs``, ``status``, ``logs``, ``stop`` -- finds the record still
open with its owner gone, asks Ray what became of the job, and closes the
record itself. Closing is done once, under the run's lock, and is always
followed by the post-run evidence scan (``finish``), so checkpoints are
recorded whichever command observed the end.

Run ids are ``tutorrl-<bundle id>-<attempt>``, so the bundle is named by the
id; a run is found from any folder through ``bundles/<bundle id>/runs/`` under
the current folder, an explicit ``.../runs/<run-id>`` path, or the index under
the user's state folder (one file per run id listing the run folders it names;
two checkouts of a bundle give the same ids, and then the choice is asked for).

Only a record this user's tutorrl wrote on this machine (``records.verified``)
is acted on: closed, its follower signalled, its head stopped, its head's
folder removed, a token sent to the address it names. Any other record is
shown as it reads and left alone. Even a verified record deletes nothing but an
embedded head's own folder (``own_head_dir``).
"""

from __future__ import annotations

import os
import re
import signal
import shutil
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING

from tutorrl.errors import RefusedError, TutorrlError
from tutorrl.runtime import records, trust
from tutorrl.runtime.records import process_start_time

if TYPE_CHECKING:
    from tutorrl.compiler import LoadedBundle

# The exit codes and the errors live in tutorrl.errors; these names are kept for the modules that read them here.
from tutorrl.errors import EXIT_EVIDENCE_FAILED, EXIT_EVIDENCE_STOPPED, EXIT_INTERRUPTED  # noqa: E402,F401
RUN_ID_RE = re.compile(r"^tutorrl-([0-9A-Za-z]+)-(\d+)$")


# A run id names a folder: longer than a file name may be is no run id.
MAX_RUN_ID = 255
UNVERIFIED = ("not verified: this record was not written by tutorrl for this user on this machine (or was "
              "changed since); shown as recorded, and nothing it names is stopped, removed or sent a token")


from tutorrl.errors import EvidenceFailed, NotVerified, RunNotFound  # noqa: E402,F401 (their home is tutorrl.errors)


# -- processes ---------------------------------------------------------------
def failure_summary(error_type: str | None, message: str | None) -> str:
    """Ray's failure message is a header plus a 20,000-character log tail:
    keep the header and the last line the job printed (usually the reason)."""
    lines = [line for line in (message or "").splitlines() if line.strip()]
    head = lines[0].split(", last available logs")[0] if lines else "the job failed"
    text = f"{error_type or 'FAILED'}: {head}"
    if len(lines) > 1:
        text += f"; last output: {lines[-1].strip()}"
    return text[:1000]


def this_process(pid: int | None = None) -> records.Process:
    pid = os.getpid() if pid is None else pid
    return records.Process(host=socket.gethostname(), pid=pid, start=process_start_time(pid))


def alive(proc: records.Process | None) -> bool | None:
    """True/False for a process of this host; None when it ran elsewhere (cannot tell)."""
    if proc is None:
        return False
    if proc.host != socket.gethostname():
        return None
    start = process_start_time(proc.pid)
    return start is not None and (proc.start is None or start == proc.start)


# -- closing a record -------------------------------------------------------
def scan_evidence(bundle_path: Path, record: records.RunRecord, progress=None,
                  loaded: LoadedBundle | None = None) -> EvidenceFailed | None:
    """The post-run evidence scan: every checkpoint of the run not yet recorded,
    then the verdict on this run's evidence.

    Runs for a real run that reached Ray and ended (a dry run writes none). A
    failed or stopped run may still have left checkpoints worth recording;
    "finished" tells the record whether the job ran to its end. Repeating it
    records nothing twice. Returns what failed -- each of this run's records
    whose verdict is "fail" (from the in-run callback or this scan), or the
    error that kept the scan from recording -- and whether the bundle's
    evidence.on_failure = "stop" is what ended a failed job.

    ``loaded``: the bundle the run verified, handed to evidence as it is (a
    later command that closes the record has none: the bundle is verified
    here). The chain is read once; the records this scan writes are read
    back one by one."""
    if record.dry_run or record.status not in ("succeeded", "failed", "stopped") or not record.submitted:
        return None
    from tutorrl.evidence import bundle_info
    from tutorrl.evidence import load_bundle
    from tutorrl.evidence import read_entry
    from tutorrl.evidence import read_records
    from tutorrl.evidence import record_run_checkpoints

    # Relative output dirs are relative to where the job ran; with an upload
    # that is on the cluster, where no scan from here can look.
    cwd = None if record.working_dir_upload else (Path(record.cwd) if record.cwd else None)
    problems = []
    info = chain = written = None
    try:
        info = bundle_info(loaded, Path(bundle_path)) if loaded is not None else load_bundle(Path(bundle_path))
        chain = read_records(info.path)
        written = record_run_checkpoints(info, record.run_id, record.status == "succeeded", cwd=cwd,
                                         roots=record.roots, prior_steps=record.prior_steps,
                                         resumed_step=record.resumed_step, chain=chain,
                                         bundles=known_bundles() if record.resumed_step is not None else (),
                                         since=record.evidence_since)
    except TutorrlError as exc:
        problems.append(f"could not record this run's checkpoints: {exc}")
    policy = "record"
    try:
        if info is None:
            info = load_bundle(Path(bundle_path))  # raises again: said above, not twice
        policy = info.on_failure
        # The chain as it now stands: as read, plus what this scan wrote (read back in the
        # rare case a recording failed part-way, where what it wrote is not known).
        now = chain + [read_entry(path) for path in written] if chain is not None and written is not None \
            else read_records(info.path)
        mine = [(path, s) for path, s in now if s is not None and s.predicate.run.run_id == record.run_id]
        if progress is not None and mine:
            from tutorrl.evidence import recorded_line

            for path, s in mine:
                progress.note(recorded_line(path.name, s))
            from tutorrl._files import display_path

            progress.note(f"evidence: each check's reason: tutorrl evidence {display_path(bundle_path)}")
        for path, s in mine:
            if s.predicate.verdict.status != "fail":
                continue
            failed = ", ".join(c.id for c in s.predicate.verdict.checks if c.status == "fail")
            problems.append(f"{path.name} (step {s.predicate.checkpoint.step}, {s.predicate.run.source}) "
                            f"failed: {failed}")
    except TutorrlError as exc:
        if not problems:
            problems.append(f"could not read this run's records: {exc}")
    if not problems:
        return None
    failure = EvidenceFailed(problems, stopped=policy == "stop" and record.status == "failed")
    run_dir = bundle_path / records.RUNS_DIR / record.run_id
    try:
        with records.locked(run_dir):
            saved = records.read_record(run_dir)
            saved.evidence_problems, saved.evidence_exit_code = list(problems), failure.exit_code
            records.update_record(run_dir, saved)
    except (OSError, TutorrlError):
        pass  # the verdict is still returned and shown; the chain holds the records
    if progress is not None:
        progress.note(failure.render())
        if failure.stopped:
            progress.note(f"evidence.on_failure = \"stop\": the evidence check stopped training "
                          f"(exit {EXIT_EVIDENCE_STOPPED})")
        elif record.status == "succeeded":
            progress.note(f"the job succeeded but its evidence failed (exit {EXIT_EVIDENCE_FAILED}); "
                          "see `tutorrl evidence` for each record")
    return failure


def finish(run_dir: Path, *, status: str, exit_code: int | None, message: str | None,
           scan: bool = True, progress=None) -> tuple[records.RunRecord, EvidenceFailed | None]:
    """Close the record once (under its lock; a record already closed is left
    as it is), then run the evidence scan. Returns the record as it now reads."""
    with records.locked(run_dir):
        record = records.read_record(run_dir)
        if record.status in records.TERMINAL:
            return record, None
        record.status = status
        record.exit_code = exit_code
        record.message = message
        record.ended = records.utc_now()
        records.update_record(run_dir, record)
    failed = scan_evidence(run_dir.parent.parent, record, progress) if scan else None
    return record, failed


# -- Ray, from a later command ---------------------------------------------
def own_head_dir(path: str | None) -> Path | None:
    """``path`` if it is an embedded head's folder of this user (head.own_head_folder)."""
    from tutorrl.runtime.head import own_head_folder

    return own_head_folder(path)


def _head_token(record: records.RunRecord) -> str | None:
    from tutorrl._read import ReadError, read_file
    from tutorrl.runtime import cluster

    folder = own_head_dir(record.head_dir)
    # An embedded head's dashboard is on loopback (head.py): its token goes nowhere else.
    if folder is None or not record.dashboard or not cluster.is_loopback(record.dashboard):
        return None
    try:
        return read_file(folder / "token", cluster.MAX_TOKEN).decode("ascii").strip() or None
    except (OSError, ReadError, UnicodeDecodeError):
        return None


def client_for(record: records.RunRecord):
    """A Jobs API client for the run's cluster or embedded head, or None if unreachable (or the
    record is not verified: only a verified record's address gets a token)."""
    from tutorrl.runtime import cluster

    if not records.verified(record):
        return None
    if record.address_kind == "embedded":
        if not alive(record.head):
            return None
        token = _head_token(record)
        url = record.dashboard
        if token is None or url is None:
            return None
    else:
        url = record.address
        try:
            token = cluster.token_from_environment()
        except RefusedError:
            token = None
    try:
        url = cluster.normalise_address(url)
        if record.address_kind != "embedded":
            cluster.cluster_resources(url, cluster.auth_headers(token))  # reachable and authorised
        # (An embedded head answers with its own token; a lean one runs no State API: head.py.)
        from tutorrl.runtime import jobs_api

        return jobs_api.client(url, cluster.auth_headers(token))
    except TutorrlError:
        return None


def job_outcome(client, record: records.RunRecord) -> tuple[str, int | None, str | None] | None:
    """Ray's terminal state of the job as (status, exit code, message), or None while it runs."""

    try:
        info = client.get_job_info(record.submission_id)
    except Exception:  # noqa: BLE001 - never submitted, or the head forgot it
        return None
    status = str(info.status.value)
    if status == "SUCCEEDED":
        return "succeeded", 0, None
    if status == "FAILED":
        return "failed", info.driver_exit_code or 1, failure_summary(info.error_type, info.message)
    if status == "STOPPED":
        return "stopped", EXIT_INTERRUPTED, "stopped"
    return None


def _known(client, record: records.RunRecord) -> bool:
    try:
        client.get_job_info(record.submission_id)
        return True
    except Exception:  # noqa: BLE001 - Ray never got it
        return False


def stop_head(record: records.RunRecord, grace_s: float = 10.0) -> None:
    """Stop an embedded head whose owner is gone: SIGTERM, then its process group; then remove its folder.
    Only for a verified record of a head on this host."""
    from tutorrl.runtime.head import is_shared

    head = record.head
    if not records.verified(record) or head is None or alive(head) is None:
        return
    if is_shared(record.head_dir):
        return  # a set's head, shared by its other runs: the set's tutorrl run stops it (or dies with it)
    if alive(head):
        try:
            os.kill(head.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + grace_s
        while alive(head) and time.monotonic() < deadline:
            time.sleep(0.2)
        if alive(head):
            try:
                os.killpg(head.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    folder = own_head_dir(record.head_dir)
    if folder is not None and not alive(head):
        shutil.rmtree(folder, ignore_errors=True)


def reconcile(run_dir: Path, progress=None) -> records.RunRecord:
    """The record as it should read now: an open record whose owner is gone is
    closed from Ray's view of the job (see the module docstring)."""
    record = records.read_record(run_dir)
    if record.status in records.TERMINAL or not records.verified(record):
        return record  # closing an unverified record would also seal it as ours
    owner = alive(record.owner)
    if owner:
        return record  # its owner is following the job and will close it
    if record.address_kind == "embedded":
        if owner is None:
            return record  # started on another host: nothing here can check its head
        client = client_for(record) if alive(record.head) else None
        outcome = job_outcome(client, record) if client is not None else None
        if client is not None and outcome is None and _known(client, record):
            from tutorrl.runtime import submit

            submit.stop_job(client, record.submission_id)
            outcome = job_outcome(client, record)
            if outcome is not None and outcome[0] == "stopped":
                outcome = ("stopped", EXIT_INTERRUPTED,
                           "tutorrl run ended without closing the run; its job was stopped when this was noticed")
        stop_head(record)  # job first, then head
        if outcome is None:
            outcome = ("stopped", None,
                       "tutorrl run ended without closing the run (killed?); its embedded Ray head is gone "
                       "and the job with it; the job's outcome is unknown beyond job.log")
    else:
        client = client_for(record)
        outcome = job_outcome(client, record) if client is not None else None
        if outcome is None:
            if client is not None and not _known(client, record):
                outcome = ("failed", 1, "tutorrl run ended before the job was submitted")
            if outcome is None:
                return record  # still running on the cluster (or the cluster is unreachable now)
    status, code, message = outcome
    if status in ("succeeded", "failed") and record.owner is not None:
        message = (message + "; " if message else "") + "closed after the job ended, not by its own tutorrl run"
    record, _ = finish(run_dir, status=status, exit_code=code, message=message, progress=progress)
    return record


# -- finding runs -----------------------------------------------------------
def state_dir() -> Path:
    return trust.state_home() / "runs"


def index_run(run_dir: Path) -> None:
    """Note where a run's folder is, so `tutorrl status <run-id>` works from any folder."""
    try:
        folder = trust.private_dir(state_dir())
        line = (str(run_dir.resolve()) + "\n").encode()
        fd = os.open(folder / run_dir.name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, line)  # one short O_APPEND write: concurrent writers never interleave
        finally:
            os.close(fd)
    except OSError:
        pass  # the index is a convenience; the record under the bundle is what counts


def known_bundles() -> list[Path]:
    """The bundles of every run this user started on this machine (the runs index), where they still are:
    where the record of a checkpoint a run resumed from is looked for."""
    out: list[Path] = []
    try:
        names = sorted(os.listdir(state_dir()))
    except OSError:
        return out
    for name in names:
        for run_dir in _indexed(name):
            bundle = run_dir.parent.parent
            if bundle not in out:
                out.append(bundle)
    return out


def _indexed(run_id: str) -> list[Path]:
    try:
        lines = (state_dir() / run_id).read_text().splitlines()
    except OSError:
        return []
    out: list[Path] = []
    for line in lines:
        path = Path(line)
        if line and path not in out and _has_record(path):
            out.append(path)
    return out


def _has_record(folder: Path) -> bool:
    try:
        return (folder / records.RECORD_FILE).is_file()
    except OSError:  # a name too long for the file system, a loop of links
        return False


def find_run(ref: str) -> Path:
    """A run folder from a run id or a ``bundles/<id>/runs/<run-id>`` path."""
    if "\0" in ref or len(ref) > 4096:
        raise RunNotFound(f"{ref[:80]!r}...: not a run folder and not a run id ({len(ref)} characters)")
    given = Path(ref)
    if _has_record(given):
        return given
    m = RUN_ID_RE.match(given.name)
    if m and len(ref) > MAX_RUN_ID:
        raise RunNotFound(f"{ref[:80]}...: not a run id: {len(ref)} characters, and a run id names a folder "
                          f"(at most {MAX_RUN_ID})")
    if not m or given.name != ref:
        raise RunNotFound(f"{ref}: not a run folder (no {records.RECORD_FILE}) and not a run id "
                          "(tutorrl-<bundle id>-<attempt>)")
    local = Path("bundles") / m.group(1) / records.RUNS_DIR / ref
    if _has_record(local):
        return local
    found = _indexed(ref)
    if len(found) == 1:
        return found[0]
    if len(found) > 1:
        raise RunNotFound(f"{ref} names runs in {len(found)} checkouts of the bundle; give one folder:\n"
                          + "\n".join(f"  {p}" for p in found))
    raise RunNotFound(f"{ref}: no such run under ./bundles/ or in the index of runs started on this machine")


def ended_runs() -> list[tuple[Path, records.RunRecord]]:
    """Every indexed run of this machine whose record is closed, with its record (for `tutorrl status`)."""
    out = []
    try:
        names = sorted(os.listdir(state_dir()))
    except OSError:
        return []
    for name in names:
        for path in _indexed(name):
            try:
                record = records.read_record(path)
            except Exception:  # noqa: BLE001 - unreadable records are listed by `runs`
                continue
            if record.status in records.TERMINAL:
                out.append((path, record))
    return out


def open_runs() -> list[Path]:
    """Every indexed run of this machine whose record is still open (for `tutorrl status`)."""
    folder = state_dir()
    out = []
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    for name in names:
        for path in _indexed(name):
            try:
                if records.read_record(path).status not in records.TERMINAL:
                    out.append(path)
            except Exception:  # noqa: BLE001 - unreadable records are listed by `runs`
                continue
    return out
