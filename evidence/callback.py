"""verl 0.9.1's `trainer.checkpoint_callback_class` hook: a record at every save.

verl (`verl/trainer/ppo/checkpoint_callback.py`) imports the class by its fully
qualified name, constructs it once as `cls(config=<full trainer DictConfig>)`
in the trainer's own process (the TaskRunner Ray actor, not the job's entry
process), and calls `on_save(trainer=, global_step=, checkpoint_dir=,
async_save=)` with keywords after each save -- only in the v1 trainer
(`trainer.use_v1=true`, the default); the legacy trainer never calls it.

The bundle is found from the environment, which the runtime exports into the
Ray job so that actors see it: TUTORRL_BUNDLE_DIR (absolute) and TUTORRL_RUN_ID.
The failure policy is compiled into the bundle's environment:
TUTORRL_EVIDENCE_ON_FAILURE=stop when the spec says `[evidence] on_failure =
"stop"` (absent: "record").

Publication: at on_save no engine serves the checkpoint yet (verl pushes it
in on_step_end), so the snapshot is queued right after that push, with every
engine read there (`publication.check_after_push`, in the trainer's thread:
the engines answer in seconds); where that cannot be (trainer mode, rollout)
it is queued at once and its record says why.

Training is not stalled. `on_save` only takes a *snapshot* (list the files,
check the layout, read the safetensors headers, open every file: milliseconds)
and queues it; one worker thread hashes it beside training, with a few threads
and one fixed buffer each, and appends the record. Decisions:

- One worker, first in first out: record N is published (and fsync'd) before
  record N+1 is hashed, so records appear in save order and each is durable
  before the next save's record exists.
- Bounded: at most MAX_WAITING snapshots wait behind the one being hashed. A
  save that finds the queue full waits in `on_save` for a slot (training is
  then slowed, never a record lost), which bounds the open files, the disk
  space held by deleted checkpoints and memory.
- Retention: verl may delete an older checkpoint (`max_actor_ckpt_to_keep`)
  while it waits. Its files were opened in `on_save`, so it is hashed as it
  was saved; the record says the files have since gone from their path.
- The end: verl's v1 trainer calls no callback method when training ends, and
  a Ray actor's process is killed with the job, so a daemon thread's work
  would be lost. `on_save` of the last step (global_step >=
  trainer.total_training_steps: verl always saves it when save_freq > 0)
  waits for every queued record; an `atexit` handler waits too for an
  ordinary interpreter exit. Anything still lost (a crash, a kill) is recorded
  by `tutorrl run`'s post-run scan, which records every checkpoint on disk
  that no record names.

Failures (a check that fails, a record that cannot be written): by default
("record") they are printed, recorded in the chain where a record could be
written, and `tutorrl run` reports them with its own exit status; training
goes on. With "stop", `EvidenceStopped` is raised into verl, which aborts
training: out of the push itself when a publication check fails there --
read right after it, or found by that push's record (the match with the
checkpoint's export), which under "stop" is written before the push returns
(the push then waits for the checkpoint's hashing: strictness costs that
wait) -- or from `on_save` (verl lets its exceptions propagate) at the save
that finds a failure, or, for a checkpoint no push serves (a file check of a
record queued without the engines), at the next save (which, under "stop",
first waits for the previous record) or the last step's wait. Without a bundle to record into, "stop"
refuses at construction, before the first step.
"""

from __future__ import annotations

import atexit
import os
import queue
import sys
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path

from tutorrl.contract import BUNDLE_DIR_ENV as ENV_BUNDLE  # noqa: E402
from tutorrl.contract import EVIDENCE_ON_FAILURE_ENV as ENV_ON_FAILURE  # noqa: E402
from tutorrl.contract import RUN_ID_ENV as ENV_RUN_ID  # noqa: E402
ON_FAILURE = ("record", "stop")
# Snapshots waiting behind the one being hashed (see the module docstring).
MAX_WAITING = 2
# Hashing threads beside training: the trainer process also feeds the GPUs.
# They run at the lowest priority (hashing.hash_jobs(background=True)), so
# on a host with few cores they take what training leaves, not half of it.
HASH_THREADS = 4

# verl 0.9.1 calls on_save right after writing the tracker, before on_step_end
# pushes this step's weights to the (sleeping) rollout replicas.
NOT_YET_SERVED = (
    "verl 0.9.1 calls on_save before this step's weights are pushed to the rollout engines"
    " (on_step_end), so no engine serves this checkpoint yet; check by hand with --engine"
)

try:  # subclass verl's no-op base where verl is installed (inside a run it is)
    from verl.trainer.ppo.checkpoint_callback import CheckpointCallback as _Base
except ImportError:  # pragma: no cover - exercised only without verl

    class _Base:  # type: ignore[no-redef]
        def __init__(self, config=None):
            self.config = config


from tutorrl.evidence.publication import EvidenceStopped  # noqa: E402  (raised from the push as well)


def _warn(msg: str) -> None:
    print(f"tutorrl evidence: {msg}", file=sys.stderr, flush=True)


@dataclass
class _Task:
    step: int | None
    snapshot: object  # tutorrl.evidence.record.Snapshot (imported lazily)
    observed: object = None  # publication.Observed, read right after the push that serves it
    skip_reason: str | None = NOT_YET_SERVED


class EvidenceCallback(_Base):
    """Appends a checkpoint record to the bundle's evidence after each verl save, off the training thread."""

    def __init__(self, config=None, **kwargs):
        super().__init__(config=config)
        self.bundle_dir = os.environ.get(ENV_BUNDLE) or None
        self.run_id = os.environ.get(ENV_RUN_ID) or "unknown"
        policy = os.environ.get(ENV_ON_FAILURE) or "record"
        if policy not in ON_FAILURE:
            raise EvidenceStopped(f"{ENV_ON_FAILURE}={policy!r}: expected one of {', '.join(ON_FAILURE)}")
        self.on_failure = policy
        self.failures: list[str] = []
        self._reported = 0
        self._lock = threading.Lock()
        self._queue: queue.Queue[_Task] = queue.Queue(maxsize=MAX_WAITING)
        self._thread: threading.Thread | None = None
        self._control: bool | None = None  # [evidence] publication_control
        if self.bundle_dir is None:
            if self.on_failure == "stop":
                raise EvidenceStopped(
                    f"evidence.on_failure = \"stop\" but {ENV_BUNDLE} is not set in the trainer process, so no "
                    "checkpoint can be recorded during the run (was the bundle uploaded to a cluster that cannot "
                    "see its folder?); stopping before the first step")
            _warn(f"{ENV_BUNDLE} is not set in the trainer process: no records during this run"
                  " (the post-run scan still records checkpoints)")
        elif not os.path.isabs(self.bundle_dir):
            # Ray actors do not run in the submitter's directory.
            _warn(f"{ENV_BUNDLE}={self.bundle_dir!r} is relative; resolved against {os.getcwd()!r}")
        if self.bundle_dir is not None and config is not None:
            # Before verl builds its checkpoint manager: the engines are read
            # before its first push (publication.arm), as miles reads them.
            try:
                from tutorrl.evidence import publication

                why = publication.arm(config)
            except Exception as exc:  # noqa: BLE001 - never into verl's constructor
                why = f"{type(exc).__name__}: {exc}"
            if why:
                _warn(f"engines not read before the first push: {why}")

    # -- verl's hook ---------------------------------------------------------
    def on_save(self, trainer=None, global_step: int | None = None, checkpoint_dir: str | None = None,
                async_save: bool = False, **kwargs) -> None:
        if self.on_failure == "stop":
            # The previous save's record first: a failure stops the run at the
            # latest one save after it happened, never later. Saves are minutes
            # apart, so this wait is normally already over.
            self.wait()
        if self.bundle_dir is None or checkpoint_dir is None:
            return
        if async_save:
            _warn(f"step {global_step}: asynchronous save is not durable yet; left to the post-run scan")
            return
        from tutorrl.evidence.record import Snapshot

        try:
            # checkpoint_dir may be relative: to this process's cwd, where verl wrote it.
            snapshot = Snapshot(Path(os.path.abspath(checkpoint_dir)), hold=True)
        except Exception as exc:  # noqa: BLE001 - anything here is evidence failing, never training
            self._fail(f"step {global_step}: could not take the checkpoint's snapshot: {exc}",
                       traceback.format_exc())
        else:
            last = self._is_last(trainer, global_step)
            why_not = self._after_push(trainer, global_step, snapshot, last)
            if why_not is not None:
                # An engine that cannot show what it serves (vLLM): that alone is the reason.
                from tutorrl.evidence.publication import NOT_CHECKED

                reason = why_not if why_not.startswith(NOT_CHECKED) else f"{NOT_YET_SERVED}; not read after it: {why_not}"
                self._enqueue(_Task(global_step, snapshot, skip_reason=reason))
        if self._is_last(trainer, global_step):
            self.wait()  # verl's last save: nothing after it would wait for the worker
        self._raise_if_failed()

    @staticmethod
    def _is_last(trainer, global_step) -> bool:
        total = getattr(trainer, "total_training_steps", None)
        return isinstance(total, int) and isinstance(global_step, int) and global_step >= total

    def _enqueue(self, task: _Task) -> None:
        self._start()
        self._queue.put(task)  # waits only while MAX_WAITING snapshots wait

    def _after_push(self, trainer, global_step, snapshot, last: bool) -> str | None:
        """Queue ``snapshot`` once verl has pushed this step's weights and every
        engine was read; None when so arranged, else why it cannot be."""
        try:
            from tutorrl.evidence import publication
            from tutorrl.evidence.bundle import load_bundle

            if self._control is None:  # read once: the bundle is re-derived to load it
                self._control = load_bundle(Path(self.bundle_dir)).publication_control
            control = self._control

            stop = self.on_failure == "stop"

            def deliver(observed) -> list[str]:  # in the trainer's thread, right after the push
                self._enqueue(_Task(global_step, snapshot, observed=observed, skip_reason=None))
                # The push after the last save (the run ends next), or any push under
                # "stop": its record is written before the push returns or raises, so
                # a publication that does not match the checkpoint's files stops the
                # run at that push (the failures are handed back, raised there once).
                if last or stop:
                    self._queue.join()
                return self._new_failures() if stop else []

            return publication.check_after_push(trainer, global_step, deliver, control=control, stop=stop)
        except Exception as exc:  # noqa: BLE001 - the record is then written without the engines
            return f"{type(exc).__name__}: {exc}"

    # -- the end of a run ------------------------------------------------------
    def wait(self) -> None:
        """Block until every queued checkpoint is recorded (or has failed); raises under "stop"."""
        if self._thread is not None:
            self._queue.join()
        self._raise_if_failed()

    def _wait_at_exit(self) -> None:
        try:
            self.wait()
        except EvidenceStopped:
            pass  # already printed; the process is ending anyway

    # -- the worker --------------------------------------------------------------
    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="tutorrl-evidence", daemon=True)
            self._thread.start()
            atexit.register(self._wait_at_exit)

    def _work(self) -> None:
        while True:
            task = self._queue.get()
            try:
                self._record(task)
            except Exception as exc:  # noqa: BLE001 - reported, and the worker lives on for the next save
                self._fail(f"step {task.step}: could not record evidence: {exc}", traceback.format_exc())
            finally:
                task.snapshot.close()
                self._queue.task_done()

    def _record(self, task: _Task) -> None:
        """Hash the snapshot, judge it (with the engines' reading taken after the push), publish its record."""
        from tutorrl.evidence.bundle import load_bundle
        from tutorrl.evidence.hashing import default_workers
        from tutorrl.evidence.record import append_record

        from tutorrl.evidence.chain import read_record
        from tutorrl.evidence.statement import decode_record

        bundle = load_bundle(Path(self.bundle_dir))
        inspection = task.snapshot.hash(workers=min(HASH_THREADS, default_workers()), progress=False,
                                        background=True)
        path = append_record(bundle, self.run_id, inspection, source="callback", finished=None,
                             publication_skip_reason=task.skip_reason, observed=task.observed)
        # The record's own verdict: file checks and, where read, publication checks.
        verdict = decode_record(read_record(path)).statement.predicate.verdict
        failed = [f"{c.id} ({c.detail})" for c in verdict.checks if c.status == "fail"]
        if failed:
            self._fail(f"step {task.step}: {path.parent.name}/{path.name} failed: {'; '.join(failed)}")
        else:
            _warn(f"step {task.step}: recorded {path.name}")

    # -- failures ------------------------------------------------------------------
    def _fail(self, message: str, detail: str | None = None) -> None:
        with self._lock:
            self.failures.append(message)
        if self.on_failure == "stop":
            _warn(message)
        else:
            _warn(f"{message} (training continues; evidence.on_failure = \"record\")"
                  + (f"\n{detail}" if detail else ""))

    def _new_failures(self) -> list[str]:
        """The failures not yet raised into verl, now counted as raised."""
        with self._lock:
            new = self.failures[self._reported:]
            self._reported = len(self.failures)
        return new

    def _raise_if_failed(self) -> None:
        if self.on_failure != "stop":
            return
        new = self._new_failures()
        if new:
            raise EvidenceStopped("tutorrl evidence: stopping the run (evidence.on_failure = \"stop\"): "
                                  + "; ".join(new))
