"""`tutorrl export --to kuberay`: valid against KubeRay's own RayJob CRD schema,
and the job's start script, run with real bash, refuses a changed bundle."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

import support
from export_helpers import BUNDLES, bundle_named as _bundle_named, export

SCHEMA = json.loads((Path(__file__).parent / "schemas" / "kuberay-rayjob-v1.json").read_text())
# A Kubernetes object name (DNS-1123 label) and a label value.
NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def _strict(schema):
    """The CRD schema as the API server applies it with strict field validation
    (kubectl's default): a field the schema does not name is an error, except
    where the schema keeps unknown fields (x-kubernetes-preserve-unknown-fields)."""
    schema = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, dict):
            if ("properties" in node and "additionalProperties" not in node
                    and not node.get("x-kubernetes-preserve-unknown-fields")):
                node["additionalProperties"] = False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    return schema


STRICT = _strict(SCHEMA["openAPIV3Schema"])


def _documents(bundle: str, *args: str) -> list[dict]:
    result = export(f"bundles/{bundle}", "--to", "kuberay", "--image", "example.org/verl:0.9.1", *args,
                    cwd=support.REPO)
    assert result.returncode == 0, result.stderr
    return list(yaml.safe_load_all(result.stdout))


@pytest.mark.parametrize("bundle", BUNDLES)
def test_every_committed_bundle_exports_a_rayjob_valid_against_the_crd(bundle):
    config_map, job = _documents(bundle)
    jsonschema.Draft7Validator(STRICT).validate(job)
    assert SCHEMA["source"]["version"] == "v1" and job["apiVersion"] == f"{SCHEMA['source']['group']}/v1"
    manifest = json.loads((support.BUNDLES / bundle / "manifest.json").read_text())
    for doc in (config_map, job):
        assert NAME.fullmatch(doc["metadata"]["name"]) and len(doc["metadata"]["name"]) <= 63
        assert doc["metadata"]["annotations"]["tutorrl.dev/digest"] == manifest["digest"]
        assert all(LABEL_VALUE.fullmatch(v) and len(v) <= 63 for v in doc["metadata"]["labels"].values())
    assert job["spec"]["metadata"]["tutorrl_bundle"] == manifest["digest"]
    # The ConfigMap carries the bundle byte for byte (keys are file names Kubernetes accepts).
    for name in ("bundle.env", "launch.sh", "manifest.json", "ray-job.json", "spec.toml"):
        assert config_map["data"][name].encode() == (support.BUNDLES / bundle / name).read_bytes()
    assert all(re.fullmatch(r"[-._a-zA-Z0-9]+", k) for k in config_map["data"])
    assert len(json.dumps(config_map).encode()) < 1 << 20  # a ConfigMap's limit


def test_a_document_the_crd_refuses_is_refused_here():
    # The validation can fail: a misspelt field and a wrong type are both caught.
    _, job = _documents(BUNDLES[0])
    bad = copy.deepcopy(job)
    bad["spec"]["entrypointNumCPUs"] = 1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(STRICT).validate(bad)
    bad = copy.deepcopy(job)
    bad["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"] = "2"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(STRICT).validate(bad)


def test_resources_and_secrets_map_to_pods_by_name_only():
    bundle = _bundle_named("chess-tutor-grpo-wandb")  # 1 node x 7 GPUs + 1 reward GPU, WANDB_API_KEY by name
    config_map, job = _documents(bundle, "--secret", "team-keys")
    cluster = job["spec"]["rayClusterSpec"]
    (group,) = cluster["workerGroupSpecs"]
    assert group["replicas"] == group["minReplicas"] == group["maxReplicas"] == 1
    worker = group["template"]["spec"]["containers"][0]
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == 8
    head = cluster["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert "resources" not in head  # verl's GPU workers never land on the head
    for container in (head, worker):
        assert container["env"] == [{"name": "WANDB_API_KEY",
                                     "valueFrom": {"secretKeyRef": {"name": "team-keys", "key": "WANDB_API_KEY"}}}]
    # The bundle's environment reaches Ray's workers exactly, through the runtime_env.
    assert json.loads(job["spec"]["runtimeEnvYAML"]) == {"env_vars": json.loads(
        (support.BUNDLES / bundle / "ray-job.json").read_text())["runtime_env"]["env_vars"]}
    megatron = _bundle_named("chess-tutor-megatron-tp4")  # 2 nodes x 8 GPUs
    (group,) = _documents(megatron)[1]["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    assert group["replicas"] == 2 and group["template"]["spec"]["containers"][0]["resources"]["limits"] == {
        "nvidia.com/gpu": 8}


def _mount_like_kubernetes(data: dict, folder: Path) -> Path:
    """A ConfigMap volume as the kubelet lays it out: the files in a hidden
    timestamped folder, `..data` a link to it, each key a link through `..data`."""
    real = folder / "..2026_01_01_00_00_00.000000001"
    real.mkdir(parents=True)
    for key, value in data.items():
        (real / key).write_text(value)
    (folder / "..data").symlink_to(real.name)
    for key in data:
        (folder / key).symlink_to(f"..data/{key}")
    return folder


@pytest.mark.needs_verl
def test_start_script_runs_launch_from_a_checked_copy_and_refuses_an_edited_configmap(cluster, tmp_path):
    bundle = _bundle_named("chess-tutor-grpo-wandb")
    config_map, job = _documents(bundle)
    assert job["spec"]["entrypoint"] == "bash /tutorrl/bundle-files/tutorrl-start.sh"
    mount = _mount_like_kubernetes(config_map["data"], tmp_path / "mount")
    env = dict(TUTORRL_BUNDLE_FILES=str(mount), TMPDIR=str(tmp_path / "tmp"), WANDB_API_KEY="k-123456")
    (tmp_path / "tmp").mkdir()
    result = cluster.run(mount / "tutorrl-start.sh", cwd=tmp_path, **env)
    assert result.returncode == 0, result.stderr
    (train,) = cluster.calls("python")
    assert train["argv"][:2] == ["-m", "verl.trainer.main_ppo"]
    assert train["env"]["WANDB_API_KEY"] == "k-123456" and train["env"]["WANDB_MODE"] == "online"
    copied = tmp_path / "tmp" / "tutorrl-bundles" / bundle
    assert all(not p.is_symlink() for p in copied.iterdir())
    # tutorrl (installed in the job's Python) re-derived the copy; nothing was sha256-only.
    assert "checked by sha256 only" not in result.stderr

    # An edit to any bundle file in the ConfigMap stops the job before verl starts.
    real = next(mount.glob("..2026*"))
    launch = real / "launch.sh"
    launch.write_text(launch.read_text().replace("data.seed=1", "data.seed=2"))
    result = cluster.run(mount / "tutorrl-start.sh", cwd=tmp_path, **env)
    assert result.returncode == 3
    assert "launch.sh: FAILED" in result.stderr and "refusing to run" in result.stderr
    assert cluster.calls("python") == []
