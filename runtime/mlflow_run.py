"""The MLflow run of a tutorrl run (``trainer.loggers`` with mlflow): one for the run and its resumptions.

verl's tracker starts an MLflow run of its own at every launch, named by the
experiment, and logs the whole composed config as its parameters. MLflow's
parameters cannot change once logged (every store refuses a new value), and a
resumed launch's config differs from the first one's (``trainer.resume_mode``
and ``resume_from_path``, the evidence head): verl told to log into the first
launch's run would fail as it starts. So the run's MLflow entry is a parent
run, made by tutorrl before the first launch in the experiment verl names
(``trainer.project_name``), its tags and parameters the bundle's digest and id,
the run id, the experiment and verl release; each launch of verl -- the first,
every retry, a later run resuming this run's checkpoints (found through the
evidence lineage, as the W&B id is) -- logs into a new run nested under it,
handed to verl as ``MLFLOW_RUN_ID`` (verl 0.5.0 resumes it through
``mlflow.start_run``, 0.9.1 attaches to it by name). When the run ends, each
launch's run is ended with its attempt's status and the parent run gets
every step's metrics as tutorrl read them from verl, once per step: one MLflow
run with the whole curve across the attempts, beside each attempt's own.

The runs are made in the job's Python (runtime/job_probe.py's ``mlflow-run``
role: it has verl and mlflow; tutorrl's own environment need not), with the
job's environment: ``MLFLOW_TRACKING_URI``, else verl's own default.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tutorrl.errors import RefusedError

PROBE = Path(__file__).with_name("job_probe.py")
# verl 0.5.0's and 0.9.1's tracking.py when MLFLOW_TRACKING_URI is unset: the store the runs must be in.
VERL_DEFAULT_URI = "sqlite:////tmp/mlruns.db"
RUN_ID_ENV = "MLFLOW_RUN_ID"
# MLflow's run states for an attempt's status.
_ENDED = {"succeeded": "FINISHED", "stopped": "KILLED", "interrupted": "KILLED"}


def wanted(loggers: list[str]) -> bool:
    return "mlflow" in loggers


def tracking_uri(env: dict[str, str]) -> str:
    return env.get("MLFLOW_TRACKING_URI") or VERL_DEFAULT_URI


def mlflow_status(status: str | None) -> str:
    return _ENDED.get(status or "", "FAILED")


def ask_for_run(*, env: dict[str, str], experiment: str, run_name: str | None, parent: str | None,
                identity: dict[str, str | None], attempt: int) -> dict:
    """What the probe is asked for one launch: the parent's tags and parameters are the run's identity
    (``tutorrl.bundle``, ``tutorrl.run_id``, ...); the launch's run is tagged with its attempt and the
    evidence head it starts from."""
    named = {f"tutorrl.{k}": str(v) for k, v in identity.items() if v is not None and k != "evidence_head"}
    tags = {**named, "tutorrl.attempt": str(attempt)}
    if identity.get("evidence_head"):
        tags["tutorrl.evidence_head"] = str(identity["evidence_head"])
    return {"uri": tracking_uri(env), "experiment": experiment, "run_name": run_name, "parent": parent,
            "parent_tags": named, "parent_params": named, "tags": tags}


def _probe(python: str, role: str, ask: dict, env: dict[str, str], timeout: float) -> dict:
    try:
        proc = subprocess.run([python, str(PROBE), role, json.dumps(ask)], env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=timeout)
    except FileNotFoundError:
        return {"kind": "error", "error": f"the job's Python {python} does not exist"}
    except subprocess.TimeoutExpired:
        return {"kind": "error", "error": f"MLflow did not answer within {timeout:g} s"}
    try:
        return json.loads(proc.stdout.decode("utf-8", "replace"))
    except ValueError:
        tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
        return {"kind": "error", "error": f"exit {proc.returncode}: {tail[0]}"}


def open_run(python: str, ask: dict, env: dict[str, str], *, inherited: bool = False,
             timeout: float = 120.0) -> tuple[str, str, str | None]:
    """(the tutorrl run's MLflow run, the new run this launch logs into, a note or None); refused with why when
    MLflow cannot make them (verl, asked to log to the same store, would fail the same way, after minutes of
    start-up). ``inherited``: ``ask["parent"]`` is the run of the run this one resumes from; where it cannot be
    used (logged to another store, deleted) this run makes its own, and the note says so."""
    try:
        return (*_open(python, ask, env, timeout), None)
    except RefusedError as exc:
        if not inherited or ask.get("parent") is None:
            raise
        parent, run = _open(python, {**ask, "parent": None}, env, timeout)
        return parent, run, (f"MLflow run {ask['parent']} (of the run resumed from) cannot be used, so this run "
                             f"made its own: {exc}")


def _open(python: str, ask: dict, env: dict[str, str], timeout: float) -> tuple[str, str]:
    answer = _probe(python, "mlflow-run", ask, env, timeout)
    if answer.get("kind") == "ok":
        return answer["parent"], answer["run"]
    if answer.get("kind") == "missing":
        why = (f"the job's Python ({python}) has no {answer.get('name')}: install MLflow there "
               f"({python} -m pip install mlflow-skinny; tutorrl's [mlflow] extra pins the version it is tested with)")
    else:
        why = f"MLflow at {ask['uri']} refused: {answer.get('error', answer)}"
    raise RefusedError(f"trainer.loggers has mlflow, but tutorrl could not make the run's MLflow run: {why}")


def close_run(python: str, *, env: dict[str, str], parent: str, runs: list[tuple[str, str | None]],
              status: str | None, metrics_file: Path, timeout: float = 120.0) -> str | None:
    """End each launch's run and the parent (metrics first); None, or why it could not (said, not fatal:
    the training is over and recorded)."""
    ask = {"uri": tracking_uri(env), "parent": parent, "status": mlflow_status(status),
           "runs": [[run, mlflow_status(s)] for run, s in runs], "metrics_file": str(metrics_file)}
    answer = _probe(python, "mlflow-close", ask, env, timeout)
    if answer.get("kind") == "ok":
        return None
    return str(answer.get("error") or answer.get("name") or answer)
