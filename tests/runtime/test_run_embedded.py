"""`tutorrl run` as a user runs it: a real subprocess, a real embedded Ray head, real bash."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from runtime_helpers import ECHO_LAUNCH, SECRET, TUTORRL, clean_env, procs_with_env, run_tutorrl, wait_for
from runtime_helpers import records_of as _records

pytestmark = [pytest.mark.slow, pytest.mark.needs_ray]

def _all_bytes_under(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in path.rglob("*") if p.is_file())


def test_success_exact_env_secret_and_no_hijack(make_bundle, workdir):
    value = "a$HOME${X}$$"
    bundle = make_bundle(ECHO_LAUNCH, env={"A": value}, passthrough=["MY_SECRET"], gpus=1)
    # RAY_ADDRESS / RAY_API_SERVER_ADDRESS point nowhere: they must not redirect the embedded client.
    env = clean_env(MY_SECRET=SECRET, RAY_ADDRESS="http://127.0.0.1:9", RAY_API_SERVER_ADDRESS="http://127.0.0.1:9",
                    TUTORRL_EMBEDDED_NUM_GPUS="1")
    proc = run_tutorrl(["run", str(bundle)], workdir, env)
    assert proc.returncode == 0, proc.stderr
    assert f"driver A=[{value}]" in proc.stdout
    assert f"worker A=[{value}]" in proc.stdout
    assert "driver secret=[[redacted]]" in proc.stdout
    assert "worker secret same=[True]" in proc.stdout
    (runtime_env,) = [line for line in proc.stdout.splitlines() if line.startswith("job runtime_env=")]
    assert "TUTORRL_SECRETS_FILE" in runtime_env and "[redacted]" not in runtime_env
    (rec,) = _records(bundle)
    assert rec["status"] == "succeeded" and rec["exit_code"] == 0 and rec["address_kind"] == "embedded"
    assert rec["submission_id"] == f"tutorrl-{bundle.name}-1"
    assert f"worker evidence=[{bundle.resolve()}|{rec['submission_id']}]" in proc.stdout
    assert f"worker cwd=[{workdir}]" in proc.stdout  # relative spec paths mean the same in workers
    log = (bundle / "runs" / rec["run_id"] / "job.log").read_text()
    assert f"worker A=[{value}]" in log
    assert SECRET.encode() not in _all_bytes_under(bundle)
    assert SECRET not in proc.stderr and SECRET not in proc.stdout
    # the embedded head is gone with its run
    assert procs_with_env("TUTORRL_RUN_ID", rec["submission_id"]) == []


def test_concurrent_runs_and_exit_codes(make_bundle, workdir):
    bundle = make_bundle('#!/usr/bin/env bash\necho "exiting $TEST_EXIT"\nexit "$TEST_EXIT"\n',
                         passthrough=["TEST_EXIT"], gpus=1)
    env = dict(TUTORRL_EMBEDDED_NUM_GPUS="1")
    a = subprocess.Popen([*TUTORRL, "run", str(bundle)], cwd=workdir, env=clean_env(TEST_EXIT="0", **env),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    b = subprocess.Popen([*TUTORRL, "run", str(bundle)], cwd=workdir, env=clean_env(TEST_EXIT="7", **env),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out_a, err_a = a.communicate(timeout=240)
    out_b, err_b = b.communicate(timeout=240)
    assert a.returncode == 0, err_a
    assert b.returncode == 7, err_b
    recs = {r["exit_code"]: r for r in _records(bundle)}
    assert sorted(r["attempt"] for r in recs.values()) == [1, 2]
    assert recs[0]["status"] == "succeeded" and recs[7]["status"] == "failed"
    assert "exit code 7" in recs[7]["message"]
    listing = run_tutorrl(["runs", str(bundle)], workdir)
    assert listing.returncode == 0
    lines = listing.stdout.strip().splitlines()[1:]
    assert len(lines) == 2 and any("failed" in line and line.rstrip().endswith("7") for line in lines)
    as_json = json.loads(run_tutorrl(["runs", str(bundle), "--json"], workdir).stdout)
    assert {r["status"] for r in as_json} == {"succeeded", "failed"}


def test_interrupt_stops_job_and_head(make_bundle, workdir):
    bundle = make_bundle('#!/usr/bin/env bash\necho started\nsleep 600 &\nwait\n', gpus=1)
    proc = subprocess.Popen([*TUTORRL, "run", str(bundle)], cwd=workdir,
                            env=clean_env(TUTORRL_EMBEDDED_NUM_GPUS="1"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def running():
            recs = _records(bundle)
            return recs and recs[0]["status"] == "running" and recs[0]
        rec = wait_for(running, 120, "the job to be RUNNING")
        sid = rec["submission_id"]
        wait_for(lambda: "started" in (bundle / "runs" / sid / "job.log").read_text(), 60, "the job's output")
        assert procs_with_env("TUTORRL_RUN_ID", sid), "the job's processes should carry the run id"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    (rec,) = _records(bundle)
    assert rec["status"] == "stopped" and rec["exit_code"] == 130
    assert "started" in (bundle / "runs" / sid / "job.log").read_text()
    wait_for(lambda: procs_with_env("TUTORRL_RUN_ID", sid) == [], 20, "no leftover processes of the run")


def test_tampered_bundle_is_refused_before_anything_starts(make_bundle, workdir):
    bundle = make_bundle()
    launch = bundle / "launch.sh"
    text = launch.read_text()
    tampered = text.replace("trainer.total_training_steps=1", "trainer.total_training_steps=2")
    assert tampered != text
    launch.write_text(tampered)
    proc = run_tutorrl(["run", str(bundle)], workdir)
    assert proc.returncode == 2
    assert "launch.sh was modified" in proc.stderr
    assert not (bundle / "runs").exists()


def test_local_preflight_refusals(make_bundle, tmp_path, workdir):
    bundle = make_bundle(passthrough=["MY_SECRET"])
    empty = tmp_path / "elsewhere"
    empty.mkdir()
    proc = run_tutorrl(["run", str(bundle)], empty)  # no data/ here, no MY_SECRET
    assert proc.returncode == 2
    assert "data.train: 'data/train.parquet' does not exist" in proc.stderr
    assert "data.val" in proc.stderr and "MY_SECRET" in proc.stderr
    assert "Traceback" not in proc.stderr
    old = make_bundle(spec_target="0.9.0")
    proc = run_tutorrl(["run", str(old)], workdir)
    assert proc.returncode == 2
    assert "bundle targets verl 0.9.0" in proc.stderr
    assert not (bundle / "runs").exists() and not (old / "runs").exists()
