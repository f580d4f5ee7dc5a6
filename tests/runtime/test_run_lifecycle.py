"""Every way a run ends leaves a record that says what happened: signals, a
terminal or pipe that goes away, `kill -9`, detached runs, `tutorrl stop`.
Real `tutorrl` processes, real Ray heads on loopback."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import signal
import subprocess
import termios
import threading
from pathlib import Path

import pytest

from runtime_helpers import TUTORRL, clean_env, procs_with_env, run_tutorrl, wait_for
from runtime_helpers import records_of as _records

pytestmark = [pytest.mark.slow, pytest.mark.needs_ray]

LONG_JOB = '#!/usr/bin/env bash\necho started\nsleep 600 &\nwait\n'
ENV = dict(TUTORRL_EMBEDDED_NUM_GPUS="1")


def _running(bundle: Path):
    def check():
        recs = _records(bundle)
        if recs and recs[-1]["status"] == "running":
            log = bundle / "runs" / recs[-1]["run_id"] / "job.log"
            return log.is_file() and "started" in log.read_text() and recs[-1]
        return False
    return wait_for(check, 120, "the job to be RUNNING and print")


def _assert_closed_cleanly(bundle: Path, rec: dict) -> None:
    run_dir = bundle / "runs" / rec["run_id"]
    assert sorted(p.name for p in run_dir.iterdir() if p.name.startswith(".") and p.name != ".lock") == []
    wait_for(lambda: procs_with_env("TUTORRL_RUN_ID", rec["submission_id"]) == [], 30,
             "no leftover processes of the run")
    if rec.get("head_dir"):
        # A detached run's supervisor closes the record, then stops the head and
        # removes its folder: the record can be read before the folder is gone.
        wait_for(lambda: not Path(rec["head_dir"]).exists(), 30, "the head's temp folder removed")


def test_closing_the_terminal_closes_the_record(make_bundle, workdir):
    """The reported bug: tutorrl run on a terminal that is closed (SIGHUP, then EIO on every write)."""
    bundle = make_bundle(LONG_JOB, gpus=1)
    master, slave = pty.openpty()

    def controlling_terminal():
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen([*TUTORRL, "run", str(bundle)], cwd=workdir, env=clean_env(**ENV),
                            stdin=slave, stdout=slave, stderr=slave, preexec_fn=controlling_terminal)
    os.close(slave)

    closing = threading.Event()

    def drain():  # a terminal that is read, until it is closed
        import select

        while not closing.is_set():
            if select.select([master], [], [], 0.1)[0]:
                try:
                    os.read(master, 65536)
                except OSError:
                    return

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        _running(bundle)
        closing.set()
        reader.join()  # a read in progress would keep the terminal open
        os.close(master)  # the terminal window goes away
        proc.wait(90)
    finally:
        if proc.poll() is None:
            proc.kill()
    (rec,) = _records(bundle)
    assert rec["status"] == "stopped" and rec["exit_code"] == 130, rec
    assert rec["message"] == "interrupted (SIGHUP)"
    assert rec["ended"] is not None
    _assert_closed_cleanly(bundle, rec)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_signal_with_output_gone(make_bundle, workdir, sig):
    """In its own session (setsid), its stdout/stderr pipes closed, then a signal."""
    bundle = make_bundle(LONG_JOB, gpus=1)
    proc = subprocess.Popen([*TUTORRL, "run", str(bundle)], cwd=workdir, env=clean_env(**ENV),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        _running(bundle)
        proc.stdout.close()
        proc.stderr.close()
        proc.send_signal(sig)
        proc.wait(90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    (rec,) = _records(bundle)
    assert rec["status"] == "stopped" and rec["message"] == f"interrupted ({sig.name})", rec
    _assert_closed_cleanly(bundle, rec)


def test_kill_9_is_reconciled_by_the_next_command(make_bundle, workdir, tmp_path):
    bundle = make_bundle(LONG_JOB, gpus=1)
    proc = subprocess.Popen([*TUTORRL, "run", str(bundle)], cwd=workdir, env=clean_env(**ENV),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rec = _running(bundle)
    proc.kill()
    proc.wait()
    assert _records(bundle)[0]["status"] == "running"  # nobody closed it
    listing = run_tutorrl(["runs", str(bundle), "--format", "json"], workdir)
    assert listing.returncode == 0, listing.stderr
    (listed,) = json.loads(listing.stdout)
    # The head may still be draining (PR_SET_PDEATHSIG): then the job is stopped first (exit 130);
    # once the head is gone the outcome is unknown (no exit code).
    assert listed["status"] == "stopped" and listed["exit_code"] in (None, 130)
    assert "tutorrl run ended without closing the run" in listed["message"]
    # What was shown is what was written, and the record is this machine's own (its seal checks).
    assert {**_records(bundle)[0], "verified": True} == listed
    _assert_closed_cleanly(bundle, rec)
    # Found by its id from another folder (the index of runs of this machine).
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    status = run_tutorrl(["status", rec["run_id"]], elsewhere)
    assert status.returncode == 0, status.stderr
    assert status.stdout.startswith(f"{rec['run_id']}: stopped")


def test_detached_run_status_logs_stop(make_bundle, workdir, tmp_path):
    bundle = make_bundle(LONG_JOB, gpus=1)
    detach = run_tutorrl(["run", str(bundle), "--detach"], workdir, clean_env(**ENV))
    assert detach.returncode == 0, detach.stderr
    run_id = detach.stdout.strip()
    assert run_id == f"tutorrl-{bundle.name}-1"
    assert f"tutorrl logs {run_id} --follow" in detach.stderr and f"tutorrl stop {run_id}" in detach.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    wait_for(lambda: "started" in run_tutorrl(["logs", run_id], elsewhere).stdout, 60, "the job's output")
    status = json.loads(run_tutorrl(["status", run_id, "--format", "json"], elsewhere).stdout)
    assert status["status"] == "running" and status["detached"] is True and status["owner_alive"] is True
    assert status["dashboard"].startswith("http://127.0.0.1:")
    supervisor = status["owner"]["pid"]
    listed = json.loads(run_tutorrl(["status", "--format", "json"], elsewhere).stdout)
    assert [d["run_id"] for d in listed] == [run_id]

    stop = run_tutorrl(["stop", run_id], elsewhere)
    assert stop.returncode == 0, stop.stderr
    (rec,) = _records(bundle)
    assert rec["status"] == "stopped" and rec["exit_code"] == 130 and rec["message"] == "interrupted (SIGTERM)"
    assert not Path(f"/proc/{supervisor}").exists() or b"zombie" in Path(f"/proc/{supervisor}/status").read_bytes()
    _assert_closed_cleanly(bundle, rec)
    again = run_tutorrl(["stop", run_id], elsewhere)
    assert again.returncode == 0 and "already stopped" in again.stderr


def test_detached_run_ends_by_itself(make_bundle, workdir):
    launch = ('#!/usr/bin/env bash\necho started\nsleep 2\n'
              'echo "step:1 - actor/loss:0.5 - critic/score:1.0"\necho finished\n')
    bundle = make_bundle(launch, gpus=1)
    detach = run_tutorrl(["run", str(bundle), "--detach"], workdir, clean_env(**ENV))
    assert detach.returncode == 0, detach.stderr
    run_id = detach.stdout.strip()
    follow = run_tutorrl(["logs", run_id, "--follow"], workdir, timeout=120)  # returns when the run ends
    assert follow.returncode == 0
    assert "started" in follow.stdout and "finished" in follow.stdout
    (rec,) = _records(bundle)
    assert rec["status"] == "succeeded" and rec["exit_code"] == 0
    status = run_tutorrl(["status", run_id], workdir)
    assert "progress:  step 1/1" in status.stdout and "dashboard" not in status.stdout
    _assert_closed_cleanly(bundle, rec)
    wait_for(lambda: not Path(f"/proc/{rec['owner']['pid']}").exists(), 30, "the supervisor to exit")


def _fails_once(marker: Path) -> str:
    """A stand-in job that fails the first time (as a lost node would), then trains its one step."""
    return (f'#!/usr/bin/env bash\nif [ ! -e "{marker}" ]; then touch "{marker}"; echo "lost the node"; exit 1; fi\n'
            'echo "step:1 - actor/loss:0.5 - critic/score:1.0"\necho finished\n')


def test_a_detached_run_retries_in_its_supervisor(make_bundle, workdir, tmp_path):
    """`--detach --retries 1`: the supervisor (its own session) resubmits the failed job and closes one
    record of both attempts; `status` shows them. During the backoff the record reads failed while the
    supervisor lives: `logs --follow` follows on into the second attempt."""
    bundle = make_bundle(_fails_once(tmp_path / "failed-once"), gpus=1)
    detach = run_tutorrl(["run", str(bundle), "--detach", "--retries", "1", "--retry-backoff", "2"], workdir,
                         clean_env(**ENV))
    assert detach.returncode == 0, detach.stderr
    run_id = detach.stdout.strip()
    follow = run_tutorrl(["logs", run_id, "--follow"], workdir, timeout=120)  # returns when the run ends
    assert follow.returncode == 0
    assert "lost the node" in follow.stdout and "finished" in follow.stdout
    (rec,) = _records(bundle)
    assert rec["status"] == "succeeded" and rec["exit_code"] == 0 and rec["detached"] is True
    assert rec["retries"] == 1 and [a["status"] for a in rec["attempts"]] == ["failed", "succeeded"]
    assert [a["submission_id"] for a in rec["attempts"]] == [run_id, f"{run_id}-r1"]
    assert rec["attempts"][1]["reached_step"] == 1
    supervisor_log = (bundle / "runs" / run_id / "supervisor.log").read_text()
    assert f"{run_id}: attempt 1 failed (exit 1); retry 1/1 in 2s" in supervisor_log
    status = run_tutorrl(["status", run_id], workdir)
    assert "  attempts:  2 of at most 2" in status.stdout
    assert f"    2. {run_id}-r1: succeeded (exit 0), from scratch, reached step 1" in status.stdout
    _assert_closed_cleanly(bundle, rec)


def test_a_detached_run_stopped_between_attempts_is_stopped(make_bundle, workdir, tmp_path):
    """`tutorrl stop` during the backoff before a retry: the supervisor resubmits nothing and the record
    says stopped (not the failed its first attempt ended as)."""
    bundle = make_bundle(_fails_once(tmp_path / "failed-once"), gpus=1)
    detach = run_tutorrl(["run", str(bundle), "--detach", "--retries", "1", "--retry-backoff", "300"], workdir,
                         clean_env(**ENV))
    assert detach.returncode == 0, detach.stderr
    run_id = detach.stdout.strip()
    wait_for(lambda: "retry 1/1 in 300s" in (bundle / "runs" / run_id / "supervisor.log").read_text(), 120,
             "the supervisor to wait before its retry")
    stop = run_tutorrl(["stop", run_id], workdir)
    assert stop.returncode == 0, stop.stderr
    (rec,) = _records(bundle)
    assert rec["status"] == "stopped" and rec["exit_code"] == 130, rec
    assert rec["message"] == "interrupted before retry 1"
    assert [a["status"] for a in rec["attempts"]] == ["failed"]
    _assert_closed_cleanly(bundle, rec)
    wait_for(lambda: not Path(f"/proc/{rec['owner']['pid']}").exists()
             or b"zombie" in Path(f"/proc/{rec['owner']['pid']}/status").read_bytes(), 30, "the supervisor to exit")


def test_cluster_run_killed_then_reconciled_from_ray(ray_cluster, make_bundle, workdir):
    """The submitter dies; the job ends on the cluster with nobody watching; `status` closes the record."""
    bundle = make_bundle('#!/usr/bin/env bash\necho started >&2\nsleep 8\necho finished >&2\n', gpus=1)
    env = clean_env(RAY_AUTH_TOKEN=ray_cluster["token"])
    proc = subprocess.Popen([*TUTORRL, "run", str(bundle), "--address", ray_cluster["url"], "--dry-run"],
                            cwd=workdir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rec = _running(bundle)
    proc.kill()
    proc.wait()
    run_id = rec["run_id"]
    # Nobody follows the job now: `logs --follow` reads Ray's own stream (tail_job_logs, a websocket) and
    # returns when the job ends, with what it wrote after the follow began (the job sleeps 8 s between).
    follow = run_tutorrl(["logs", run_id, "--follow"], workdir, env, timeout=120)
    assert follow.returncode == 0 and "started" in follow.stdout and "finished" in follow.stdout, follow.stderr
    assert follow.stdout.count("finished") == 1  # each piece once, not the whole log again
    assert "Traceback" not in follow.stderr and "Unclosed" not in follow.stderr  # the stream closed, not dropped

    def closed():
        out = run_tutorrl(["status", run_id, "--format", "json"], workdir, env)
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
        assert data["status"] in ("running", "succeeded"), data
        return data["status"] == "succeeded" and data
    data = wait_for(closed, 60, "the record to follow the cluster's job", interval=0.5)
    assert data["exit_code"] == 0
    assert "closed after the job ended, not by its own tutorrl run" in data["message"]
    logs = run_tutorrl(["logs", run_id], workdir, env)
    assert "started" in logs.stdout
