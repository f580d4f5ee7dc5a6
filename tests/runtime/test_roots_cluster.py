"""The committed gsm8k bundle (data and checkpoints under roots) against a Ray
head started separately: the same bundle, unchanged, with the roots set in the
submitter's environment only."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

import support
from runtime_helpers import clean_env, run_tutorrl

pytestmark = [pytest.mark.slow, pytest.mark.needs_ray]


def _committed_gsm8k(tmp_path: Path) -> Path:
    """The committed bundle, copied so its runs/ land in the test's folder."""
    (bundle,) = [b for b in support.BUNDLES.iterdir()
                 if json.loads((b / "manifest.json").read_text())["experiment"] == "gsm8k-custom-reward"]
    assert "$DATA_ROOT" in (bundle / "spec.toml").read_text()
    copy = tmp_path / "bundles" / bundle.name
    shutil.copytree(bundle, copy, ignore=shutil.ignore_patterns("runs", "evidence"))
    return copy


def test_committed_example_passes_a_real_run_preflight_on_a_separate_head(ray_cluster, tmp_path):
    bundle = _committed_gsm8k(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    # An odd folder name: a space, a $, a quote and ${...} must reach verl as written.
    data = tmp_path / "shared da'ta $HOME ${X}"
    (data / "gsm8k").mkdir(parents=True)
    for name in ("train.parquet", "test.parquet"):
        (data / "gsm8k" / name).write_bytes(b"")
    env = clean_env(RAY_AUTH_TOKEN=ray_cluster["token"], DATA_ROOT=str(data), CKPT_ROOT=str(tmp_path / "ckpt"))

    # The spec's defaults are relative: refused for a cluster before anything is claimed.
    no_roots = {k: v for k, v in env.items() if k not in ("DATA_ROOT", "CKPT_ROOT")}
    refused = run_tutorrl(["run", str(bundle), "--address", ray_cluster["url"]], work, no_roots)
    assert refused.returncode == 2, refused.stderr
    assert "roots.DATA_ROOT: 'data' (the spec's default) is relative" in refused.stderr
    assert "roots.CKPT_ROOT: 'checkpoints' (the spec's default) is relative" in refused.stderr
    assert not list(bundle.glob("runs/*"))

    # With the roots set here, every local check passes; the only refusal left
    # is the 0-GPU test cluster's (an 8-GPU spec), after the run was claimed.
    real = run_tutorrl(["run", str(bundle), "--address", ray_cluster["url"]], work, env)
    assert real.returncode == 2, real.stderr
    assert f"root DATA_ROOT = {str(data)!r} (set here)" in real.stderr
    assert "needs 8 GPU" in real.stderr and "local checks" not in real.stderr
    (record,) = [json.loads(p.read_text()) for p in bundle.glob("runs/*/run.json")]
    assert record["status"] == "refused" and "cluster resources" in record["message"] + real.stderr

    # A dry run runs launch.sh on that head: the value travelled in the job's
    # runtime_env, and the real verl composed its config with it.
    dry = run_tutorrl(["run", str(bundle), "--address", ray_cluster["url"], "--dry-run"], work, env, timeout=400)
    assert dry.returncode == 0, dry.stderr[-3000:]
    run_id = sorted(bundle.glob("runs/*/verl-config.yaml"))[-1]
    # verl prints the config unresolved: OmegaConf's escape of the literal ${X} is still there.
    config = support.unescape_interpolation(yaml.safe_load(run_id.read_text()))
    assert config["data"]["train_files"] == f"{data}/gsm8k/train.parquet"
    assert config["data"]["val_files"] == f"{data}/gsm8k/test.parquet"
    assert config["trainer"]["default_local_dir"] == f"{tmp_path}/ckpt/gsm8k-custom-reward"
