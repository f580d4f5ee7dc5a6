"""runtime/mlflow_run.py: the run's MLflow run, made in the job's Python by runtime/job_probe.py.

The fast tests hold what tutorrl asks and how a refusal reads. The ones marked needs_train_env run the
real MLflow of the verl 0.5.0 training environment on a file store under tmp: the parent run made once,
a nested run for each launch, verl 0.5.0's own start of an MLflow run (set_experiment by the project,
start_run by experiment and name) attaching to it through MLFLOW_RUN_ID, and the close.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tutorrl.errors import RefusedError
from tutorrl.runtime import mlflow_run

IDENTITY = {"bundle": "sha256:" + "ab" * 32, "bundle_id": "b-1", "run_id": "b-1-0001", "experiment": "tiny",
            "verl": "0.5.0", "evidence_head": None}


def test_the_parent_carries_the_identity_and_each_launch_its_attempt_and_evidence_head():
    ask = mlflow_run.ask_for_run(env={"MLFLOW_TRACKING_URI": "file:///x"}, experiment="proj", run_name="tiny",
                                 parent=None, identity={**IDENTITY, "evidence_head": "000002.json@sha256:cd"},
                                 attempt=3)
    assert ask["uri"] == "file:///x" and ask["experiment"] == "proj" and ask["parent"] is None
    assert ask["parent_tags"] == ask["parent_params"] == {
        "tutorrl.bundle": IDENTITY["bundle"], "tutorrl.bundle_id": "b-1", "tutorrl.run_id": "b-1-0001",
        "tutorrl.experiment": "tiny", "tutorrl.verl": "0.5.0"}
    assert ask["tags"]["tutorrl.attempt"] == "3"
    assert ask["tags"]["tutorrl.evidence_head"] == "000002.json@sha256:cd"


def test_without_a_tracking_uri_the_store_is_verls_own_default():
    assert mlflow_run.tracking_uri({}) == "sqlite:////tmp/mlruns.db"


def test_attempt_statuses_map_onto_mlflows_run_states():
    assert [mlflow_run.mlflow_status(s) for s in ("succeeded", "failed", "stopped", None)] == [
        "FINISHED", "FAILED", "KILLED", "FAILED"]


def test_a_job_python_without_mlflow_is_refused_naming_it(tmp_path):
    # This Python (tutorrl's test environment) has no mlflow: the probe's own answer, not a stand-in.
    assert subprocess.run([sys.executable, "-c", "import mlflow"], capture_output=True).returncode != 0
    ask = mlflow_run.ask_for_run(env={}, experiment="proj", run_name=None, parent=None, identity=IDENTITY, attempt=1)
    with pytest.raises(RefusedError) as err:
        mlflow_run.open_run(sys.executable, ask, dict(os.environ))
    text = str(err.value)
    assert "trainer.loggers has mlflow" in text and f"({sys.executable}) has no mlflow" in text


# verl's own tracker started with the mlflow backend, run by the training environment's Python (a file: that
# Python has verl, this one need not).
VERL_START = str(Path(__file__).resolve().parents[2] / "tools" / "cpu_training" / "verl050" / "verl_tracker_start.py")


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "MLFLOW_TRACKING_URI": (tmp_path / "mlruns").as_uri(), "MLFLOW_ALLOW_FILE_STORE": "true"}


def _read(tmp_path: Path, python: str, run: str) -> dict:
    script = ("import sys, json, mlflow; from mlflow.tracking import MlflowClient; c = MlflowClient(); "
              "r = c.get_run(sys.argv[1]); print(json.dumps({'status': r.info.status, 'tags': r.data.tags, "
              "'params': r.data.params, 'experiment': r.info.experiment_id, 'steps': {k: [m.step for m in "
              "c.get_metric_history(sys.argv[1], k)] for k in r.data.metrics}}))")
    out = subprocess.run([python, "-c", script, run], env=_env(tmp_path), capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


@pytest.mark.needs_train_env("TUTORRL_TRAIN_PYTHON")
def test_each_launch_logs_into_its_own_run_under_the_runs_one_and_the_close_stitches_the_steps(tmp_path):
    python = os.environ["TUTORRL_TRAIN_PYTHON"]
    env = _env(tmp_path)
    ask = mlflow_run.ask_for_run(env=env, experiment="tiny-cpu", run_name="tiny", parent=None, identity=IDENTITY,
                                 attempt=1)
    parent, first, note = mlflow_run.open_run(python, ask, env)
    assert note is None
    # verl's start with MLFLOW_RUN_ID: it attaches to the launch's run (same experiment, so 0.5.0 accepts it).
    started = subprocess.run([python, VERL_START, "tiny-cpu", "tiny", "1", "auto"],
                             env={**env, mlflow_run.RUN_ID_ENV: first}, capture_output=True, text=True)
    assert started.returncode == 0, started.stderr[-3000:]
    assert started.stdout.split()[-1] == first
    # The retry: a new run under the same parent. Its config differs -- MLflow would refuse it in the first run.
    again = mlflow_run.ask_for_run(env=env, experiment="tiny-cpu", run_name="tiny", parent=parent,
                                   identity={**IDENTITY, "evidence_head": "000001.json@sha256:ef"}, attempt=2)
    same, second, _ = mlflow_run.open_run(python, again, env)
    assert same == parent and second not in (first, parent)
    refused = subprocess.run([python, VERL_START, "tiny-cpu", "tiny", "2", "resume_path"],
                             env={**env, mlflow_run.RUN_ID_ENV: first}, capture_output=True, text=True)
    assert refused.returncode != 0 and "Changing param values is not allowed" in refused.stderr
    resumed = subprocess.run([python, VERL_START, "tiny-cpu", "tiny", "2", "resume_path"],
                             env={**env, mlflow_run.RUN_ID_ENV: second}, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    points = tmp_path / "metrics.jsonl"
    points.write_text("".join(json.dumps({"step": s, "time": 1000.0 + s, "source": "console",
                                          "metrics": {"actor/pg_loss": v, "val@1": 1.0}}) + "\n"
                              for s, v in ((1, 0.5), (2, 0.25), (2, 0.125))))
    assert mlflow_run.close_run(python, env=env, parent=parent, runs=[(first, "failed"), (second, "succeeded")],
                                status="succeeded", metrics_file=points) is None
    top, one, two = (_read(tmp_path, python, r) for r in (parent, first, second))
    assert top["tags"]["tutorrl.bundle"] == IDENTITY["bundle"] and top["params"]["tutorrl.run_id"] == "b-1-0001"
    assert top["status"] == "FINISHED" and top["steps"] == {"actor/pg_loss": [1, 2], "val_at_1": [1, 2]}
    assert one["tags"]["mlflow.parentRunId"] == two["tags"]["mlflow.parentRunId"] == parent
    assert one["experiment"] == two["experiment"] == top["experiment"]
    assert two["tags"]["tutorrl.attempt"] == "2" and two["tags"]["tutorrl.evidence_head"] == "000001.json@sha256:ef"
    assert one["params"] == {"trainer/resume_mode": "auto"} and two["params"] == {"trainer/resume_mode": "resume_path"}
    assert two["steps"] == {"actor/pg_loss": [2]}
    # Each launch's run ends with its attempt's outcome (verl's process ended both as FINISHED at its exit).
    assert one["status"] == "FAILED" and two["status"] == "FINISHED"


@pytest.mark.needs_train_env("TUTORRL_TRAIN_PYTHON")
def test_a_store_mlflow_refuses_is_said_before_verl_starts(tmp_path):
    python = os.environ["TUTORRL_TRAIN_PYTHON"]
    env = {**os.environ, "MLFLOW_TRACKING_URI": (tmp_path / "mlruns").as_uri()}
    env.pop("MLFLOW_ALLOW_FILE_STORE", None)
    ask = mlflow_run.ask_for_run(env=env, experiment="p", run_name=None, parent=None, identity=IDENTITY, attempt=1)
    with pytest.raises(RefusedError) as err:
        mlflow_run.open_run(python, ask, env)
    assert f"MLflow at {(tmp_path / 'mlruns').as_uri()} refused: " in str(err.value)
    assert "MLFLOW_ALLOW_FILE_STORE" in str(err.value)


@pytest.mark.needs_train_env("TUTORRL_TRAIN_PYTHON")
def test_an_inherited_run_the_store_lacks_gives_way_to_a_new_one_said(tmp_path):
    """A run resuming another's checkpoint, logging to another store than that run did: its MLflow run is
    not there. The first launch makes a run of its own and says why; a later launch's missing parent is
    refused (its own run, made minutes ago, gone)."""
    python = os.environ["TUTORRL_TRAIN_PYTHON"]
    env = _env(tmp_path)
    gone = "0" * 32
    ask = mlflow_run.ask_for_run(env=env, experiment="tiny-cpu", run_name="tiny", parent=gone, identity=IDENTITY,
                                 attempt=1)
    parent, run, note = mlflow_run.open_run(python, ask, env, inherited=True)
    assert parent != gone and _read(tmp_path, python, run)["tags"]["mlflow.parentRunId"] == parent
    assert note.startswith(f"MLflow run {gone} (of the run resumed from) cannot be used, so this run made its own: ")
    with pytest.raises(RefusedError, match=f"MLflow at .* refused: .*{gone}"):
        mlflow_run.open_run(python, ask, env, inherited=False)
