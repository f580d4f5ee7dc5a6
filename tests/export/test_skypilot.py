"""`tutorrl export --to skypilot`: valid against SkyPilot's own task and
resources schemas (tools/export_schemas.py records them from the skypilot
package), and the `run:` script, run with real bash on each rank, checks the
bundle, has SkyPilot's Ray template start Ray with token auth and runs
launch.sh on rank 0 only.

The template (``~/sky_templates/ray/start_cluster``, which SkyPilot puts on
its nodes) is not run here (test_skypilot_template.py runs the real one, from
SkyPilot's wheel, with real Ray): here it is tested against its documented contract --
the environment variables it reads (RAY_HEAD_PORT,
RAY_DASHBOARD_AGENT_LISTEN_PORT; SKYPILOT_NODE_RANK and the others from
SkyPilot) -- by a stand-in that records them. SkyPilot itself is not in the test
environment (its install pulls a web server, a database layer and cloud SDKs):
test_skypilot_loader.py reads every task with SkyPilot's own loader in a
virtualenv of its own."""

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
    assert task["secrets"] == {"RAY_AUTH_TOKEN": None, "WANDB_API_KEY": None}  # names, never values
    task = _task(_bundle_named("chess-tutor-megatron-tp4"))
    assert task["num_nodes"] == 2 and task["resources"]["accelerators"] == "H100:8"
    assert task["secrets"] == {"RAY_AUTH_TOKEN": None}


@pytest.mark.needs_verl
def test_run_script_starts_ray_with_skypilots_template_and_trains_on_rank_0_only(cluster, tmp_path):
    """SkyPilot's ~/sky_templates/ray/start_cluster starts Ray (head on rank 0, a worker elsewhere,
    nothing where the user's Ray already runs); here it is a stand-in that records the environment
    the template's documented variables are read from (RAY_HEAD_PORT,
    RAY_DASHBOARD_AGENT_LISTEN_PORT) -- the template itself is SkyPilot's, on its nodes."""
    bundle = _bundle_named("chess-tutor-grpo-wandb")
    task = _task(bundle)
    home = tmp_path / "home"
    shutil.copytree(support.BUNDLES / bundle, home / "tutorrl-bundles" / bundle)  # what file_mounts does
    cluster.sky_template(home)
    script = tmp_path / "run.sh"
    script.write_text(task["run"])
    env = dict(HOME=str(home), SKYPILOT_NODE_IPS="10.0.0.1\n10.0.0.2", SKYPILOT_NUM_NODES="2",
               WANDB_API_KEY="k-123456", RAY_AUTH_TOKEN="t-cluster")

    for rank, trains in (("0", True), ("1", False)):
        result = cluster.run(script, tmp_path, SKYPILOT_NODE_RANK=rank, RAY_AUTH_TOKEN_PATH="/elsewhere", **env)
        assert result.returncode == 0, result.stderr
        (start,) = cluster.calls("start_cluster")
        assert cluster.calls("ray") == []  # no `ray start` of the task's own
        # SkyPilot's agent holds 52365; the user's Ray takes the template's other port. Token auth on, by the secret.
        assert start["env"]["RAY_HEAD_PORT"] == "6379" and start["env"]["RAY_DASHBOARD_AGENT_LISTEN_PORT"] == "52366"
        assert start["env"]["RAY_AUTH_MODE"] == "token" and start["env"]["RAY_AUTH_TOKEN"] == "t-cluster"
        assert "RAY_AUTH_TOKEN_PATH" not in start["env"]
        assert start["env"]["WANDB_API_KEY"] == "k-123456"  # the bundle's environment reaches Ray's raylets
        if trains:
            (wait,) = cluster.calls("wait-nodes")
            assert wait["argv"][-2:] == ["10.0.0.1:6379", "2"] and wait["env"]["RAY_AUTH_MODE"] == "token"
            (train,) = cluster.calls("python")
            assert train["argv"][:2] == ["-m", "verl.trainer.main_ppo"]
            assert train["env"]["RAY_ADDRESS"] == "10.0.0.1:6379" and train["env"]["RAY_AUTH_TOKEN"] == "t-cluster"
        else:
            assert cluster.calls("wait-nodes") == [] and cluster.calls("python") == []


def test_run_script_needs_the_clusters_ray_token(cluster, tmp_path):
    bundle = _bundle_named("chess-tutor-grpo")
    task = _task(bundle)
    assert task["secrets"] == {"RAY_AUTH_TOKEN": None}  # a name: SkyPilot asks for it at launch
    home = tmp_path / "home"
    shutil.copytree(support.BUNDLES / bundle, home / "tutorrl-bundles" / bundle)
    cluster.sky_template(home)
    script = tmp_path / "run.sh"
    script.write_text(task["run"])
    result = cluster.run(script, tmp_path, HOME=str(home), SKYPILOT_NODE_RANK="0", SKYPILOT_NODE_IPS="10.0.0.1",
                         SKYPILOT_NUM_NODES="1")
    assert result.returncode != 0 and "RAY_AUTH_TOKEN: is the Ray token of this cluster" in result.stderr
    assert cluster.calls("start_cluster") == [] and cluster.calls("python") == []


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
