"""One Ray job: building the submission, following it, stopping it.

Completion is decided by ``get_job_status`` -- Ray's log stream ends 3-5 s
after a job does -- and the stream is only for display: once the job is
terminal the stream is cancelled and whatever it had not delivered yet is
taken from ``get_job_logs``, so ``job.log`` is complete either way.
"""

from __future__ import annotations

import asyncio
import re
import shlex
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, TextIO

from tutorrl.errors import BundleError, RefusedError
from tutorrl.runtime import dryrun, job_secrets
from tutorrl.runtime.envtransport import NOTHING_VAR, encode_env

# ray-job.json keys that are submit_job keyword arguments besides entrypoint/runtime_env/metadata.
_PASSED_KWARGS = ("entrypoint_num_cpus", "entrypoint_num_gpus", "entrypoint_memory",
                  "entrypoint_resources", "entrypoint_label_selector")
_KNOWN = {"entrypoint", "runtime_env", "metadata", *_PASSED_KWARGS}
DRY_RUN_ARGS = dryrun.ARGS
HYDRA_SAFE = re.compile(r"[A-Za-z0-9_./@+-]+")
from tutorrl.contract import RUN_ID_ENV  # noqa: E402
# Where verl's checkpoint callback (tutorrl.evidence.callback) appends
# records. Only set when the job sees the bundle's real folder: an uploaded
# copy is Ray's ephemeral one, and records there would be lost (the post-run
# scan records them instead).
from tutorrl.contract import BUNDLE_DIR_ENV  # noqa: E402
# Never shipped to a cluster: run records and evidence are the submitter's.
UPLOAD_EXCLUDES = ["runs/", "evidence/"]


def passthrough_names(job: dict) -> list[str]:
    raw = (job.get("metadata") or {}).get("tutorrl_passthrough", "") or ""
    return [n.strip() for n in raw.split(",") if n.strip()]


@dataclass
class Submission:
    kwargs: dict
    secrets: list[str]  # values to keep out of anything tutorrl writes
    secret_names: tuple[str, ...] = ()

    def describe(self) -> dict:
        """The submission without secret values (for messages and tests)."""
        env = dict(self.kwargs.get("runtime_env", {}).get("env_vars", {}))
        for name in self.secret_names:
            env[name] = "<passthrough>"
        out = dict(self.kwargs)
        out["runtime_env"] = {**self.kwargs.get("runtime_env", {}), "env_vars": env}
        return out


def build_submission(job: dict, *, bundle_path: Path, cwd: Path, submission_id: str, upload: bool,
                     dry_run: bool, passthrough: dict[str, str], stdout_to: Path | None = None,
                     extra_env: dict[str, str] | None = None, secrets_file: Path | None = None,
                     hydra_dir: Path | None = None, launch_args: list[str] | None = None) -> Submission:
    """``stdout_to``: a file for the job's standard output instead of the job log
    (a dry run's composed config; only where the job sees this machine's files).
    ``extra_env``: what tutorrl adds for the job, never secret: the spec's roots
    set in the submitter's environment (launch.sh reads them), the path of
    verl's file logger.
    ``secrets_file``: where ``job_secrets.write`` put the passthrough values
    (embedded head only, where the job runs on this machine): they then reach
    the job through that file, not through ``env_vars``, which Ray's Jobs API
    returns in plain text.
    ``hydra_dir``: where verl's Hydra writes its ``outputs/`` record of the run
    (the run's own folder) instead of the directory the job starts in; passed
    to launch.sh as an argument, so the bundle's bytes are the same either way.
    ``launch_args``: more of launch.sh's arguments (a retry's resume overrides, runtime/retry.py)."""
    unknown = set(job) - _KNOWN
    if unknown:
        raise BundleError(f"{bundle_path}/ray-job.json: unknown field(s) {', '.join(sorted(unknown))}")
    argv = shlex.split(job.get("entrypoint", ""))
    if "launch.sh" not in argv:
        raise BundleError(f"{bundle_path}/ray-job.json: the entrypoint does not run launch.sh: {job.get('entrypoint')!r}")
    extra = list(DRY_RUN_ARGS) if dry_run else []
    if hydra_dir is not None and not dry_run and not upload and HYDRA_SAFE.fullmatch(str(hydra_dir)):
        # Only a path Hydra's override grammar takes as it is (no quoting, no "${" interpolation);
        # any other stays with Hydra's default, outputs/ where the job starts.
        extra.append(f"hydra.run.dir={hydra_dir}")
    extra.extend(launch_args or ())
    if upload:
        # The job's cwd is Ray's unpacked copy of the bundle.
        entrypoint = shlex.join(argv + extra)
    else:
        # No working_dir: the job's cwd would be the head's; relative spec paths
        # mean "relative to where the user ran tutorrl".
        argv = [str(bundle_path / "launch.sh") if a == "launch.sh" else a for a in argv]
        if secrets_file is not None:
            # The entrypoint is not a Ray worker: the setup hook never runs
            # there, so the same loader starts launch.sh with the values set.
            argv = [sys.executable, "-m", job_secrets.__name__, "--", *argv]
        entrypoint = f"cd {shlex.quote(str(cwd))} && exec {shlex.join(argv + extra)}"
        if stdout_to is not None:
            entrypoint += f" > {shlex.quote(str(stdout_to))}"

    runtime_env = dict(job.get("runtime_env") or {})
    env_vars = dict(runtime_env.get("env_vars") or {})
    from tutorrl.evidence import ENV_KEY, configured_key_path

    clash = [n for n in (NOTHING_VAR, RUN_ID_ENV, BUNDLE_DIR_ENV, ENV_KEY, job_secrets.FILE_ENV)
             if n in env_vars or n in passthrough]
    if clash:
        raise RefusedError(f"the bundle sets {', '.join(clash)}, which tutorrl reserves for its own use")
    env_vars.update(extra_env or {})
    if secrets_file is not None and not upload:
        env_vars[job_secrets.FILE_ENV] = str(secrets_file)
        runtime_env["worker_process_setup_hook"] = job_secrets.HOOK
    else:
        env_vars.update(passthrough)
    env_vars[RUN_ID_ENV] = submission_id
    if not upload:
        env_vars[BUNDLE_DIR_ENV] = str(bundle_path.resolve())
        # The trainer's callback signs as tutorrl would here: the key's path (never its bytes), on
        # this machine, where the job sees this machine's files.
        key = configured_key_path()
        if key is not None:
            env_vars[ENV_KEY] = str(key)
    runtime_env["env_vars"] = encode_env(env_vars)
    if upload:
        runtime_env["working_dir"] = str(bundle_path)
        runtime_env["excludes"] = list(runtime_env.get("excludes") or []) + UPLOAD_EXCLUDES

    metadata = {str(k): str(v) for k, v in (job.get("metadata") or {}).items()}
    metadata["tutorrl_run"] = submission_id
    metadata["tutorrl_dry_run"] = "true" if dry_run else "false"

    kwargs = {"entrypoint": entrypoint, "submission_id": submission_id, "runtime_env": runtime_env,
              "metadata": metadata}
    for name in _PASSED_KWARGS:
        if job.get(name) is not None:
            kwargs[name] = job[name]
    if dry_run:
        # Composing the config needs no GPU.
        kwargs["entrypoint_num_gpus"] = 0
    return Submission(kwargs=kwargs, secrets=[v for v in passthrough.values() if v],
                      secret_names=tuple(passthrough))


class Redactor:
    """Replaces secret values in text; holds back a partial line so a secret
    split across two chunks is still caught."""

    MASK = "[redacted]"
    # Masking a one- or two-character value would shred the log while hiding
    # nothing; such a value is not a credential.
    MIN_LENGTH = 4

    def __init__(self, secrets: list[str]):
        self.secrets = sorted({s for s in secrets if len(s) >= self.MIN_LENGTH}, key=len, reverse=True)
        self._pending = ""

    def feed(self, text: str) -> str:
        if not self.secrets:
            return text
        text = self._pending + text
        cut = text.rfind("\n") + 1
        self._pending = text[cut:]
        return self.scrub(text[:cut])

    def flush(self) -> str:
        text, self._pending = self._pending, ""
        return self.scrub(text)

    def scrub(self, text: str) -> str:
        for s in self.secrets:
            text = text.replace(s, self.MASK)
        return text


class LogSink:
    """Job output to the terminal and to job.log, secrets masked in both."""

    def __init__(self, path: Path, secrets: list[str], out: TextIO | None = None, progress=None, on_text=None,
                 append: bool = False):
        import os

        # A retried run's later attempts go on in the same job.log; the first creates it.
        flags = os.O_APPEND if append else os.O_EXCL
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | flags, 0o644)
        self._file = os.fdopen(fd, "w", encoding="utf-8", errors="replace")
        from tutorrl.runtime.progress import safe

        # The terminal may go away mid-run; job.log must still be complete.
        self._out = safe(out if out is not None else sys.stdout)
        self._progress = progress
        self._redactor = Redactor(secrets)
        self._on_text = on_text  # what else reads the log (verl's metrics), masked as job.log is
        self._lock = threading.Lock()
        self.received = 0  # characters of raw job log consumed so far

    def write(self, raw: str) -> None:
        with self._lock:
            self.received += len(raw)
            self._emit(self._redactor.feed(raw))

    def _emit(self, text: str) -> None:
        if not text:
            return
        self._file.write(text)
        self._file.flush()
        if self._on_text is not None:
            self._on_text(text)
        if self._progress is not None:
            self._progress.write_through(text, self._out)
        else:
            self._out.write(text)
            self._out.flush()

    def note(self, line: str) -> None:
        """A line of tutorrl's own in job.log (not the job's output: not counted, not parsed)."""
        with self._lock:
            self._file.write(f"\n{line}\n")
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._emit(self._redactor.flush())
            self._file.close()


class LogFollower:
    """Streams ``tail_job_logs`` into a sink from a background thread."""

    def __init__(self, client, submission_id: str, sink: LogSink):
        self._client = client
        self._sid = submission_id
        self._sink = sink
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task | None = None
        self._thread = threading.Thread(target=self._main, name="tutorrl-log-tail", daemon=True)
        self._started = threading.Event()

    def start(self) -> None:
        self._thread.start()
        self._started.wait(5)

    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop

        async def follow() -> None:
            async for chunk in self._client.tail_job_logs(self._sid):
                self._sink.write(chunk)

        try:
            self._task = loop.create_task(follow())
            self._started.set()
            loop.run_until_complete(self._task)
        except BaseException:  # noqa: BLE001 - display only; job.log is completed from get_job_logs
            pass
        finally:
            self._started.set()
            loop.close()

    def stop(self, timeout: float = 5.0) -> None:
        loop, task = self._loop, self._task
        if loop is not None and task is not None and not task.done():
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:
                pass
        self._thread.join(timeout)


def finish_log(client, submission_id: str, sink: LogSink) -> None:
    """Append what the stream had not delivered, from the complete log."""
    try:
        full = client.get_job_logs(submission_id)
    except Exception:  # noqa: BLE001 - the head may be gone; keep what was streamed
        return
    if len(full) > sink.received:
        sink.write(full[sink.received:])


# Each request to a dashboard is bounded on its own (jobs_api); while a job runs, a dashboard
# that misses answers is given this long before the run gives up on it: a slow answer or two
# must not end (and stop) a training run.
UNANSWERED_S = 120.0


def wait_terminal(client, submission_id: str, *, on_status: Callable[[str], None] | None = None,
                  should_stop: Callable[[], bool] = lambda: False, poll_s: float | Callable[[], float] = 0.5,
                  deadline: float | None = None, unanswered_s: float = UNANSWERED_S) -> str | None:
    """Poll until the job is terminal; returns its status, or None when told to stop / out of time.
    ``poll_s``: seconds between asks, or a function saying how long before the next one."""
    last = None
    pause = poll_s if callable(poll_s) else lambda: poll_s
    silent_since = None
    while True:
        try:
            status = str(client.get_job_status(submission_id).value)
        except RefusedError as exc:
            now = time.monotonic()
            silent_since = now if silent_since is None else silent_since
            if now - silent_since >= unanswered_s:
                raise RefusedError(f"{exc}; no answer about {submission_id} for {unanswered_s:g} s") from None
            if should_stop() or (deadline is not None and now > deadline):
                return None
            time.sleep(pause())
            continue
        silent_since = None
        if status != last:
            last = status
            if on_status:
                on_status(status)
        if status in ("SUCCEEDED", "FAILED", "STOPPED"):
            return status
        if should_stop() or (deadline is not None and time.monotonic() > deadline):
            return None
        time.sleep(pause())


def stop_job(client, submission_id: str, timeout_s: float = 20.0) -> str | None:
    """Ask Ray to stop the job and wait for it to be terminal (Ray escalates to SIGKILL after 3 s)."""
    try:
        client.stop_job(submission_id)
    except Exception:  # noqa: BLE001 - already gone or head unreachable
        pass
    try:
        return wait_terminal(client, submission_id, deadline=time.monotonic() + timeout_s, poll_s=0.25)
    except Exception:  # noqa: BLE001
        return None
