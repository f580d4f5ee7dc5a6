"""An embedded dry run: a head with only what one Jobs API job needs, and the result said before it stops."""

from __future__ import annotations

import os
import signal

import pytest

from runtime_helpers import clean_env, procs_with_env, run_tutorrl
from runtime_helpers import records_of as _records
from tutorrl.runtime import jobs_api, submit
from tutorrl.errors import RefusedError
from tutorrl.runtime.head import LEAN_MODULES, EmbeddedHead, embedded_cpus

pytestmark = [pytest.mark.slow, pytest.mark.needs_ray, pytest.mark.needs_verl]


def _tree(root: int) -> list[str]:
    """Command lines of ``root`` and every process below it, ``root``'s first."""
    return [cmd for _, cmd in _family(root).values()]


def _family(root: int) -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of ``root`` and every process below it."""
    procs = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as fh:
                    parent = int(fh.read().rsplit(")", 1)[1].split()[1])
                with open(f"/proc/{name}/cmdline", "rb") as fh:
                    procs[int(name)] = (parent, fh.read().replace(b"\0", b" ").decode(errors="replace"))
            except (OSError, IndexError, ValueError):
                continue
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in procs.items():
        children.setdefault(parent, []).append(pid)
    out, todo = {}, [root]
    while todo:
        pid = todo.pop()
        if pid in procs:
            out[pid] = procs[pid]
            todo.extend(children.get(pid, []))
    return out


def test_a_lean_head_starts_only_what_the_jobs_api_needs_and_runs_a_job(tmp_path):
    head = EmbeddedHead(run_id="tutorrl-leanhead-1", num_gpus=0, workdir=tmp_path, lean=True)
    try:
        head.start()
        # What the State API would have said of the node, from the table the head's program wrote.
        res = head.resources()
        assert res.alive_nodes == 1 and res.total["CPU"] == embedded_cpus(0) and res.gpus == 0, res
        assert res.per_node[0]["memory"] > 0 and "node:127.0.0.1" in res.per_node[0], res.per_node
        client = jobs_api.client(head.url, head.headers)
        sid = client.submit_job(entrypoint="echo lean-ok", submission_id="tutorrl-leanhead-job-1",
                                entrypoint_num_cpus=1)
        assert submit.wait_terminal(client, sid) == "SUCCEEDED"
        assert "lean-ok" in client.get_job_logs(sid)
        tree = _tree(head.proc.pid)
        modules = sorted(c.split("ray-dashboard-", 1)[1].split("-", 1)[0] for c in tree if "ray-dashboard-" in c)
        assert modules == sorted(LEAN_MODULES) and "NodeHead" not in modules, modules
        # JobHead is forked from a forkserver that is itself a fork of the dashboard's process, made once
        # that process had imported Ray: no second interpreter imports Ray for it.
        assert not [c for c in tree if "multiprocessing.forkserver" in c], tree
        family = _family(head.proc.pid)
        (job_head,) = [pid for pid, (_, cmd) in family.items() if "ray-dashboard-JobHead" in cmd]
        server = family[job_head][0]
        dashboard = family[server][0]
        lean_dashboard = f"{head.run_dir / 'lean_ray.py'} dashboard "
        assert lean_dashboard in family[server][1] and lean_dashboard in family[dashboard][1], family
        # The dashboard, its agent and the runtime-env agent are zygotes: forks of `ray start` (the head's
        # first process) made once it had imported Ray, each handed its role by the process Ray started
        # for it (`handoff`), which stands in for it.
        (agent,) = [pid for pid, (_, cmd) in family.items() if "ray::DashboardAgent" in cmd]
        (env_agent,) = [pid for pid, (_, cmd) in family.items() if "ray::RuntimeEnvAgent" in cmd]
        assert {family[pid][0] for pid in (dashboard, agent, env_agent)} == {head.proc.pid}, family
        handoff = f"{head.run_dir / 'lean_ray.py'} handoff "
        stand_ins = {cmd.split(handoff, 1)[1].split()[0]: pid for pid, (_, cmd) in family.items()
                     if handoff in cmd and "raylet/raylet" not in cmd}
        assert sorted(stand_ins) == ["agent", "dashboard", "runtime_env_agent"], family
        # The runtime-env agent runs on the aiohttp Ray ships beside its main.py (which puts that
        # folder first on its path), not on the one installed beside Ray, as it would unforked.
        with open(f"/proc/{env_agent}/maps") as fh:
            assert "runtime_env/agent/thirdparty_files/aiohttp/" in fh.read()
        # Each agent reads the raylet's pipe its own stand-in was given (the raylet's health check).
        for forked, name in ((agent, "agent"), (env_agent, "runtime_env_agent")):
            pipe = os.readlink(f"/proc/{forked}/fd/0")
            assert pipe == os.readlink(f"/proc/{stand_ins[name]}/fd/0") and pipe.startswith("pipe:"), (name, pipe)
        # JobHead alone: no State API process.
        for left_out in ("autoscaler/_private/monitor.py", "_private/log_monitor.py", "ray.util.client.server",
                         "ray::IDLE", "lean_ray.py start", "StateHead"):
            assert not [c for c in tree if left_out in c], left_out
        # `ray start` is gone once the head is up: its pid waits on the Ray processes, with none of Ray loaded.
        assert tree[0].split()[1:5] == ["-I", "-S", str(head.run_dir / "lean_ray.py"), "watch"], tree[0]
        # The raylet starts Python workers (a job's supervisor) through the program's worker role, not
        # Ray's setup_worker.py alone: the role sets up a worker with only variables in its runtime env
        # in one interpreter (tests/runtime/test_lean_worker.py holds what it does).
        (raylet,) = [c for c in tree if "--python_worker_command=" in c]
        assert f"{head.run_dir / 'lean_ray.py'} worker " in raylet, raylet
        # The agent loads the job agent alone (the raylet started it with that in its command line), and
        # watches the raylet through the pipe the raylet gave its stand-in (not by being its child).
        agent_log = next(head.run_dir.glob("ray/session_*/logs/dashboard_agent.log")).read_text()
        assert "Loaded 1 modules." in agent_log and "JobAgent" in agent_log, agent_log[-2000:]
        assert "check_parent_via_pipe" in agent_log and "Raylet is considered dead" not in agent_log, agent_log[-2000:]
        # Ready meant ready: the first job found the head node and its agent at once (the head node
        # id NodeHead would write, the agent's address), JobHead never had to wait and ask again.
        job_head_log = next(head.run_dir.glob("ray/session_*/logs/dashboard_JobHead.log")).read_text()
        assert "Failed to get head node agent" not in job_head_log, job_head_log[-2000:]
        # What stays: the GCS, the raylet, the dashboard and its agent, the runtime-env agent.
        for kept in ("gcs_server", "raylet/raylet", "dashboard/dashboard.py", "ray::DashboardAgent"):
            assert [c for c in tree if kept in c], kept
    finally:
        head.stop()


def test_a_head_folder_that_would_need_quoting_gets_the_full_head(tmp_path, monkeypatch):
    # The lean program's path goes unquoted into the agent's command line, which the raylet splits:
    # under a TMPDIR with a space the agent would never start, so the head starts whole instead.
    import shutil
    import tempfile

    spaced = tempfile.mkdtemp(prefix="t l", dir="/tmp")
    monkeypatch.setattr(tempfile, "tempdir", spaced)
    head = EmbeddedHead(run_id="tutorrl-leanhead-3", num_gpus=0, workdir=tmp_path, lean=True)
    try:
        head.start()
        assert " " in str(head.run_dir) and head._lean_file is None
        assert not (head.run_dir / "lean_ray.py").exists()
        client = jobs_api.client(head.url, head.headers)
        sid = client.submit_job(entrypoint="echo whole-ok", submission_id="tutorrl-leanhead-job-3",
                                entrypoint_num_cpus=1)
        assert submit.wait_terminal(client, sid) == "SUCCEEDED"
        assert "whole-ok" in client.get_job_logs(sid)
    finally:
        head.stop()
        shutil.rmtree(spaced, ignore_errors=True)


@pytest.mark.parametrize("which, run", [
    # `ray start --block` ends the head when a Ray process dies; what waits in its place does too.
    ("raylet/raylet", "tutorrl-leanhead-2"),
    # The agent is a zygote's fork, not the raylet's child: its stand-in ends with it, and the raylet
    # (which fate-shares with its agents) and then the head end as they would for Ray's own agent.
    ("ray::DashboardAgent", "tutorrl-leanhead-4"),
])
def test_a_lean_head_ends_when_one_of_its_ray_processes_does(tmp_path, which, run):
    head = EmbeddedHead(run_id=run, num_gpus=0, workdir=tmp_path, lean=True)
    try:
        head.start()
        (pid,) = [p for p, (parent, cmd) in _family(head.proc.pid).items()
                  if parent == head.proc.pid and which in cmd]
        os.kill(pid, signal.SIGKILL)
        assert head.proc.wait(30) == 1
        assert "of the head ended" in head.log_path.read_text()
    finally:
        head.stop()
    assert procs_with_env("TUTORRL_RUN_ID", run) == []


def test_agents_that_check_their_raylet_by_parent_pid_are_started_by_the_raylet(tmp_path, monkeypatch):
    # With the pipe check off, a Ray agent ends itself once its parent is not its raylet: a fork of
    # `ray start` would end the head seconds after it came up. The stand-ins run the agents themselves.
    monkeypatch.setenv("RAY_enable_pipe_based_agent_to_parent_health_check", "0")
    head = EmbeddedHead(run_id="tutorrl-leanhead-5", num_gpus=0, workdir=tmp_path, lean=True)
    try:
        head.start()
        family = _family(head.proc.pid)
        (raylet,) = [pid for pid, (_, cmd) in family.items() if "raylet/raylet" in cmd]
        for title in ("ray::DashboardAgent", "ray::RuntimeEnvAgent"):
            (agent,) = [pid for pid, (_, cmd) in family.items() if title in cmd]
            assert family[agent][0] == raylet, (title, family)
        # The dashboard has no such check: it is still a zygote's, beside its stand-in.
        dashboards = sorted(" handoff " in cmd for pid, (parent, cmd) in family.items()
                            if "dashboard/dashboard.py" in cmd and parent == head.proc.pid)
        assert dashboards == [False, True], family
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


# Stands in for a Ray installed without [default] in the job's Python: one of the dashboard's
# packages cannot be found or imported.
_WITHOUT_AIOHTTP_CORS = '''
import sys


class _Hide:
    def find_spec(self, name, path=None, target=None):
        if name == "aiohttp_cors":
            raise ModuleNotFoundError("No module named 'aiohttp_cors'", name=name)
        return None


sys.meta_path.insert(0, _Hide())
'''


def test_a_lean_head_without_the_dashboards_packages_is_refused_with_rays_reason(tmp_path, monkeypatch):
    # The lean program finds the dashboard's packages instead of importing them; where one is
    # missing, Ray's own check runs and refuses before anything starts (not a dashboard that dies on
    # import and a raylet that never registers, 60 s later).
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(_WITHOUT_AIOHTTP_CORS)
    monkeypatch.setenv("PYTHONPATH", str(hide))
    head = EmbeddedHead(run_id="tutorrl-leanhead-deps", num_gpus=0, workdir=tmp_path, lean=True)
    try:
        with pytest.raises(RefusedError) as info:
            head.start()
        assert "Cannot include dashboard with missing packages" in str(info.value)
        assert "timed out during startup" not in str(info.value)
    finally:
        head.stop()
