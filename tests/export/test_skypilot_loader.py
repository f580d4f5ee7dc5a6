"""Every committed bundle's SkyPilot task, loaded by SkyPilot itself: ``sky.Task.from_yaml`` of
skypilot 0.14.1 in its own virtualenv (``.venv-skypilot``, which `tools/dev.sh test` builds and
names in TUTORRL_SKYPILOT_PYTHON; its install pulls a web server, a database layer and cloud SDKs,
so it is not in the test environment). test_skypilot.py checks the tasks against SkyPilot's JSON
schema; this reads them back through SkyPilot's own parser, which also checks what the schema does
not (accelerator names and counts, image ids, the secrets' form), and compares what it read with
what was exported. One subprocess loads every task, a misspelt one among them, which SkyPilot
must refuse (so a loader that accepts anything fails this test). Where TUTORRL_SKYPILOT_PYTHON is
unset the test is skipped with that reason."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import yaml

import support
from export_helpers import BUNDLES

pytestmark = [pytest.mark.slow, pytest.mark.needs_train_env("TUTORRL_SKYPILOT_PYTHON")]

ACCELERATOR = "H100"
IMAGE = "example.org/verl:0.9.1"

# Runs in SkyPilot's Python: each task as SkyPilot reads it, or the error it refuses it with.
LOADER = r"""
import json, sys
import sky, yaml
print("skypilot", sky.__version__, file=sys.stderr)
out = {}
for path in sys.argv[1:]:
    try:
        task = sky.Task.from_yaml(path)
    except Exception as exc:
        out[path] = {"error": f"{type(exc).__name__}: {exc}"}
        continue
    (res,) = task.resources
    image = res.image_id
    # A secret without a value is a reference SkyPilot resolves at launch; `sky launch --secret NAME`
    # gives it the submitter's value, as from_yaml_config's secrets_overrides (what the CLI calls).
    refs = [ref.name for ref in task.managed_secret_refs]
    with open(path) as fh:
        launched = sky.Task.from_yaml_config(yaml.safe_load(fh), secrets_overrides=[(n, "v-" + n) for n in refs])
    out[path] = {
        "name": task.name, "num_nodes": task.num_nodes, "run": task.run, "setup": task.setup,
        "envs": dict(task.envs), "inline_secrets": sorted(task.secrets), "secret_refs": refs,
        "launched_secrets": {k: v.get_secret_value() for k, v in launched.secrets.items()},
        "file_mounts": dict(task.file_mounts or {}), "accelerators": res.accelerators,
        "image_id": None if image is None else sorted(image.values()),
    }
print(json.dumps(out))
"""


def _skypilot_python() -> str:
    python = os.environ.get("TUTORRL_SKYPILOT_PYTHON")
    if not python:
        pytest.skip("TUTORRL_SKYPILOT_PYTHON is not set: `bash tools/dev.sh test` builds .venv-skypilot "
                    "(skypilot 0.14.1) and sets it")
    assert os.path.isfile(python), f"TUTORRL_SKYPILOT_PYTHON={python} does not exist"
    return python


def _exported(tmp_path) -> dict[str, dict]:
    """Each committed bundle's task, as `tutorrl export --to skypilot` writes it (in-process: the
    CLI's own render, 21 bundles in one interpreter), by the file it was written to."""
    from tutorrl.export import common, skypilot

    tasks = {}
    for name in BUNDLES:
        text = skypilot.render(common.load(str(support.BUNDLES / name)), accelerator=ACCELERATOR, image=IMAGE)
        path = tmp_path / f"{name}.yaml"
        path.write_text(text)
        tasks[str(path)] = yaml.safe_load(text)
    return tasks


def test_skypilot_loads_every_exported_task_as_written(tmp_path):
    python = _skypilot_python()
    tasks = _exported(tmp_path)
    # A field SkyPilot does not know, in a task otherwise as exported: it must be refused.
    typo = dict(next(iter(tasks.values())))
    typo["resources"] = {"acelerators": typo["resources"]["accelerators"]}
    bad = tmp_path / "misspelt.yaml"
    bad.write_text(yaml.safe_dump(typo))
    home = tmp_path / "home"  # SkyPilot reads ~/.sky; this machine's user's is not the test's
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SKYPILOT_", "RAY_", "TUTORRL_"))}
    env.update(HOME=str(home))
    done = subprocess.run([python, "-c", LOADER, *tasks, str(bad)], capture_output=True, text=True, env=env,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "skypilot 0.14.1" in done.stderr
    read = json.loads(done.stdout)

    assert "acelerators" in read.pop(str(bad))["error"]
    assert sorted(read) == sorted(tasks) and len(read) == len(BUNDLES)
    for path, task in tasks.items():
        got = read[path]
        assert "error" not in got, (path, got)
        assert got["name"] == task["name"] and got["num_nodes"] == task["num_nodes"]
        # The run script reaches the nodes byte for byte; the task has no setup of its own.
        assert got["run"] == task["run"] and got["setup"] is None
        count = int(task["resources"]["accelerators"].split(":")[1])
        assert got["accelerators"] == {ACCELERATOR: count}
        assert got["image_id"] == [f"docker:{IMAGE}"]
        assert got["file_mounts"] == task["file_mounts"]
        # Secrets are names only: SkyPilot holds no value for any, takes each from --secret at launch,
        # and there is none in envs either.
        assert got["inline_secrets"] == [] and got["envs"] == {}
        assert sorted(got["secret_refs"]) == sorted(task["secrets"]) and "RAY_AUTH_TOKEN" in got["secret_refs"]
        assert got["launched_secrets"] == {name: "v-" + name for name in task["secrets"]}
