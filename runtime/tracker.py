"""The experiment tracker's run, tied to the bundle that launched it (``trainer.loggers`` with wandb or mlflow).

verl's ``Tracking`` hands the tracker its whole composed config and nothing
else, and passes W&B no run id: every resume would be a new W&B run, with
nothing in it naming the reviewed, hashed launch. tutorrl adds both without
changing the bundle's bytes:

- launch.sh arguments ``+tutorrl.bundle=...``, ``+tutorrl.run_id=...``,
  ``+tutorrl.evidence_head=...`` (and the bundle id, experiment and verl
  release) put a ``tutorrl`` table into verl's config, which verl gives W&B as
  the run's config and MLflow as its parameters; the spec's own settings are
  the rest of that config, under verl's keys. (W&B's ``WANDB_CONFIG_PATHS``
  would be the other way, but wandb 0.31 refuses it set from the environment.)
- ``WANDB_RUN_ID`` and ``WANDB_RESUME=allow`` in the job's environment (its
  Ray runtime_env, so verl's TaskRunner sees them): every attempt of a retried
  run, and a later run that resumes a checkpoint this one recorded (found
  through the checkpoint's evidence record), log into one W&B run. The id is
  the run id plus a random suffix, so two checkouts of one bundle, whose run
  ids are the same, never write into each other's W&B run.

MLflow: runtime/mlflow_run.py (a run of the run's own, each launch's nested under it).
"""

from __future__ import annotations

import re
import secrets

TRACKED = ("wandb", "mlflow")
# W&B run ids: letters, digits, - and _; at most 64 characters (wandb refuses others).
_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def loggers(spec) -> list[str]:
    value = spec.trainer.loggers
    return [value] if isinstance(value, str) else list(value or [])


def wanted(spec) -> bool:
    return any(name in TRACKED for name in loggers(spec))


def new_id(run_id: str) -> str:
    return f"{run_id}-{secrets.token_hex(4)}"[-64:]


def valid_id(value: object) -> bool:
    return isinstance(value, str) and bool(_ID.fullmatch(value))


def environment(spec, tracker_id: str | None) -> dict[str, str]:
    """What the job's environment gets so W&B logs into ``tracker_id``'s run."""
    if tracker_id is None or "wandb" not in loggers(spec):
        return {}
    return {"WANDB_RUN_ID": tracker_id, "WANDB_RESUME": "allow"}


def config_overrides(*, digest: str, bundle_id: str, run_id: str, experiment: str | None, release: str,
                     evidence_head: str | None, tracker_id: str | None) -> list[str]:
    """launch.sh's arguments that put the ``tutorrl`` table into verl's config (and so the tracker's)."""
    from tutorrl.compiler.release import render_value

    values = {"bundle": digest, "bundle_id": bundle_id, "run_id": run_id, "experiment": experiment,
              "verl": release, "evidence_head": evidence_head, "tracker_id": tracker_id}
    return [f"+tutorrl.{key}={render_value(value)}" for key, value in values.items() if value is not None]


def text(wandb_id: str | None, mlflow_id: str | None) -> str:
    """The tracker runs a run logged into, as `tutorrl runs` and `status` show them ("" for none)."""
    return "; ".join(f"{name} {value}" for name, value in (("wandb", wandb_id), ("mlflow", mlflow_id)) if value)
