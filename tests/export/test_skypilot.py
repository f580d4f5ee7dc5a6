"""`tutorrl export --to skypilot`: valid against SkyPilot's own task and
resources schemas (tools/export_schemas.py records them from the skypilot
package), and the `run:` script, run with real bash on each rank, checks the
bundle, starts Ray and runs launch.sh on rank 0 only."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml

import support
from export_helpers import export
from export_helpers import BUNDLES, bundle_named as _bundle_named

SCHEMA = json.loads((Path(__file__).parent / "schemas" / "skypilot-task.json").read_text())


def _task(bundle: str, *args: str) -> dict:
    result = export(f"bundles/{bundle}", "--to", "skypilot", "--accelerator", "H100", *args, cwd=support.REPO)
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)


def _validate(task: dict) -> None:
    jsonschema.validate(task, SCHEMA["task"])
    jsonschema.validate(task["resources"], SCHEMA["resources"])


@pytest.mark.parametrize("bundle", BUNDLES)
def test_every_committed_bundle_exports_a_task_valid_against_skypilots_schema(bundle):
    task = _task(bundle, "--image", "example.org/verl:0.9.1")
    _validate(task)
    assert task["resources"]["image_id"] == "docker:example.org/verl:0.9.1"
    assert task["file_mounts"] == {f"~/tutorrl-bundles/{bundle}": f"bundles/{bundle}"}
    assert subprocess.run(["bash", "-n"], input=task["run"], text=True).returncode == 0


def test_the_schema_refuses_what_skypilot_refuses():
    task = _task(BUNDLES[0])
    for change in ({"num_nodes": "2"}, {"secret": {"X": None}}, {"resources": {"accelerator": "H100:8"}}):
        bad = copy.deepcopy(task)
        bad.update(change)
        with pytest.raises(jsonschema.ValidationError):
            _validate(bad)


def test_nodes_gpus_and_secrets_map_to_skypilot_fields():
    task = _task(_bundle_named("chess-tutor-grpo-wandb"))  # 1 x (7 + 1 reward), WANDB_API_KEY
    assert task["num_nodes"] == 1 and task["resources"]["accelerators"] == "H100:8"
    assert task["secrets"] == {"WANDB_API_KEY": None}  # a name, never a value
    task = _task(_bundle_named("chess-tutor-megatron-tp4"))
    assert task["num_nodes"] == 2 and task["resources"]["accelerators"] == "H100:8" and "secrets" not in task


def test_run_script_starts_ray_on_every_rank_and_trains_on_rank_0_only(cluster, tmp_path):
    bundle = _bundle_named("chess-tutor-grpo-wandb")
    task = _task(bundle)
    home = tmp_path / "home"
    shutil.copytree(support.BUNDLES / bundle, home / "tutorrl-bundles" / bundle)  # what file_mounts does
    script = tmp_path / "run.sh"
    script.write_text(task["run"])
    env = dict(HOME=str(home), SKYPILOT_NODE_IPS="10.0.0.1\n10.0.0.2", SKYPILOT_NUM_NODES="2",
               WANDB_API_KEY="k-123456")

    result = cluster.run(script, cwd=tmp_path, SKYPILOT_NODE_RANK="0", **env)
    assert result.returncode == 0, result.stderr
    (head,) = cluster.calls("ray")
    assert head["argv"][:2] == ["start", "--head"] and "--num-gpus=8" in head["argv"]
    assert head["env"]["WANDB_API_KEY"] == "k-123456"
    (wait,) = cluster.calls("wait-nodes")
    assert wait["argv"][-2:] == ["10.0.0.1:6379", "2"]
    (train,) = cluster.calls("python")
    assert train["argv"][:2] == ["-m", "verl.trainer.main_ppo"] and train["env"]["RAY_ADDRESS"] == "10.0.0.1:6379"

    # A worker rank joins the head and trains nothing. (The head is reached on
    # the address SkyPilot gives; here it is a loopback listener.)
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        worker_script = tmp_path / "run-worker.sh"
        worker_script.write_text(task["run"].replace("6379", str(port)))
        result = cluster.run(worker_script, cwd=tmp_path, SKYPILOT_NODE_RANK="1",
                             **{**env, "SKYPILOT_NODE_IPS": "127.0.0.1\n10.0.0.2"})
    assert result.returncode == 0, result.stderr
    (join,) = cluster.calls("ray")
    assert join["argv"][:2] == ["start", f"--address=127.0.0.1:{port}"] and cluster.calls("python") == []


def test_run_script_refuses_a_changed_bundle_on_the_node(cluster, tmp_path):
    bundle = _bundle_named("chess-tutor-grpo")
    task = _task(bundle)
    copied = tmp_path / "home" / "tutorrl-bundles" / bundle
    shutil.copytree(support.BUNDLES / bundle, copied)
    target = copied / "bundle.env"
    target.write_text(target.read_text() + "export EXTRA=1\n")
    script = tmp_path / "run.sh"
    script.write_text(task["run"])
    result = cluster.run(script, cwd=tmp_path, HOME=str(tmp_path / "home"), SKYPILOT_NODE_RANK="0",
                         SKYPILOT_NODE_IPS="10.0.0.1", SKYPILOT_NUM_NODES="1")
    assert result.returncode == 3 and "bundle.env: FAILED" in result.stderr
    assert cluster.calls("ray") == [] and cluster.calls("python") == []
