"""``tutorrl run`` and ``tutorrl runs``: one bundle, one Ray job, one record.

Order matters and is the point of this module:
verify the bundle -> local preflight -> claim a run record -> start the
embedded head (or reach the cluster) -> cluster preflight -> submit -> follow
-> stop the job if still alive -> stop the head -> close the record ->
evidence. Every exit path after the record is claimed goes through the same
``finally``, so a run is never left "running" and a head never outlives us.
"""

from __future__ import annotations

import os
import platform
import signal
import sys
import threading
import time
from importlib import metadata
from pathlib import Path

from tutorrl import __version__
from tutorrl.contract import SET_HEAD_ENV
from tutorrl.errors import RefusedError, TutorrlError
from tutorrl.runtime import (cluster, dryrun, job_secrets, lifecycle, metrics, mlflow_run, preflight, records, retry,
                             submit, tracker)
from tutorrl.runtime.progress import Progress

EXIT_INTERRUPTED = lifecycle.EXIT_INTERRUPTED
EXIT_EVIDENCE_FAILED = lifecycle.EXIT_EVIDENCE_FAILED
EXIT_EVIDENCE_STOPPED = lifecycle.EXIT_EVIDENCE_STOPPED
# How long `run --detach` waits for its supervisor to get the job submitted.
DETACH_SUBMIT_TIMEOUT_S = 300
SUPERVISOR_LOG = "supervisor.log"
# Under the run's folder: where verl's Hydra writes its record of the run (else outputs/ where the job starts).
HYDRA_DIR = "hydra"
DRY_RUN_POLL_S = 0.2
# Once verl has printed the composed config (the dry run's raw output is no longer empty) it is returning:
# its end is asked after this often, for at most DRY_RUN_END_FAST_S (a verl that printed and then hangs is
# asked at DRY_RUN_POLL_S again). Only an embedded head: a cluster's dashboard is not asked at 20 Hz.
DRY_RUN_END_POLL_S = 0.05
DRY_RUN_END_FAST_S = 5.0


class Interrupts:
    """SIGINT/SIGTERM/SIGHUP become a flag the waiting loops poll, so the
    cleanup that follows (stop the job, then the head) runs to the end."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self, progress: Progress):
        self.event = threading.Event()
        self.signum: int | None = None
        self._progress = progress
        self._old: dict[int, object] = {}

    def install(self) -> None:
        for sig in self.SIGNALS:
            self._old[sig] = signal.signal(sig, self._handle)

    def restore(self) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old.clear()

    def _handle(self, signum, frame) -> None:
        if self.event.is_set():
            self._progress.note("already stopping: waiting for the job and the Ray head to stop")
            return
        self.signum = signum
        self.event.set()
        self._progress.note(f"{signal.Signals(signum).name}: stopping the job")

    def __call__(self) -> bool:
        return self.event.is_set()


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _nothing_before():
    from tutorrl.evidence import Before

    return Before()


def _import_job_client() -> None:
    try:
        import ray.job_submission  # noqa: F401
    except ImportError:  # said when the client is made (jobs_api.client)
        pass


class RunSession:
    """One run. ``args`` is a :class:`~tutorrl.runtime.options.RunOptions` (or the CLI's
    Namespace with the same names); ``jobs`` is where the job goes (Ray's Jobs API by default)."""

    def __init__(self, args, progress: Progress, jobs=None):
        from tutorrl.runtime.options import RAY

        self.args = args
        self.progress = progress
        self.jobs = jobs if jobs is not None else RAY
        # The job's log on our stdout as it comes (the CLI); always in runs/<run-id>/job.log.
        self.echo = True
        self.head = None
        self.client = None
        self.record: records.RunRecord | None = None
        self.run_dir: Path | None = None
        self.sink: submit.LogSink | None = None
        self.follower: submit.LogFollower | None = None
        self.submitted = False
        self.job_status: str | None = None
        self.secrets: list[str] = []
        self.secrets_file: Path | None = None
        self.shared_head = None  # a set's head this run uses (head.SharedHead), when it is one of a set
        self.roots: dict[str, str] = {}
        # The output folder as this run found it (evidence.lineage.Before); filled before the claim.
        self.before = _nothing_before()
        self.metrics = None  # verl's metrics -> runs/<run-id>/metrics.jsonl
        self.metrics_tail = None
        self.summary: list[str] = []
        self.interrupts: Interrupts | None = None
        self.evidence_failed = None
        # `--retries` (runtime/retry.py): the policy, launch.sh's arguments for the current attempt, the steps
        # verl reported in the attempt that just ended, and how a backoff is waited (a test passes its own:
        # called with the seconds, True when the wait was interrupted).
        self.retry: retry.Policy | None = None
        self.launch_args: list[str] = []
        self.attempt_steps: list[int] = []
        self.wait = None

    # -- record -----------------------------------------------------------
    def _save(self, **changes) -> None:
        assert self.record is not None and self.run_dir is not None
        for k, v in changes.items():
            setattr(self.record, k, v)
        records.update_record(self.run_dir, self.record)

    def _claim(self, bundle_path: Path, bundle_id: str, digest: str, start_after: int = 0) -> None:
        attempt, self.run_dir = records.claim_run_dir(bundle_path, bundle_id, start_after=start_after)
        self.record = records.RunRecord(
            schema=records.SCHEMA, run_id=self.run_dir.name, bundle=digest,
            submission_id=records.submission_id(bundle_id, attempt), attempt=attempt,
            address_kind="cluster" if self.cluster_url else "embedded",
            address=self.cluster_url or "embedded", dry_run=bool(self.args.dry_run),
            versions=records.Versions(tutorrl=__version__, ray=_version("ray"),
                                      python=platform.python_version(),
                                      verl=preflight.installed_verl(preflight.job_python(self.job_env))),
            started=records.utc_now(), status="starting", working_dir_upload=self.upload,
            cwd=str(self.cwd), owner=lifecycle.this_process(), detached=bool(getattr(self.args, "detach", False)),
            roots=dict(self.roots), prior_steps=list(self.before.steps), resumed_step=self.before.resumed_step,
        )
        loggers = tracker.loggers(self.bundle.spec)
        parent = self._parent_record(bundle_path) if tracker.wanted(self.bundle.spec) and not self.args.dry_run else None
        if "wandb" in loggers and not self.args.dry_run:
            inherited = parent.tracker_id if parent is not None and tracker.valid_id(parent.tracker_id) else None
            if inherited:
                self.progress.note(f"tracker: W&B run {inherited} of {parent.run_id}, whose checkpoint this run "
                                   "resumes from")
            self.record.tracker_id = inherited or tracker.new_id(self.record.run_id)
        if mlflow_run.wanted(loggers) and parent is not None and parent.mlflow_run_id:
            self.progress.note(f"tracker: MLflow run {parent.mlflow_run_id} of {parent.run_id}, whose checkpoint "
                               "this run resumes from")
            self.record.mlflow_run_id = parent.mlflow_run_id
        if self.retry is not None:
            self.record.retries = self.retry.retries
            self.record.attempts = [records.Attempt(submission_id=self.record.submission_id,
                                                    started=self.record.started,
                                                    resumed_step=self.before.resumed_step)]
        records.create_record(self.run_dir, self.record)
        lifecycle.index_run(self.run_dir)

    # -- main -------------------------------------------------------------
    def _load(self):
        from tutorrl.compiler import verify_bundle

        args = self.args
        bundle = verify_bundle(Path(args.bundle), trust_digests=bool(getattr(args, "trust_digests", False)))
        for warning in bundle.warnings:
            # A bundle this tutorrl could not re-derive (another release, or resealed) runs
            # on its digests alone: say so before it runs.
            self.progress.note(f"warning: {warning}")
        bundle_path = Path(bundle.path).resolve()
        digest = bundle.manifest.digest
        bundle_id = bundle.manifest.id
        job, spec = bundle.job, bundle.spec
        self.release = bundle.manifest.verl
        self.bundle = bundle  # a dry run's summary says what its launch checked
        # The environment launch.sh sees on a head started here; TUTORRL_PYTHON in it is the job's Python.
        self.job_env = preflight.job_environment(job)
        self.cwd = Path.cwd()
        self.cluster_url = cluster.normalise_address(args.address) if args.address else None
        # One run of a set on the set's embedded head (runset.py): an embedded run in every way
        # but that the head is the set's to start and stop.
        set_head = os.environ.get(SET_HEAD_ENV)
        if set_head and not self.cluster_url and self.shared_head is None:
            from tutorrl.runtime.head import attach

            self.shared_head = attach(set_head)
        if args.upload is None:
            # A head on this machine sees our files; any other is assumed not to.
            self.upload = bool(self.cluster_url) and not cluster.is_loopback(self.cluster_url)
        else:
            self.upload = bool(args.upload)
        if self.upload and not self.cluster_url:
            raise RefusedError("--upload only applies with --address (the embedded head sees the bundle directly)")
        if self.cluster_url and getattr(args, "num_gpus", None) is not None:
            raise RefusedError("--num-gpus only applies to the embedded head (a cluster declares its own GPUs)")
        self.retry = self._policy(spec)
        return bundle, bundle_path, digest, bundle_id, job, spec

    def _parent_record(self, bundle_path: Path) -> records.RunRecord | None:
        """The run whose recorded checkpoint this one resumes from (its tracker runs are this run's too)."""
        if self.before.resumed_step is None or self.upload:
            return None
        from tutorrl.evidence import resumed_run

        try:
            hit = resumed_run(bundle_path, self.cwd, self.roots, self.before.resumed_step, lifecycle.known_bundles())
            if hit is None:
                return None
            parent = records.read_record(hit[0] / records.RUNS_DIR / hit[1])
        except (OSError, TutorrlError):
            return None
        return parent if records.verified(parent) else None

    def _policy(self, spec) -> retry.Policy | None:
        """--retries, else the spec's [run] retries; a dry run (nothing to retry) takes only the flag's."""
        retries = getattr(self.args, "retries", None)
        if retries is None and not self.args.dry_run:
            retries = spec.run.retries
        if retries is None:
            return None
        retry.check(spec, dry_run=bool(self.args.dry_run), upload=self.upload, output_dir=bool(spec.trainer.output_dir))
        backoff = getattr(self.args, "retry_backoff", None)
        return retry.Policy(retries=retries, backoff_s=(spec.run.retry_backoff_s if backoff is None else backoff) or 0.0)

    def run(self) -> int:
        args, progress = self.args, self.progress
        bundle, bundle_path, digest, bundle_id, job, spec = self._load()

        findings = preflight.PreflightReport()
        names = submit.passthrough_names(job)
        preflight.check_passthrough(names, findings)
        if names and self.cluster_url:
            findings.notes.append(
                f"{', '.join(names)}: passed to the job in Ray's runtime_env, as Ray requires on a cluster; anyone "
                "who can reach this cluster's Jobs API or dashboard can read the values")
        preflight.check_roots(spec, findings, cluster=self.cluster_url, dry_run=bool(self.args.dry_run))
        if self.cluster_url:
            findings.notes.append("verl release on the cluster: checked by launch.sh when the job starts")
        else:
            preflight.check_verl(bundle.spec.experiment.verl, findings, preflight.job_python(self.job_env))
        preflight.check_reward(spec, job, findings, cwd=self.cwd, cluster=self.cluster_url, dry_run=bool(self.args.dry_run))
        preflight.check_stack(spec, job, findings, cwd=self.cwd, cluster=self.cluster_url, dry_run=bool(self.args.dry_run))
        if self.cluster_url and not self.args.dry_run:
            preflight.check_relative_paths(spec, self.cluster_url, findings)
        if self.upload:
            findings.notes.append("bundle uploaded as the job's working_dir; data/model paths are resolved on the cluster, not checked here")
        else:
            preflight.check_paths(spec, self.cwd, findings, dry_run=bool(self.args.dry_run))
        for note in findings.notes:
            progress.note(note)
        findings.raise_if_any("local checks")

        passthrough = {n: os.environ[n] for n in names}
        self.secrets = [v for v in passthrough.values() if v]
        self.roots = preflight.root_values(spec)
        if not args.dry_run and not self.upload:
            from tutorrl.evidence import bundle_info, output_dir_before_run

            # Before the job: what is already in the output folder is not this run's to claim.
            self.before = output_dir_before_run(bundle_info(bundle, bundle_path), self.cwd, self.roots)
        cluster.drop_hijack_vars()
        token = cluster.token_from_environment() if self.cluster_url else None

        interrupts = Interrupts(progress)
        interrupts.install()
        try:
            self._claim(bundle_path, bundle_id, digest)
            if getattr(args, "detach", False):
                return self._detach(interrupts)
            return self._execute(bundle, bundle_path, bundle_id, digest, passthrough, token, interrupts)
        finally:
            interrupts.restore()

    # -- detached runs ----------------------------------------------------
    def _detach(self, interrupts) -> int:
        """Hand the run to a supervisor in its own session (it outlives this
        shell and its terminal), wait until Ray has the job, say how to follow it."""
        import json
        import subprocess

        from tutorrl._files import display_path

        progress, run_dir = self.progress, self.run_dir
        options = {"bundle": str(Path(self.args.bundle).resolve()), "address": self.args.address,
                   "upload": self.args.upload, "dry_run": bool(self.args.dry_run),
                   "num_gpus": getattr(self.args, "num_gpus", None),
                   "trust_digests": bool(getattr(self.args, "trust_digests", False)),
                   "retries": getattr(self.args, "retries", None),
                   "retry_backoff": getattr(self.args, "retry_backoff", None)}
        with open(run_dir / SUPERVISOR_LOG, "ab") as log:
            child = subprocess.Popen(
                [sys.executable, "-m", "tutorrl.runtime.supervise", str(run_dir.resolve()), json.dumps(options)],
                cwd=self.cwd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)
        # The supervisor closes the record from now on.
        with records.locked(run_dir):
            self.record = records.read_record(run_dir)
            self._save(owner=lifecycle.this_process(child.pid))
        sid = self.record.submission_id
        progress.status(f"{sid}: detached; waiting for Ray to accept the job")
        deadline = time.monotonic() + DETACH_SUBMIT_TIMEOUT_S
        while True:
            record = records.read_record(run_dir)
            if record.submitted or record.status in records.TERMINAL:
                break
            if child.poll() is not None:
                record = lifecycle.reconcile(run_dir)
                break
            if interrupts() or time.monotonic() > deadline:
                child.send_signal(signal.SIGTERM)  # it stops the job and the head, and closes the record
                child.wait()
                progress.clear()
                record = records.read_record(run_dir)
                progress.note(f"{sid}: {record.status}" + ("" if interrupts() else
                              f" (Ray had not accepted the job after {DETACH_SUBMIT_TIMEOUT_S}s)"))
                return EXIT_INTERRUPTED if interrupts() else 1
            progress.tick()
            time.sleep(0.2)
        progress.clear()
        if not record.submitted:
            progress.note(f"{sid}: {record.status}" + (f": {record.message}" if record.message else "")
                          + f"; supervisor log: {display_path(run_dir / SUPERVISOR_LOG)}")
            return record.exit_code if record.exit_code else 1
        self.record = record
        out = sys.stdout
        try:
            out.write(f"{sid}\n")
            out.flush()
        except OSError:
            pass
        progress.note(f"{sid}: submitted and detached; it runs on after this shell exits")
        progress.note(f"  follow it:  tutorrl logs {sid} --follow")
        progress.note(f"  its state:  tutorrl status {sid}")
        progress.note(f"  stop it:    tutorrl stop {sid}")
        progress.note(f"  record:     {display_path(run_dir)}")
        return 0

    def resume(self, run_dir: Path) -> int:
        """The supervisor's side of a detached run: the record is claimed and
        the local checks passed in `tutorrl run`; start the head, submit, follow."""
        bundle, bundle_path, digest, bundle_id, job, spec = self._load()
        names = submit.passthrough_names(job)
        passthrough = {n: os.environ[n] for n in names if n in os.environ}
        self.secrets = [v for v in passthrough.values() if v]
        self.roots = preflight.root_values(spec)
        cluster.drop_hijack_vars()
        token = cluster.token_from_environment() if self.cluster_url else None
        self.run_dir = run_dir
        interrupts = Interrupts(self.progress)
        interrupts.install()
        try:
            with records.locked(run_dir):
                self.record = records.read_record(run_dir)
                self._save(owner=lifecycle.this_process())
            if self.record.status in records.TERMINAL:
                return self.record.exit_code or 0
            return self._execute(bundle, bundle_path, bundle_id, digest, passthrough, token, interrupts)
        finally:
            interrupts.restore()

    def _execute(self, bundle, bundle_path, bundle_id, digest, passthrough, token, interrupts) -> int:
        progress = self.progress
        self.interrupts = interrupts
        try:
            if self.cluster_url:
                url, headers = self.cluster_url, cluster.auth_headers(token)
                progress.status(f"connecting to {url}")
            elif self.shared_head is not None:
                self.head = self.shared_head
                url, headers = self.head.url, self.head.headers
                self._save(head=lifecycle.this_process(self.head.pid), head_dir=str(self.head.run_dir),
                           address=url, dashboard=url)
            else:
                if not self._plain_http():
                    # Ray's job client takes seconds to import; it loads while the head starts.
                    threading.Thread(target=_import_job_client, name="tutorrl-import-ray", daemon=True).start()
                url, headers = self._start_head(interrupts)
            progress.note(f"Ray dashboard: {url}")
            if interrupts():
                return self._interrupted()

            progress.status("checking cluster resources")
            resources = self._head_resources() or self.jobs.resources(url, headers)
            findings = preflight.PreflightReport()
            where = "the embedded Ray head" if self.head else url
            preflight.check_cluster(bundle.spec, bundle.job, resources, dry_run=bool(self.args.dry_run),
                                    where=where, findings=findings)
            for note in findings.notes:
                progress.note(note)
            try:
                findings.raise_if_any("cluster resources")
            except RefusedError as exc:
                self._save(status="refused", ended=records.utc_now(), exit_code=exc.exit_code,
                           message=str(exc).splitlines()[0])
                raise

            if self._plain_http():
                from tutorrl.runtime import jobs_api

                self.client = jobs_api.http_client(url, headers)
            else:
                self.client = self.jobs.client(url, headers)
            self._submit(bundle, bundle_path, bundle_id, digest, passthrough, interrupts)
            if interrupts():
                return self._interrupted()
            code = self._follow(interrupts)
            if self.retry is not None:
                code = self._retry_loop(code, bundle, bundle_path, digest, passthrough, interrupts)
            return code
        except TutorrlError as exc:
            if self.record is not None and self.record.status not in records.TERMINAL:
                self._save(status="refused", ended=records.utc_now(), exit_code=exc.exit_code,
                           message=submit.Redactor(self.secrets).scrub(exc.render())[:1000])
            raise
        except BaseException as exc:
            if self.record is not None and self.record.status not in records.TERMINAL:
                self._save(status="failed", ended=records.utc_now(), exit_code=1,
                           message=f"tutorrl error: {type(exc).__name__}: {exc}"[:500])
            raise
        finally:
            self._shutdown()
            for line in self.summary:
                progress.note(line)
            if self.record is not None and self.record.status in records.TERMINAL and self.record.mlflow_runs:
                self._close_mlflow()
            if self.record is not None and self.record.status in records.TERMINAL:
                self.evidence_failed = lifecycle.scan_evidence(bundle_path, self.record, progress,
                                                                  loaded=getattr(self, "bundle", None))

    def _start_head(self, interrupts) -> tuple[str, dict[str, str]]:
        from tutorrl.runtime.head import EmbeddedHead

        self.head = EmbeddedHead(run_id=self.record.submission_id, workdir=self.cwd,
                                 num_gpus=getattr(self.args, "num_gpus", None),
                                 python=preflight.job_python(self.job_env),
                                 lean=bool(self.args.dry_run))
        self.head.started = lambda head: self._save(
            head=lifecycle.this_process(head.proc.pid), head_dir=str(head.run_dir))
        self.head.start(self.progress, should_stop=interrupts)
        url, headers = self.head.url, self.head.headers
        self._save(address=url, dashboard=url)
        return url, headers

    # -- retries (runtime/retry.py) -----------------------------------------
    def _retry_loop(self, code, bundle, bundle_path, digest, passthrough, interrupts) -> int:
        """After each attempt: close its entry, and either end the run or resubmit it resuming
        from the newest checkpoint whose evidence verifies."""
        progress, policy = self.progress, self.retry
        total = bundle.spec.trainer.total_steps
        while True:
            # record.retries is policy.retries (set with the first attempt): may_follow is the one spelling of
            # "failed with retries left", which logs --follow and stop read too.
            if (retry.may_follow(self.record) and not interrupts()
                    and retry.user_error(self.record.exit_code, self._log_tail()) is None):
                # A retry follows: this attempt's checkpoints are recorded now (the scan at the end would be too
                # late to resume from; a step killed between its save and its metrics line is known by them).
                lifecycle.scan_evidence(bundle_path, self.record, progress)
                self.record = records.read_record(self.run_dir)
            attempt = self._close_attempt(bundle_path)
            run_id, n = self.record.run_id, len(self.record.attempts)
            if self.record.status == "stopped":
                return code
            if interrupts():
                if self.record.status != "failed":
                    return code
                self._save(status="stopped", exit_code=EXIT_INTERRUPTED, message=f"interrupted before retry {n}")
                return EXIT_INTERRUPTED
            if self.record.status == "succeeded":
                short = retry.shortfall(succeeded=True, resumed_step=attempt.resumed_step, trained=attempt.trained,
                                        reached=self._reached(), total=total)
                if short is None:
                    return code
                progress.note(f"{run_id}: {short}")
                self._save(status="failed", exit_code=1, message=short)
                return 1
            why = retry.user_error(self.record.exit_code, self._log_tail())
            if why is not None:
                progress.note(f"{run_id}: not retried: {why}")
                return code
            if n > policy.retries:
                reached = self._reached()
                progress.note(f"{run_id}: attempt {n} failed; no retries left (--retries {policy.retries})"
                              + (f"; the run's last step is {reached} of {total}" if reached is not None and total else ""))
                return code
            delay = policy.delay(n)
            progress.note(f"{run_id}: attempt {n} failed (exit {self.record.exit_code}); retry {n}/{policy.retries}"
                          + (f" in {delay:g}s" if delay else " now"))
            wait = self.wait or (lambda seconds: interrupts.event.wait(seconds))
            if wait(delay) or interrupts():
                # Stopped between two attempts (`tutorrl stop`, Ctrl-C during the backoff): no job runs to stop.
                self._save(status="stopped", exit_code=EXIT_INTERRUPTED, message=f"interrupted before retry {n}")
                return EXIT_INTERRUPTED
            code = self._resubmit(n, bundle, bundle_path, digest, passthrough, interrupts)

    def _close_attempt(self, bundle_path: Path) -> records.Attempt:
        attempt = self.record.attempts[-1]
        attempt.ended, attempt.status, attempt.exit_code = self.record.ended, self.record.status, self.record.exit_code
        attempt.trained = sorted(set(self.attempt_steps) | set(self._recorded_steps(bundle_path)))
        attempt.reached_step = max(attempt.trained, default=attempt.resumed_step)
        attempt.message = self.record.message
        self._save(attempts=self.record.attempts)
        return attempt

    def _recorded_steps(self, bundle_path: Path) -> list[int]:
        """The steps this attempt's evidence records cover (what it checkpointed)."""
        from tutorrl.evidence import read_records

        since = self.record.evidence_since or 0
        try:
            return [s.predicate.checkpoint.step for path, s in read_records(bundle_path)
                    if s is not None and s.predicate.run.run_id == self.record.run_id
                    and path.stem.isdigit() and int(path.stem) > since]
        except TutorrlError:
            return []

    def _reached(self) -> int | None:
        return max((a.reached_step for a in self.record.attempts if a.reached_step is not None), default=None)

    def _log_tail(self, limit: int = 65536) -> str:
        try:
            with open(self.run_dir / records.LOG_FILE, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                fh.seek(max(0, fh.tell() - limit))
                return fh.read().decode("utf-8", errors="replace")
        except OSError:
            return ""

    def _resubmit(self, n, bundle, bundle_path, digest, passthrough, interrupts) -> int:
        from tutorrl.evidence import choose_resume_point, evidence_length

        progress, run_id = self.progress, self.record.run_id
        choice = choose_resume_point(bundle_path, self.cwd, self.roots, digest)
        for line in choice.skipped:
            progress.note(f"{run_id}: not resumed from {line}")
        if choice.step is None:
            progress.note(f"{run_id}: no checkpoint whose evidence verifies: attempt {n + 1} starts from scratch")
            self.launch_args = retry.fresh_overrides(bundle.manifest.verl, bundle.manifest.variant)
        else:
            progress.note(f"{run_id}: attempt {n + 1} resumes from {choice.directory} (record {choice.record}: "
                          "its files hashed again match it)")
            self.launch_args = retry.resume_overrides(bundle.manifest.verl, bundle.manifest.variant, choice.directory)
        # The steps above the one resumed from are written again by this attempt: they are its to record.
        prior = [s for s in choice.steps if choice.step is not None and s <= choice.step]
        sid = retry.submission_id(run_id, n)
        attempt = records.Attempt(submission_id=sid, started=records.utc_now(), resumed_step=choice.step,
                                  resumed_from=choice.directory, resumed_record=choice.record,
                                  skipped=list(choice.skipped))
        self._save(submission_id=sid, status="pending", submitted=False, ended=None, exit_code=None, message=None,
                   prior_steps=prior, resumed_step=choice.step, evidence_since=evidence_length(bundle_path),
                   attempts=[*self.record.attempts, attempt], evidence_problems=[], evidence_exit_code=None)
        if self.head is not None and not getattr(self.head, "shared", False) and not self.head.alive():
            progress.note(f"{run_id}: the embedded Ray head is gone; starting another")
            url, headers = self._start_head(interrupts)
            self.client = self.jobs.client(url, headers)
        self._submit(bundle, bundle_path, None, digest, passthrough, interrupts)
        if interrupts():
            return self._interrupted()
        return self._follow(interrupts)

    def _head_resources(self):
        """A lean head's node table, written by its program (it runs no State API); None: ask the API."""
        from tutorrl.runtime.options import RAY

        if self.cluster_url or self.head is None or self.jobs is not RAY:
            return None
        return self.head.resources()

    def _plain_http(self) -> bool:
        """Whether the job goes through jobs_api.HttpJobClient, without Ray's SDK: a dry run on a
        head of its own (a few lines of log, nothing to upload), when Ray's Jobs API is where jobs go."""
        from tutorrl.runtime.options import RAY

        return (bool(self.args.dry_run) and not self.cluster_url and self.shared_head is None
                and self.jobs is RAY)

    def _submit(self, bundle, bundle_path, bundle_id, digest, passthrough, interrupts) -> None:
        # On the embedded head the values go in a file only this user can read,
        # inside the head's private folder (removed with it): never in env_vars,
        # which Ray's Jobs API returns in plain text.
        secrets_file = None
        if self.head is not None and self.head.run_dir is not None and passthrough:
            secrets_file = self.secrets_file = job_secrets.write(self.head.run_dir, passthrough,
                                                                 job=self.record.submission_id)
        launch_env = self._mlflow_launch(bundle, bundle_path)
        for _ in range(50):
            sid = self.record.submission_id
            verl_file = None if self.args.dry_run else metrics.file_logger_path(
                bundle.spec, bundle.job, self.run_dir, upload=self.upload)
            sub = submit.build_submission(
                bundle.job, bundle_path=bundle_path, cwd=self.cwd, submission_id=sid,
                upload=self.upload, dry_run=bool(self.args.dry_run), passthrough=passthrough,
                extra_env={**self.roots, **({metrics.FILE_LOGGER_ENV: str(verl_file)} if verl_file else {}),
                           **tracker.environment(bundle.spec, self.record.tracker_id), **launch_env},
                secrets_file=secrets_file, hydra_dir=(self.run_dir / HYDRA_DIR).resolve(),
                launch_args=self.launch_args + self._tracker_args(bundle, bundle_path),
                stdout_to=self.run_dir / dryrun.RAW_FILE if self.args.dry_run and not self.upload else None)
            self.progress.status(f"submitting {sid}" + (" (uploading the bundle)" if self.upload else ""))
            try:
                self.client.submit_job(**sub.kwargs)
            except RuntimeError as exc:
                if "already exists" not in str(exc):
                    raise RefusedError(f"Ray refused the job: {exc}") from None
                if bundle_id is None:  # a retry's id, derived from the run's: not ours to renumber
                    raise RefusedError(f"Ray refused the retry: a job {sid} already exists on the cluster") from None
                # Another submitter (another checkout of this bundle) used this id on the cluster.
                self._save(status="refused", ended=records.utc_now(), exit_code=2,
                           message="submission id already used on the cluster")
                mlflow_ids = {"mlflow_run_id": self.record.mlflow_run_id, "mlflow_runs": self.record.mlflow_runs}
                self._claim(bundle_path, bundle_id, digest, start_after=self.record.attempt)
                self._save(**mlflow_ids)  # the MLflow run made for this launch is the new record's
                continue
            self.submitted = True
            self.attempt_steps = []
            self._save(status="pending", submitted=True,
                       dashboard=self.record.dashboard or (self.cluster_url if self.cluster_url else None))
            # The supervisor, and a caller that asked for no echo: job.log only.
            out = open(os.devnull, "w") if self.record.detached or not self.echo else None
            self.metrics = metrics.Follower(self.run_dir / metrics.METRICS_FILE, total=bundle.spec.trainer.total_steps,
                                            on_point=self._show_metrics)
            if verl_file is not None:
                self.metrics_tail = metrics.FileTail(verl_file, self.metrics)
                self.metrics_tail.start()
            later = len(self.record.attempts) > 1
            self.sink = submit.LogSink(self.run_dir / records.LOG_FILE, sub.secrets, out=out, progress=self.progress,
                                       on_text=self.metrics.feed_console, append=later)
            if later:
                self.sink.note(f"tutorrl: attempt {len(self.record.attempts)} ({sid})"
                               + (f", resuming from {self.record.attempts[-1].resumed_from}"
                                  if self.record.attempts[-1].resumed_from else ", from scratch"))
            self.follower = submit.LogFollower(self.client, sid, self.sink)
            self.follower.start()
            return
        raise RefusedError("could not find a free submission id on the cluster after 50 attempts")

    def _mlflow_launch(self, bundle, bundle_path: Path) -> dict[str, str]:
        """The MLflow run this launch of verl logs into (runtime/mlflow_run.py), as its environment."""
        spec = bundle.spec
        if not mlflow_run.wanted(tracker.loggers(spec)) or self.args.dry_run:
            return {}
        if self.upload or not spec.experiment.project:
            self.progress.note("tracker: verl starts an MLflow run of its own, not tied to this run's record ("
                               + ("the job runs on the cluster, whose MLflow store tutorrl may not reach)" if self.upload
                                  else "set [experiment] project: verl names the MLflow experiment by it)"))
            return {}
        from tutorrl.evidence import evidence_head

        m = bundle.manifest
        identity = {"bundle": m.digest, "bundle_id": m.id, "run_id": self.record.run_id,
                    "experiment": spec.experiment.name, "verl": m.verl, "evidence_head": evidence_head(bundle_path)}
        ask = mlflow_run.ask_for_run(env=self.job_env, experiment=spec.experiment.project,
                                     run_name=spec.experiment.name, parent=self.record.mlflow_run_id,
                                     identity=identity, attempt=len(self.record.mlflow_runs) + 1)
        parent, run, note = mlflow_run.open_run(preflight.job_python(self.job_env), ask, self.job_env,
                                                inherited=not self.record.mlflow_runs)
        if note:
            self.progress.note(f"tracker: {note}")
        self._save(mlflow_run_id=parent, mlflow_runs=[*self.record.mlflow_runs, run])
        self.progress.note(f"tracker: MLflow run {run}, nested under {parent} (this run's)")
        return {mlflow_run.RUN_ID_ENV: run}

    def _close_mlflow(self) -> None:
        r = self.record
        statuses = [a.status for a in r.attempts] if r.attempts else [r.status]
        runs = [(run, statuses[i] if i < len(statuses) else r.status) for i, run in enumerate(r.mlflow_runs)]
        why = mlflow_run.close_run(preflight.job_python(self.job_env), env=self.job_env, parent=r.mlflow_run_id,
                                   runs=runs, status=r.status, metrics_file=self.run_dir / metrics.METRICS_FILE)
        if why:
            self.progress.note(f"tracker: MLflow run {r.mlflow_run_id} not closed: {why}")

    def _tracker_args(self, bundle, bundle_path: Path) -> list[str]:
        if not tracker.wanted(bundle.spec) or self.args.dry_run:
            return []
        from tutorrl.evidence import evidence_head

        m = bundle.manifest
        return tracker.config_overrides(digest=m.digest, bundle_id=m.id, run_id=self.record.run_id,
                                        experiment=bundle.spec.experiment.name, release=m.verl,
                                        evidence_head=None if self.upload else evidence_head(bundle_path) or "none",
                                        tracker_id=self.record.tracker_id)

    def _follow(self, interrupts) -> int:
        sid = self.record.submission_id
        progress = self.progress

        def on_status(status: str) -> None:
            self.job_status = status
            if status == "PENDING":
                progress.status(f"{sid}: PENDING (waiting for resources and the runtime env)")
                self._save(status="pending")
            elif status == "RUNNING":
                progress.status(f"{sid}: RUNNING" + (" (dry run: verl composes its config)" if self.args.dry_run else ""))
                self._save(status="running")

        # A dry run's verdict is awaited: its end is seen within 0.2 s (Ray's supervisor notes the
        # entrypoint's exit within 0.1 s), within 50 ms once verl has printed its config; a training
        # run's status is asked for every 0.5 s.
        status = submit.wait_terminal(self.client, sid, on_status=on_status, should_stop=interrupts,
                                      poll_s=self._dry_run_poll if self.args.dry_run else 0.5)
        if status is None:
            return self._interrupted()
        self._close_log()
        info = self.client.get_job_info(sid)
        summary = None
        if status == "SUCCEEDED":
            code, state = 0, "succeeded"
            msg = None
            if self.args.dry_run:
                summary = self._dry_run_summary()
                msg = summary[0]
        elif status == "FAILED":
            code = info.driver_exit_code if info.driver_exit_code else 1
            state = "failed"
            msg = submit.Redactor(self.secrets).scrub(lifecycle.failure_summary(info.error_type, info.message))
        else:  # stopped by someone else (ray job stop, the dashboard)
            code, state, msg = 1, "stopped", "stopped outside tutorrl"
        self._save(status=state, exit_code=code, ended=records.utc_now(), message=msg)
        progress.clear()
        if summary is not None:
            # Said as soon as it is known: stopping the head (seconds) follows, and changes nothing.
            for line in summary:
                progress.note(line)
            return code
        progress.note(f"{sid}: {status} (exit code {code}); log: {self.run_dir / records.LOG_FILE}")
        if msg and state != "succeeded":
            progress.note(msg)
        return code

    def _dry_run_poll(self) -> float:
        """How long before a dry run's status is asked again: its raw output (verl's printed config)
        holds something once verl is returning."""
        if self.upload or self.cluster_url:  # a cluster (and there, the output is in the job log)
            return DRY_RUN_POLL_S
        try:
            printed = (self.run_dir / dryrun.RAW_FILE).stat().st_size > 0
        except OSError:
            printed = False
        if not printed:
            return DRY_RUN_POLL_S
        since = self.__dict__.setdefault("_printed_at", time.monotonic())
        return DRY_RUN_END_POLL_S if time.monotonic() - since < DRY_RUN_END_FAST_S else DRY_RUN_POLL_S

    def _dry_run_summary(self) -> list[str]:
        """The lines of a successful dry run, in place of verl's printed config: what it
        composed, what it proved and what it did not, where the config and the log are."""
        from tutorrl._files import display_path

        log = self.run_dir / records.LOG_FILE
        try:
            count, config = dryrun.summarise(self.run_dir, log, in_log=self.upload)
        except OSError as exc:  # the job succeeded; a summary that cannot be read must not fail it
            count, config = None, log
            self.progress.note(f"could not read the composed config: {exc}")
        release = self.release
        accepted = (f"accepted all {count} overrides" if count is not None
                    else "accepted every override (their number is not in its output)")
        spec, job = self.bundle.spec, self.bundle.job
        try:
            hook = "tutorrl.evidence.hook_check" in (Path(self.bundle.path) / "launch.sh").read_text()
        except OSError:
            hook = False
        proof = dryrun.proof_lines(release=release, overrides=count, roots=sorted(spec.roots),
                                   passthrough=submit.passthrough_names(job), evidence_hook=hook,
                                   gpus=preflight.needed_gpus(spec), uploaded=self.upload)
        return [
            f"dry run succeeded: verl {release} (the bundle's target release) composed its config and {accepted}",
            *proof,
            f"full composed config: {display_path(config)}",
            f"job log: {display_path(log)}",
        ]

    def _interrupted(self) -> int:
        if self.submitted and self.client is not None:
            sid = self.record.submission_id
            self.progress.status(f"{sid}: stopping the job")
            final = submit.stop_job(self.client, sid)
            if final is None:
                self.progress.note(f"{sid} did not stop in time (a PENDING job cannot be stopped); "
                                   + ("the embedded head is stopped next" if self.head else "it may still start on the cluster"))
        self._close_log()
        signum = self.interrupts.signum if self.interrupts is not None else None
        name = signal.Signals(signum).name if signum else None
        self._save(status="stopped", exit_code=EXIT_INTERRUPTED, ended=records.utc_now(),
                   message=f"interrupted ({name})" if name else "interrupted")
        return EXIT_INTERRUPTED

    def _show_metrics(self, follower) -> None:
        """The status line while verl trains: step k/N, steps per hour, ETA, the last score."""
        summary = metrics.summarise(follower.points, follower.total)
        self.progress.status(f"{self.record.submission_id}: RUNNING, {metrics.status_text(summary)}")

    def _close_log(self) -> None:
        if self.follower is not None:
            self.follower.stop()
            self.follower = None
        if self.sink is not None:
            if self.client is not None:
                submit.finish_log(self.client, self.record.submission_id, self.sink)
            self.sink.close()
            self.sink = None
        if self.metrics_tail is not None:
            self.metrics_tail.stop()
            self.metrics_tail = None
        if self.metrics is not None:
            self.metrics.close()
            self.attempt_steps = [p.step for p in self.metrics.points]
            self.metrics = None

    def _shutdown(self) -> None:
        # Job first, then head: stopping the head under a running job orphans the job's processes.
        if self.submitted and self.client is not None and self.record.status not in records.TERMINAL:
            submit.stop_job(self.client, self.record.submission_id)
        try:
            self._close_log()
        finally:
            if self.head is not None and getattr(self.head, "shared", False):
                # The set's head runs on for its other runs: this job's values go now, not with it.
                if self.secrets_file is not None:
                    self.secrets_file.unlink(missing_ok=True)
                self.head = None
            elif self.head is not None:
                self.progress.status("stopping the embedded Ray head")
                self.head.stop()
                self.head = None
            self.progress.clear()


def exit_code_of(session: RunSession, code: int) -> int:
    """What `tutorrl run` exits with, given the job's code: the job's own failure wins,
    unless it is the evidence check that stopped it."""
    failed = session.evidence_failed
    if failed is not None and (code == 0 or failed.stopped):
        return failed.exit_code
    return code
