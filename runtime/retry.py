"""``tutorrl run --retries N``: what a retried run decides between attempts.

A job that fails or is preempted (a non-zero exit, a lost node, a killed
TaskRunner) is submitted again, up to N times, resuming from the newest
checkpoint whose evidence record verifies with its files hashed again
(evidence/resume_point.py). The resubmission is the same launch.sh with verl's
resume overrides as its arguments (``trainer.resume_mode=resume_path`` and the
step's folder, under the keys the bundle's release spells them), so every
attempt runs the bundle's bytes as reviewed.

launch.sh passes its arguments to verl before the bundle's own overrides, and
Hydra keeps the last value of a key: a bundle that sets ``trainer.resume_mode``
or ``trainer.resume_from`` itself would silently win over the retry's, so
such a bundle is refused. What is not retried: an error of the launch itself
(launch.sh's exit 2 or 3: a missing root, the wrong verl; Hydra or OmegaConf
refusing the config), a job stopped by someone, an interrupted run. An attempt
that ends 0 is judged by the steps verl reported: one that resumed and trained
none of the remaining steps, or a run whose last step is below
``trainer.total_steps``, ends non-zero saying so.
"""

from __future__ import annotations

import msgspec

from tutorrl.errors import RefusedError

# launch.sh's own refusals (a root not set, the job's Python without the bundle's verl, the evidence hook).
LAUNCH_REFUSED = (2, 3)
# What verl's Hydra entry point prints when it refuses the config: the same config is refused again.
CONFIG_REFUSED = (
    "Could not override",
    "Error merging override",
    "ConfigCompositionException",
    "MissingConfigException",
    "omegaconf.errors.",
    "hydra.errors.",
    "is not in struct",
    "Could not append to config",
    "mismatched input",
)
# The backoff doubles from the base with each retry, up to this.
MAX_BACKOFF_S = 600.0


class Policy(msgspec.Struct, frozen=True):
    """How many resubmissions a run may make, and the wait before the first (doubling after)."""

    retries: int
    backoff_s: float = 0.0

    def delay(self, retry: int) -> float:
        """Seconds before resubmission number ``retry`` (1-based)."""
        if self.backoff_s <= 0:
            return 0.0
        return min(MAX_BACKOFF_S, self.backoff_s * 2 ** (retry - 1))


def refusal(spec, *, dry_run: bool, upload: bool, output_dir: bool) -> str | None:
    """Why ``--retries`` cannot apply to this run, or None."""
    if dry_run:
        return "--retries: a dry run trains nothing, so there is nothing to retry"
    if upload:
        return ("--retries: with --upload the checkpoints are written on the cluster, where tutorrl cannot hash "
                "them to choose where a retry resumes; run with --no-upload on a cluster that shares this filesystem")
    trainer = spec.trainer
    if trainer.resume_mode is not None or trainer.resume_from is not None:
        return ("--retries: the spec sets trainer.resume_mode/resume_from, which verl reads after launch.sh's "
                "arguments, so a retry could not choose its checkpoint; leave them unset (verl's default "
                "resumes a restarted job from its latest checkpoint; a retry resumes from the newest one whose "
                "evidence verifies)")
    if not output_dir:
        return ("--retries: the spec sets no trainer.output_dir, so tutorrl cannot find, record or verify the "
                "checkpoints a retry would resume from; set it")
    return None


def check(spec, **kwargs) -> None:
    reason = refusal(spec, **kwargs)
    if reason:
        raise RefusedError(reason)


def user_error(exit_code: int | None, log_tail: str) -> str | None:
    """Why a failed attempt is the launch's own error, which a resubmission would repeat; None: retry."""
    if exit_code in LAUNCH_REFUSED:
        return f"launch.sh refused the launch (exit {exit_code})"
    for mark in CONFIG_REFUSED:
        if mark in log_tail:
            return f"verl's entry point refused the config ({mark.strip('.')})"
    return None


def resume_targets(release: str, variant: str):
    """(resume_mode's target, resume_from's target) in verl ``release``'s lock, each None where it has no such
    key: the one place the retry (here) and the exports' restart (export/resume.py) spell verl's resume."""
    from tutorrl.compiler.release import load_lock

    targets = load_lock(release, variant).targets
    return targets.get("trainer.resume_mode"), targets.get("trainer.resume_from")


def no_resume_keys(release: str, variant: str) -> RefusedError:
    return RefusedError(f"--retries: verl {release} ({variant}) has no resume_mode/resume_from keys to resume with")


def resume_overrides(release: str, variant: str, directory: str) -> list[str]:
    """launch.sh's arguments that make verl ``release`` resume from ``directory`` (a ``global_step_N`` folder)."""
    from tutorrl.compiler.release import render_value

    mode, path = resume_targets(release, variant)
    if mode is None or path is None:
        raise no_resume_keys(release, variant)
    return [f"{mode.spelled()}={render_value('resume_path')}", f"{path.spelled()}={render_value(directory)}"]


def fresh_overrides(release: str, variant: str) -> list[str]:
    """launch.sh's arguments for a retry from scratch: verl's "auto" would resume from the checkpoints that did
    not verify."""
    from tutorrl.compiler.release import render_value

    mode, _ = resume_targets(release, variant)
    return [] if mode is None else [f"{mode.spelled()}={render_value('disable')}"]


def submission_id(run_id: str, retry: int) -> str:
    """The Ray submission id of resubmission ``retry`` (a Ray job id is used once)."""
    return f"{run_id}-r{retry}"


def shortfall(*, succeeded: bool, resumed_step: int | None, trained: list[int], reached: int | None,
              total: int | None) -> str | None:
    """Why an attempt that ended 0 is still a failure; None when it is not."""
    if not succeeded:
        return None
    if resumed_step is not None and not [s for s in trained if s > resumed_step]:
        return (f"verl exited 0 but trained none of the remaining steps after resuming from step {resumed_step}"
                + (f" (of {total})" if total else ""))
    if total is not None and reached is not None and reached < total:
        return f"verl exited 0 but the run's last step is {reached} of trainer.total_steps = {total}"
    return None


def may_follow(record) -> bool:
    """Whether a run record that reads "failed" may be between two attempts: it has retries left, so its
    owner (alive: asked by the caller) may yet resubmit it. `logs --follow` and `stop` treat it as running."""
    return record.retries is not None and record.status == "failed" and len(record.attempts) <= record.retries
