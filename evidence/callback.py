"""verl 0.9.1's `trainer.checkpoint_callback_class` hook: a record at every save.

verl (`verl/trainer/ppo/checkpoint_callback.py`) imports the class by its fully
qualified name, constructs it once as `cls(config=<full trainer DictConfig>)`
in the trainer's own process (the TaskRunner Ray actor, not the job's entry
process), and calls `on_save(trainer=, global_step=, checkpoint_dir=,
async_save=)` with keywords after each save -- only in the v1 trainer
(`trainer.use_v1=true`, the default); the legacy trainer never calls it.

The bundle is found from the environment, which the runtime exports into the
Ray job so that actors see it: TUTORRL_BUNDLE_DIR (absolute) and TUTORRL_RUN_ID.

At on_save no engine serves the checkpoint yet (verl pushes it in on_step_end),
so the record is written right after that push, with every engine read
(`publication.check_after_push`); where that cannot be (trainer mode, rollout),
it is written at once and says why.

Exceptions from on_save abort training in verl. Evidence must not cost a
multi-hour run, and `record_run_checkpoints` after the run records anything
missed, so failures here are printed, never raised.
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path

ENV_BUNDLE = "TUTORRL_BUNDLE_DIR"
ENV_RUN_ID = "TUTORRL_RUN_ID"

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


def _warn(msg: str) -> None:
    print(f"tutorrl evidence: {msg}", file=sys.stderr, flush=True)


class EvidenceCallback(_Base):
    """Appends a checkpoint record to the bundle's evidence after each verl save."""

    def __init__(self, config=None, **kwargs):
        super().__init__(config=config)
        self.bundle_dir = os.environ.get(ENV_BUNDLE) or None
        self.run_id = os.environ.get(ENV_RUN_ID) or "unknown"
        if self.bundle_dir is None:
            _warn(f"{ENV_BUNDLE} is not set in the trainer process: no records during this run"
                  " (the post-run scan still records checkpoints)")
        elif not os.path.isabs(self.bundle_dir):
            # Ray actors do not run in the submitter's directory.
            _warn(f"{ENV_BUNDLE}={self.bundle_dir!r} is relative; resolved against {os.getcwd()!r}")

    def on_save(self, trainer=None, global_step: int | None = None, checkpoint_dir: str | None = None,
                async_save: bool = False, **kwargs) -> None:
        if self.bundle_dir is None or checkpoint_dir is None:
            return
        if async_save:
            _warn(f"step {global_step}: asynchronous save is not durable yet; left to the post-run scan")
            return
        try:
            from tutorrl.evidence import publication
            from tutorrl.evidence.bundle import load_bundle

            bundle = load_bundle(Path(self.bundle_dir))
            # checkpoint_dir may be relative: to this process's cwd, where verl wrote it.
            step_dir = Path(os.path.abspath(checkpoint_dir))

            def deliver(observed):
                self._record(bundle, step_dir, global_step, observed=observed)

            # The record waits for the push that serves this checkpoint (on_step_end).
            why_not = publication.check_after_push(trainer, global_step, deliver, control=bundle.publication_control)
            if why_not is None:
                return
            self._record(bundle, step_dir, global_step, skip_reason=f"{NOT_YET_SERVED}; not read after it: {why_not}")
        except Exception:
            _warn(f"step {global_step}: could not record evidence (training continues):\n{traceback.format_exc()}")

    def _record(self, bundle, step_dir: Path, global_step, *, observed=None, skip_reason: str | None = None) -> None:
        try:
            from tutorrl.evidence.record import record_checkpoint

            path = record_checkpoint(bundle, self.run_id, step_dir, source="callback", finished=None, progress=False,
                                     publication_skip_reason=skip_reason, observed=observed)
            _warn(f"step {global_step}: recorded {path.name}")
        except Exception:
            _warn(f"step {global_step}: could not record evidence (training continues):\n{traceback.format_exc()}")
