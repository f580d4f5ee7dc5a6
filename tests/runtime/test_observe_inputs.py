"""`tutorrl status`, `logs` and `runs` on run folders that hold anything: a run.json that is no
record, a job.log that is a FIFO or a link to /dev/zero, a run id no folder can have. Each is a
clear message (exit 2) or is shown without it -- never a traceback, a hang or a MemoryError.
Real files and FIFOs, the real command in a subprocess (a hang is its timeout, not a sleep)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from runtime_helpers import crafted_record as _record

# Enough for tutorrl status, far below what reading /dev/zero whole would take: the unbounded
# reader fails fast with MemoryError instead of filling the machine's memory.
_ADDRESS_SPACE = 3 << 30


def _limited():
    resource.setrlimit(resource.RLIMIT_AS, (_ADDRESS_SPACE, _ADDRESS_SPACE))


def _tutorrl(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tutorrl", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=60, preexec_fn=_limited)


def _run_dir(tmp_path: Path, **changes) -> Path:
    run_dir = tmp_path / "bundles" / "abcd" / "runs" / "tutorrl-abcd-1"
    run_dir.mkdir(parents=True)
    (run_dir.parent.parent / "manifest.json").write_text("{}")
    (run_dir / "run.json").write_text(json.dumps(_record(status="succeeded", exit_code=0, **changes)))
    return run_dir


_NOT_RECORDS = {
    "text": b"hello, world\n",
    "empty": b"",
    "array": b"[1, 2, 3]",
    "wrong types": json.dumps(_record(attempt="one", dry_run="no")).encode(),
    "deeply nested": json.dumps(_record()).encode()[:-1] + b', "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "5000 digits": json.dumps(_record()).encode().replace(b'"attempt": 1', b'"attempt": ' + b"7" * 5000),
    "unknown status": json.dumps(_record(status="exploded")).encode(),
}


@pytest.mark.parametrize("name", sorted(_NOT_RECORDS))
def test_a_run_json_that_is_no_record_is_named(tmp_path, name):
    run_dir = tmp_path / "bundles" / "abcd" / "runs" / "tutorrl-abcd-1"
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_bytes(_NOT_RECORDS[name])
    got = _tutorrl("status", str(run_dir), cwd=tmp_path)
    assert got.returncode == 2, got.stderr
    assert "Traceback" not in got.stderr and "run.json" in got.stderr and "not a run record" in got.stderr


def test_a_run_json_linked_elsewhere_is_not_followed(tmp_path):
    run_dir = tmp_path / "bundles" / "abcd" / "runs" / "tutorrl-abcd-1"
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").symlink_to("/etc/passwd")
    got = _tutorrl("status", str(run_dir), cwd=tmp_path)
    assert got.returncode == 2 and "is a symlink" in got.stderr and "Traceback" not in got.stderr
    (run_dir.parent.parent / "manifest.json").write_text("{}")
    listed = _tutorrl("runs", str(run_dir.parent.parent), cwd=tmp_path)
    assert listed.returncode == 0 and "unreadable" in listed.stdout


@pytest.mark.parametrize("length", [256, 5000])
def test_a_run_id_longer_than_a_file_name_is_refused(tmp_path, length):
    ref = "tutorrl-abcd-" + "1" * (length - len("tutorrl-abcd-"))
    got = _tutorrl("status", ref, cwd=tmp_path)
    assert got.returncode == 2 and "Traceback" not in got.stderr
    assert f"{length} characters" in got.stderr


@pytest.mark.parametrize("name", ["job.log", "metrics.jsonl"])
def test_a_fifo_in_the_run_folder_does_not_hang_status(tmp_path, name):
    run_dir = _run_dir(tmp_path)
    os.mkfifo(run_dir / name)
    got = _tutorrl("status", str(run_dir), cwd=tmp_path)
    assert got.returncode == 0 and "succeeded" in got.stdout, got.stderr


def test_a_fifo_spec_does_not_hang_status(tmp_path):
    run_dir = _run_dir(tmp_path)
    os.mkfifo(run_dir.parent.parent / "spec.toml")
    got = _tutorrl("status", str(run_dir), cwd=tmp_path)
    assert got.returncode == 0, got.stderr


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_a_job_log_that_is_no_file_is_named_by_logs(tmp_path, kind):
    run_dir = _run_dir(tmp_path)
    if kind == "fifo":
        os.mkfifo(run_dir / "job.log")
    else:
        (run_dir / "job.log").symlink_to(kind)
    got = _tutorrl("logs", str(run_dir), cwd=tmp_path)
    assert got.returncode == 2 and "Traceback" not in got.stderr
    assert "job.log" in got.stderr and ("a FIFO" in got.stderr or "symlink" in got.stderr)


@pytest.mark.parametrize("name", ["job.log", "metrics.jsonl"])
def test_a_link_to_dev_zero_is_not_read(tmp_path, name):
    run_dir = _run_dir(tmp_path)
    (run_dir / name).symlink_to("/dev/zero")
    got = _tutorrl("status", str(run_dir), cwd=tmp_path)
    assert got.returncode == 0 and "MemoryError" not in got.stderr, got.stderr


def test_a_real_log_is_still_shown(tmp_path):
    run_dir = _run_dir(tmp_path)
    (run_dir / "job.log").write_text("step:1 - critic/score/mean:0.5\nstep:2 - critic/score/mean:0.75\n")
    got = _tutorrl("logs", str(run_dir), cwd=tmp_path)
    assert got.returncode == 0 and got.stdout.endswith("critic/score/mean:0.75\n")
    status = _tutorrl("status", str(run_dir), cwd=tmp_path)
    assert "step 2/?" in status.stdout
