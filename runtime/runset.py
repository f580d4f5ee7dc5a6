"""Running a set of bundles (a sweep's points): N at a time, on one Ray head, as one thing to watch and stop.

Each bundle is run by a ``tutorrl run BUNDLE`` in a process of its own, the
very path a single run takes -- verify, preflight, run record, job, log,
evidence -- so a run of a set is no different from a run by hand. What the
set adds is only the schedule (at most ``--max-parallel`` at once, the next
started as one ends), one embedded head the runs share, and a set record
under the state folder naming each bundle's run, which ``tutorrl status SET``
reads as one table and ``tutorrl stop SET`` stops.

The set's head is started here, once, in the user's folder (so Ray, not each
run, shares out the GPUs), and stopped when the last run has ended. Each run
finds it through ``SET_HEAD_ENV`` (head.attach) and uses it as an embedded
run uses its own head: the same local preflight, the same token file, its
passthrough values in a private file in the head's folder and never in the
job's runtime_env. With ``--address`` the runs go to that cluster instead.
``--detach`` hands the whole set to a supervisor (``python -m
tutorrl.runtime.runset SET_ID``) in a session of its own.

A set's run writes its progress lines as it goes (as ``tutorrl run`` does) and
returns what it came to (:class:`SetRun`); ``tutorrl status SET`` is
:func:`set_state`. Their text is :mod:`tutorrl.runtime.text`'s.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import msgspec

from tutorrl.errors import BundleError, RefusedError, TutorrlError
from tutorrl.runtime import lifecycle, records
from tutorrl.runtime.progress import Progress
from tutorrl.runtime.reports import SetRecord, SetRow, SetRun, SetState

SET_PREFIX = "set-"
STOP_TIMEOUT_S = 120.0
_POLL_S = 0.5


def _came_to(record: SetRecord, exit_code: int, rows: list[SetRow] | None = None) -> SetRun:
    state = SetState(record=record, rows=set_rows(record) if rows is None else rows)
    return SetRun(set_id=record.set_id, status=record.status, detached=record.detached, state=state,
                  exit_code=exit_code)


def sets_dir() -> Path:
    from tutorrl.runtime import trust

    return trust.private_dir(trust.state_home() / "sets")


def _write(record: SetRecord) -> None:
    folder = sets_dir()
    tmp = folder / f".{record.set_id}.{os.getpid()}.tmp"
    tmp.write_bytes(msgspec.json.encode(record))
    os.replace(tmp, folder / f"{record.set_id}.json")


def read_set(set_id: str) -> SetRecord:
    if not set_id.startswith(SET_PREFIX) or "/" in set_id or len(set_id) > 128:
        raise lifecycle.RunNotFound(f"{set_id}: not a set id ({SET_PREFIX}...)")
    try:
        return msgspec.json.decode((sets_dir() / f"{set_id}.json").read_bytes(), type=SetRecord)
    except FileNotFoundError:
        raise lifecycle.RunNotFound(f"{set_id}: no such set started on this machine") from None
    except (OSError, msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise lifecycle.RunNotFound(f"{set_id}: its record cannot be read ({exc})") from None


def is_set_ref(ref: str | None) -> bool:
    return bool(ref) and ref.startswith(SET_PREFIX)


# -- which bundles ---------------------------------------------------------------------------------------------

def expand(words: list[str]) -> list[Path]:
    """Bundle folders from the words given: a bundle, or a folder of bundles (a sweep's --out)."""
    from tutorrl.compiler.pipeline import require_bundle_folder
    from tutorrl.contract import MANIFEST

    out: list[Path] = []
    for word in words:
        path = Path(word)
        if path.is_dir() and not (path / MANIFEST).exists():
            children = sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")
                              and (p / MANIFEST).is_file())
            if children:
                out += sorted(children, key=_point_order)
                continue
        out.append(require_bundle_folder(word))
    seen, unique = set(), []
    for p in out:
        if p.resolve() not in seen:
            seen.add(p.resolve())
            unique.append(p)
    return unique


def _point_order(bundle: Path) -> tuple:
    """A folder's bundles in their sweep's order (their points), not their ids'."""
    from tutorrl.compiler.spec import order_key
    from tutorrl.contract import MANIFEST

    try:
        doc = msgspec.json.decode((bundle / MANIFEST).read_bytes())
        point, experiment = doc.get("point") or {}, str(doc.get("experiment", ""))
        return order_key(point if isinstance(point, dict) else {}, experiment)
    except (OSError, msgspec.DecodeError, AttributeError):
        return ((bundle.name,),)


def _label(manifest) -> str:
    if manifest.point:
        from tutorrl.compiler.spec import shown

        return ", ".join(f"{k}={shown(v)}" for k, v in manifest.point.items())
    return manifest.experiment


# -- running ---------------------------------------------------------------------------------------------------

class _Child(msgspec.Struct):
    bundle: Path
    index: int
    proc: subprocess.Popen | None = None
    log: object = None
    exit_code: int | None = None
    # How much of its log the set has relayed (--quiet).
    relayed: int = 0


def run_set(args) -> SetRun:
    """``tutorrl run B1 B2 ... [--max-parallel N] [--detach]``: every bundle run, N at a time (exit 0 when all
    succeed), or handed to a supervisor (``--detach``)."""
    # A set shows no job's log (each run's goes to its own file); --quiet shows each run's own lines, as
    # `tutorrl run --quiet` of one bundle does (state, step, each evidence record), prefixed with [k/N].
    progress = Progress(quiet=getattr(args, "no_progress", False))
    bundles = expand(args.bundle)
    parallel = args.max_parallel or 1
    trust = bool(getattr(args, "trust_digests", False))
    num_gpus = getattr(args, "num_gpus", None)
    if args.address and num_gpus is not None:
        raise RefusedError("--num-gpus only applies to the embedded head (a cluster declares its own GPUs)")
    upload = getattr(args, "upload", None)
    if upload and not args.address:
        # Said once for the set, before any head starts, as a single run says it.
        raise RefusedError("--upload only applies with --address (the embedded head sees the bundles directly)")
    loaded = _verified(bundles, trust)
    digest = hashlib.sha256("\n".join(b.manifest.digest for b in loaded).encode()).hexdigest()[:12]
    set_id = f"{SET_PREFIX}{digest}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{os.getpid()}"
    record = SetRecord(set_id=set_id, started=records.utc_now(), cwd=str(Path.cwd()),
                       bundles=[str(Path(b.path).resolve()) for b in loaded],
                       points=[_label(b.manifest) for b in loaded], max_parallel=parallel,
                       address=args.address or "", address_kind="cluster" if args.address else "embedded",
                       dry_run=bool(args.dry_run), owner=lifecycle.this_process(),
                       detached=bool(getattr(args, "detach", False)), trust_digests=trust, num_gpus=num_gpus,
                       upload=upload, quiet=bool(getattr(args, "quiet", False)))
    if record.detached:
        # Caught from before the record exists until the supervisor holds the set: a signal in
        # that window stops the set (_detach), where it would leave a record of a set no one runs.
        stop = _StopFlag()
        try:
            _write(record)
            progress.note(f"{set_id}: {len(loaded)} bundles, at most {parallel} at a time"
                          + ("" if not args.address else f", on {args.address}"))
            return _detach(record, progress, stop)
        finally:
            stop.release()
    _write(record)
    progress.note(f"{set_id}: {len(loaded)} bundles, at most {parallel} at a time"
                  + ("" if not args.address else f", on {args.address}"))
    progress.note(f"  its state:  tutorrl status {set_id}")
    progress.note(f"  stop it:    tutorrl stop {set_id}")
    return _drive(record, loaded, progress)


def _verified(bundles: list[Path], trust: bool) -> list:
    """Every bundle verified before anything starts: a set with a tampered point runs none."""
    from tutorrl.compiler import verify_bundle

    loaded, problems = [], []
    for b in bundles:
        try:
            loaded.append(verify_bundle(b, trust_digests=trust))
        except BundleError as exc:
            problems.append(exc.render().removeprefix("error: "))
    if problems:
        raise BundleError("a bundle of the set does not verify; none was run:\n  " + "\n  ".join(problems))
    return loaded


class _StopFlag:
    """SIGINT, SIGTERM and SIGHUP noted (``signum``) instead of ending the process, until release()."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self.signum: int | None = None
        self._old = {s: signal.signal(s, self._note) for s in self.SIGNALS}

    def _note(self, signum, frame) -> None:
        self.signum = signum

    def release(self) -> None:
        for s, handler in self._old.items():
            signal.signal(s, handler)
        self._old = {}


def _drive(record: SetRecord, loaded: list, progress: Progress, stop: _StopFlag | None = None) -> SetRun:
    """Start the set's head (embedded), run its bundles N at a time, stop the head; what the set came to.

    ``stop``: a signal already caught (a supervisor told to stop while it verified) starts nothing."""
    from tutorrl.contract import SET_HEAD_ENV
    from tutorrl.runtime import cluster

    set_id = record.set_id
    caught = stop
    stop = _StopFlag()
    if caught is not None and caught.signum is not None:
        stop.signum = caught.signum
    head = None
    children = [_Child(bundle=Path(b), index=n) for n, b in enumerate(record.bundles)]
    try:
        env = {k: v for k, v in os.environ.items() if k != SET_HEAD_ENV}
        if record.address_kind == "cluster":
            url = cluster.normalise_address(record.address)
        elif stop.signum is not None:
            url = ""  # stopped before its head started: nothing is started
        else:
            from tutorrl.runtime import preflight
            from tutorrl.runtime.head import EmbeddedHead, publish

            job_env = preflight.job_environment(loaded[0].job)
            # A set of dry runs gets the lean head a single dry run gets (head.py: only the job API's parts).
            head = EmbeddedHead(run_id=set_id, workdir=Path(record.cwd), num_gpus=record.num_gpus,
                                python=preflight.job_python(job_env), lean=record.dry_run)
            head.start(progress, should_stop=lambda: stop.signum is not None)
            url = ""
            if stop.signum is None:  # (stopped while it started: never published, nor named as up)
                publish(head, set_id)
                url = head.url
                # Each run takes this head as its embedded head (run.py): the same preflight, its secrets
                # in a private file in the head's folder, never in the job's runtime_env.
                env[SET_HEAD_ENV] = str(head.run_dir)
                record.address, record.head_dir = url, str(head.run_dir)
                record.head = lifecycle.this_process(head.proc.pid)
                _write(record)
        if url:
            progress.note(f"Ray dashboard: {url}")
        for name in cluster.HIJACK_VARS:
            env.pop(name, None)
        log_dir = sets_dir() / set_id
        log_dir.mkdir(mode=0o700, exist_ok=True)
        waiting = list(children)
        running: list[_Child] = []
        while (waiting or running) and stop.signum is None:
            while waiting and len(running) < record.max_parallel and stop.signum is None:
                child = waiting.pop(0)
                argv = [sys.executable, "-m", "tutorrl", "run", str(child.bundle),
                        "--quiet" if record.quiet else "--no-progress"]
                if record.address_kind == "cluster":
                    argv += ["--address", url]
                if record.dry_run:
                    argv.append("--dry-run")
                if record.trust_digests:
                    argv.append("--trust-digests")
                if record.upload is not None:
                    # Each run ships its own bundle as its job's working_dir, as a single run does.
                    argv.append("--upload" if record.upload else "--no-upload")
                child.log = open(log_dir / f"{child.index + 1:04d}.log", "wb")
                child.proc = subprocess.Popen(argv, env=env, cwd=record.cwd, stdin=subprocess.DEVNULL,
                                              stdout=child.log, stderr=subprocess.STDOUT, start_new_session=True)
                running.append(child)
                progress.note(f"[{child.index + 1}/{len(children)}] started: {record.points[child.index]}")
            time.sleep(_POLL_S)
            _note_runs(record, running)
            for child in list(running):
                code = child.proc.poll()
                if record.quiet:
                    _relay(child, log_dir, len(children), progress, final=code is not None)
                if code is None:
                    continue
                running.remove(child)
                child.exit_code = code
                child.log.close()
                record.exit_codes[str(child.bundle)] = code
                _note_runs(record, [child])
                progress.note(f"[{child.index + 1}/{len(children)}] {'succeeded' if code == 0 else f'exit {code}'}: "
                              f"{record.points[child.index]}")
                _write(record)
        if stop.signum is not None:
            progress.note(f"{signal.Signals(stop.signum).name}: stopping the set's runs")
            for child in running:
                child.proc.send_signal(signal.SIGTERM)  # each stops its job and closes its record
            deadline = time.monotonic() + STOP_TIMEOUT_S
            for child in running:
                try:
                    child.exit_code = child.proc.wait(timeout=max(1.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    child.proc.kill()
                    child.exit_code = child.proc.wait()
                child.log.close()
                record.exit_codes[str(child.bundle)] = child.exit_code
            _note_runs(record, running)
    finally:
        stop.release()
        if head is not None:
            # Runs first, then the head: every run has ended (or was stopped) above.
            progress.status("stopping the embedded Ray head")
            head.stop()
        progress.clear()
        codes = [c.exit_code for c in children]
        record.status = ("stopped" if stop.signum is not None else
                         "succeeded" if all(c == 0 for c in codes) else "failed")
        record.ended = records.utc_now()
        _write(record)
    return _came_to(record, lifecycle.EXIT_INTERRUPTED if stop.signum is not None else
                    0 if record.status == "succeeded" else 1)


# -- detached sets ---------------------------------------------------------------------------------------------

SUPERVISOR_LOG = "supervisor.log"
DETACH_TIMEOUT_S = 300


def _detach(record: SetRecord, progress: Progress, stop: _StopFlag) -> SetRun:
    """Hand the set to a supervisor in its own session (it outlives this shell), wait until it
    owns the set and its head is up, say how to follow it.

    Until then the set is not detached: a signal here (``stop``) stops the supervisor, which
    stops what it started and closes the set, and this exits 130."""
    from tutorrl._files import display_path
    from tutorrl.runtime.text import set_table

    set_id = record.set_id
    folder = sets_dir() / set_id
    folder.mkdir(mode=0o700, exist_ok=True)
    if stop.signum is not None:
        return _stopped_before_detached(set_id, None, stop, progress)
    with open(folder / SUPERVISOR_LOG, "ab") as log:
        child = subprocess.Popen([sys.executable, "-m", "tutorrl.runtime.runset", set_id], cwd=record.cwd,
                                 stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                 start_new_session=True)
    progress.status(f"{set_id}: detached; waiting for its supervisor to start the set")
    deadline = time.monotonic() + DETACH_TIMEOUT_S
    while True:
        if stop.signum is not None:
            return _stopped_before_detached(set_id, child, stop, progress)
        now = read_set(set_id)
        ours = now.owner is not None and now.owner.pid == child.pid
        if ours and (now.address or now.status != "running"):
            break
        if child.poll() is not None or time.monotonic() > deadline:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
                child.wait()
            progress.clear()
            progress.note(f"{set_id}: its supervisor did not start the set; its log: "
                          f"{display_path(folder / SUPERVISOR_LOG)}")
            try:
                record = read_set(set_id)  # as its supervisor left it
            except TutorrlError:
                pass
            return _came_to(record, child.returncode or 1)
        progress.tick()
        time.sleep(0.2)
    progress.clear()
    if now.status != "running":
        # It ended before it was detached (its head did not start, or `tutorrl stop SET`): no set
        # runs on, so no set id is printed as one that does.
        child.wait()
        rows = set_rows(now)
        sys.stderr.write(set_table(now, rows))
        progress.note(f"{set_id}: {now.status} before it was detached; its log: "
                      f"{display_path(folder / SUPERVISOR_LOG)}")
        return _came_to(now, lifecycle.EXIT_INTERRUPTED if now.status == "stopped" else (child.returncode or 1),
                        rows)
    try:
        sys.stdout.write(f"{set_id}\n")
        sys.stdout.flush()
    except OSError:
        pass
    progress.note(f"{set_id}: detached; it runs on after this shell exits")
    progress.note(f"  its state:  tutorrl status {set_id}")
    progress.note(f"  stop it:    tutorrl stop {set_id}")
    progress.note(f"  its log:    {display_path(folder / SUPERVISOR_LOG)}")
    return _came_to(now, 0)


def _stopped_before_detached(set_id: str, child: subprocess.Popen | None, stop: _StopFlag,
                             progress: Progress) -> SetRun:
    """A signal before the set was detached: its supervisor (if started) stops what it started
    (the head, any run) and closes the set; a set its supervisor left open is closed here."""
    name = signal.Signals(stop.signum).name
    progress.clear()
    progress.note(f"{set_id}: {name} before the set was detached: stopping it")
    if child is not None:
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            # Its head dies with it (started with PR_SET_PDEATHSIG); a run it started is a
            # `tutorrl run` whose record the next `tutorrl status` closes.
            child.kill()
            child.wait()
    record = read_set(set_id)
    if record.status == "running":
        record.status, record.ended = "stopped", records.utc_now()
        _write(record)
    started = sum(1 for b in record.bundles if b in record.runs or b in record.exit_codes)
    from tutorrl.runtime.text import set_table

    rows = set_rows(record)
    sys.stderr.write(set_table(record, rows))
    progress.note(f"{set_id}: {record.status}; {started} of {len(record.bundles)} runs started, "
                  f"{len(record.bundles) - started} not started")
    return _came_to(record, lifecycle.EXIT_INTERRUPTED, rows)


def main(argv: list[str]) -> int:
    """``python -m tutorrl.runtime.runset SET_ID``: the supervisor of a detached set, which
    does what a foreground set does after writing its record (verify, head, runs, close)."""
    # A stop (the launcher's, or `tutorrl stop`) may come before _drive listens: noted, not fatal.
    stop = _StopFlag()
    record = read_set(argv[0])
    record.owner = lifecycle.this_process()
    _write(record)
    progress = Progress(tty=False)
    try:
        loaded = _verified([Path(b) for b in record.bundles], record.trust_digests)
    except TutorrlError as exc:
        print(exc.render(), file=sys.stderr)
        record.status, record.ended = "failed", records.utc_now()
        _write(record)
        return exc.exit_code
    try:
        done = _drive(record, loaded, progress, stop)
    except TutorrlError as exc:  # the head did not start: _drive has closed the set
        print(exc.render(), file=sys.stderr)
        return exc.exit_code
    from tutorrl.runtime.text import set_table

    sys.stdout.write(set_table(done.state.record, done.state.rows))  # into the supervisor's log
    sys.stdout.flush()
    return done.exit_code


def _relay(child: _Child, log_dir: Path, total: int, progress: Progress, *, final: bool) -> None:
    """--quiet: the lines a run has added to its log since the last look (whole lines, or all once it ended)."""
    try:
        with open(log_dir / f"{child.index + 1:04d}.log", "rb") as f:
            f.seek(child.relayed)
            data = f.read()
    except OSError:
        return
    if not final:
        data = data[:data.rfind(b"\n") + 1]
    child.relayed += len(data)
    for line in data.decode("utf-8", "replace").splitlines():
        if line.strip():
            progress.note(f"[{child.index + 1}/{total}] {line.removeprefix('tutorrl: ')}")


def _note_runs(record: SetRecord, children) -> None:
    """The run folder of each child that has claimed one (its record's owner is that child)."""
    changed = False
    for child in children:
        key = str(child.bundle)
        if key in record.runs or child.proc is None:
            continue
        for path, run in records.list_records(child.bundle):
            if run is not None and run.owner is not None and run.owner.pid == child.proc.pid:
                record.runs[key] = str(path.resolve())
                changed = True
                break
    if changed:
        _write(record)


# -- watching and stopping --------------------------------------------------------------------------------------

def set_rows(record: SetRecord) -> list[SetRow]:
    """One row per bundle of the set: its point, its run's state, step k/N and last reward."""
    from tutorrl.runtime.observe import progress_of

    rows = []
    for n, bundle in enumerate(record.bundles):
        run_dir = record.runs.get(bundle)
        run_id, state, exit_code = None, "waiting", record.exit_codes.get(bundle)
        step = total = reward = reward_key = None
        if run_dir is None:
            if bundle in record.exit_codes:
                state = "refused" if record.exit_codes[bundle] else "ended"
            elif record.status != "running" or not lifecycle.alive(record.owner):
                state = "not started"
        else:
            path = Path(run_dir)
            try:
                run = lifecycle.reconcile(path)
            except (OSError, records.RecordError, TutorrlError):
                run = None
            run_id = path.name
            if run is not None:
                state = run.status + (" (dry run)" if run.dry_run else "")
                exit_code = run.exit_code
            p = progress_of(path, Path(bundle))
            step, total, reward, reward_key = p.step, p.total, p.reward, p.reward_key
        rows.append(SetRow(point=record.points[n], bundle=bundle, run=run_id, state=state, step=step,
                           total_steps=total, reward=reward, reward_key=reward_key, exit_code=exit_code))
    return rows


def _settled(record: SetRecord) -> SetRecord:
    if record.status == "running" and not lifecycle.alive(record.owner):
        record.status, record.ended = "failed", records.utc_now()  # its `tutorrl run` died
        _write(record)
    return record


def list_sets() -> list[SetRecord]:
    """Every set started on this machine (its record readable), oldest first."""
    from tutorrl.runtime import trust

    if not (trust.state_home() / "sets").is_dir():
        return []  # no set ever started: nothing to make, just to look
    out = []
    for path in sorted(sets_dir().glob(f"{SET_PREFIX}*.json")):
        try:
            out.append(_settled(read_set(path.stem)))
        except TutorrlError:
            continue
    return sorted(out, key=lambda r: (r.started, r.set_id))


RECENT_SETS = 10  # ended sets `tutorrl status` lists without --all
RECENT_RUNS = 10  # ended runs of no set `tutorrl status` lists without --all


def shown_sets(sets: list[SetRecord], show_all: bool = False) -> tuple[list[SetRecord], int]:
    """The sets ``tutorrl status`` lists, oldest first, and how many it leaves out: every open
    set, and the RECENT_SETS that ended last; the rest only with --all. Set records are never
    removed, so without a rule the listing would grow with every set ever run."""
    if show_all:
        return sets, 0
    ended = sorted((r for r in sets if r.status != "running"), key=lambda r: (r.ended or r.started, r.set_id))
    hidden = {r.set_id for r in ended[:-RECENT_SETS]} if len(ended) > RECENT_SETS else set()
    return [r for r in sets if r.set_id not in hidden], len(hidden)


def shown_ended_runs(skip: frozenset[Path], show_all: bool = False):
    """The ended runs of no set ``tutorrl status`` lists, oldest to end first, and how many it
    leaves out: the RECENT_RUNS that ended last (every one with --all)."""
    from tutorrl.runtime import lifecycle

    ended = sorted(((p, r) for p, r in lifecycle.ended_runs() if p.resolve() not in skip),
                   key=lambda pr: (pr[1].ended or pr[1].started, pr[1].run_id))
    if show_all or len(ended) <= RECENT_RUNS:
        return ended, 0
    return ended[-RECENT_RUNS:], len(ended) - RECENT_RUNS


def set_state(set_id: str) -> SetState:
    """``tutorrl status SET``: the set's record (a set whose `tutorrl run` died is closed as failed) and its rows."""
    record = _settled(read_set(set_id))
    return SetState(record=record, rows=set_rows(record))


def stop_set(set_id: str) -> int:
    """Stop a set: its `tutorrl run` stops each running run (its job, then its record) and the
    shared head, and starts no more; with that process gone, each open run is stopped by itself."""
    from tutorrl.runtime.observe import stop_run

    record = read_set(set_id)
    if lifecycle.alive(record.owner):
        os.kill(record.owner.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while lifecycle.alive(record.owner) and time.monotonic() < deadline:
            time.sleep(0.2)
        if lifecycle.alive(record.owner):
            print(f"{set_id}: its tutorrl run did not stop within {STOP_TIMEOUT_S:.0f}s", file=sys.stderr)
            return 1
    record = read_set(set_id)
    left = 0
    for bundle in record.bundles:
        run_dir = record.runs.get(bundle)
        if run_dir is None:
            continue
        done = stop_run(Path(run_dir))
        if not done.ended:
            left += 1
            print(f"{done.record.submission_id}: {done.note}", file=sys.stderr)
    print(f"{set_id}: {record.status}", file=sys.stderr)
    return 0 if not left else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
