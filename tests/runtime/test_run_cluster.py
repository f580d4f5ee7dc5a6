"""`tutorrl run --address` against a head started separately (loopback)."""

from __future__ import annotations

import json

import pytest

from runtime_helpers import clean_env, run_tutorrl
from runtime_helpers import ECHO_LAUNCH, SECRET, records_of as _records

pytestmark = [pytest.mark.slow, pytest.mark.needs_ray]


def test_cluster_run_exact_env_without_head_help(ray_cluster, make_bundle, workdir):
    # A head tutorrl did not start: the `$` transport must need nothing from its environment.
    value = "a$HOME${X}$$"
    bundle = make_bundle(ECHO_LAUNCH + 'echo "cwd=[$(pwd)]"\n', env={"A": value}, passthrough=["MY_SECRET"], gpus=1)
    env = clean_env(MY_SECRET=SECRET, RAY_AUTH_TOKEN=ray_cluster["token"], RAY_ADDRESS="http://127.0.0.1:9")
    # verl's workers on a cluster tutorrl did not start do not run here:
    # relative paths are refused for a real run, before anything is submitted.
    relative = run_tutorrl(["run", str(bundle), "--address", ray_cluster["url"]], workdir, env)
    assert relative.returncode == 2 and "trainer.output_dir: 'out' is relative" in relative.stderr
    assert "data.train: 'data/train.parquet' is relative" in relative.stderr
    assert not list(bundle.glob("runs/*"))  # refused locally: no run was even claimed

    # A 0-GPU cluster cannot host a 1-GPU spec: refused, and never submitted.
    absolute = make_bundle(ECHO_LAUNCH, gpus=1, train=str(workdir / "data/train.parquet"),
                           val=str(workdir / "data/val.parquet"), output_dir=str(workdir / "out"))
    refused = run_tutorrl(["run", str(absolute), "--address", ray_cluster["url"]], workdir, env)
    assert refused.returncode == 2
    assert "needs 1 GPU" in refused.stderr and "has 0 GPU" in refused.stderr
    assert _records(absolute)[0]["status"] == "refused"

    # A dry run needs no GPU; the stand-in launch.sh shows what reached the job.
    # The job sees this machine's files: its standard output (verl's composed
    # config, in a real bundle) goes to the run record instead of the terminal.
    proc = run_tutorrl(["run", str(bundle), "--address", ray_cluster["url"], "--dry-run"], workdir, env)
    assert proc.returncode == 0, proc.stderr
    assert "GPU check skipped" in proc.stderr
    rec = _records(bundle)[-1]
    out = (bundle / "runs" / rec["run_id"] / "hydra-cfg-all.yaml").read_text()
    assert f"driver A=[{value}]" in out and f"worker A=[{value}]" in out
    assert f"cwd=[{workdir}]" in out  # loopback: no upload, the job runs where tutorrl ran
    assert "driver A=" not in proc.stdout
    assert "accepted every override (their number is not in its output)" in proc.stderr
    assert rec["address_kind"] == "cluster" and rec["address"] == ray_cluster["url"]
    assert rec["dry_run"] is True and rec["attempt"] == 1
    assert ray_cluster["token"] not in json.dumps(rec)

    # --upload ships the bundle as working_dir: the job runs in Ray's copy.
    up = run_tutorrl(["run", str(bundle), "--address", ray_cluster["url"], "--dry-run", "--upload"], workdir, env)
    assert up.returncode == 0, up.stderr
    assert "runtime_resources/working_dir_files" in up.stdout
    # Ray's copy is ephemeral: the callback gets no bundle folder to write into.
    assert f"worker evidence=[|{_records(bundle)[-1]['submission_id']}]" in up.stdout
    assert _records(bundle)[-1]["working_dir_upload"] is True


def test_wrong_token_is_a_clear_refusal(ray_cluster, make_bundle, workdir):
    bundle = make_bundle(gpus=1)
    proc = run_tutorrl(["run", str(bundle), "--address", ray_cluster["url"], "--dry-run"], workdir,
                       clean_env(RAY_AUTH_TOKEN="not-the-token"))
    assert proc.returncode == 2
    assert "refused our credentials" in proc.stderr and "Traceback" not in proc.stderr
