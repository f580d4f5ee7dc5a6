"""An embedded dry run: a head with only what one Jobs API job needs, and the result said before it stops."""

from __future__ import annotations

import os

import pytest

from runtime_helpers import clean_env, procs_with_env, run_tutorrl
from runtime_helpers import records_of as _records
from tutorrl.runtime import jobs_api, submit
from tutorrl.runtime.head import LEAN_MODULES, EmbeddedHead

pytestmark = pytest.mark.slow


def _tree(root: int) -> list[str]:
    """Command lines of ``root`` and every process below it."""
    children: dict[int, list[int]] = {}
    commands: dict[int, str] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                parent = int(fh.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                commands[int(name)] = fh.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(commands.get(pid, ""))
        todo.extend(children.get(pid, []))
    return out


def test_a_lean_head_starts_only_what_the_jobs_api_needs_and_runs_a_job(tmp_path):
    head = EmbeddedHead(run_id="tutorrl-leanhead-1", num_gpus=0, workdir=tmp_path, lean=True)
    try:
        head.start()
        client = jobs_api.client(head.url, head.headers)
        sid = client.submit_job(entrypoint="echo lean-ok", submission_id="tutorrl-leanhead-job-1",
                                entrypoint_num_cpus=1)
        assert submit.wait_terminal(client, sid) == "SUCCEEDED"
        assert "lean-ok" in client.get_job_logs(sid)
        tree = _tree(head.proc.pid)
        modules = sorted(c.split("ray-dashboard-", 1)[1].split("-", 1)[0] for c in tree if "ray-dashboard-" in c)
        assert modules == sorted(LEAN_MODULES), modules
        for left_out in ("autoscaler/_private/monitor.py", "_private/log_monitor.py", "ray.util.client.server",
                         "ray::IDLE"):
            assert not [c for c in tree if left_out in c], left_out
        # What stays: the GCS, the raylet, the dashboard and its agent, the runtime-env agent.
        for kept in ("gcs_server", "raylet/raylet", "dashboard/dashboard.py", "ray::DashboardAgent"):
            assert [c for c in tree if kept in c], kept
    finally:
        head.stop()


def test_an_embedded_dry_run_says_its_result_and_what_it_proved_before_the_head_stops(make_bundle, workdir):
    bundle = make_bundle('#!/usr/bin/env bash\necho "composed with $*"\n', gpus=1)
    proc = run_tutorrl(["run", str(bundle), "--dry-run"], workdir, clean_env(TUTORRL_EMBEDDED_NUM_GPUS="0"))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    (result,) = [i for i, line in enumerate(lines) if "dry run succeeded" in line]
    (stopping,) = [i for i, line in enumerate(lines) if "stopping the embedded Ray head" in line]
    assert result < stopping, lines[result - 2:]
    assert lines[result + 1].startswith("tutorrl: proved: the bundle's files match its manifest")
    assert lines[result + 2].startswith("tutorrl: not proved")
    assert "the 1 GPU(s) it needs (not checked)" in lines[result + 2]
    (rec,) = _records(bundle)
    assert rec["status"] == "succeeded" and rec["dry_run"] is True
    assert procs_with_env("TUTORRL_RUN_ID", rec["submission_id"]) == []
