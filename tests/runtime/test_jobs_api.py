"""jobs_api.HttpJobClient, the Jobs API without Ray's SDK (a dry run on its own embedded head): it posts
what Ray's SDK posts, reads answers as the SDK-based client does, uploads nothing, and its log tail
yields what the log gained. A real HTTP server on 127.0.0.1 (support.HostileServer) and Ray's real SDK."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

import support
from tutorrl.errors import RefusedError
from tutorrl.runtime import jobs_api

VERSION = (200, {}, json.dumps({"ray_version": "2.60.0", "version": "4"}).encode())
SUBMISSION = dict(entrypoint="cd /w && exec bash /b/launch.sh --cfg all > /r/hydra-cfg-all.yaml",
                  submission_id="tutorrl-abc-1",
                  runtime_env={"env_vars": {"TUTORRL_RUN_ID": "tutorrl-abc-1", "A": "1"},
                               "worker_process_setup_hook": "tutorrl.runtime.job_secrets.setup"},
                  metadata={"tutorrl_run": "tutorrl-abc-1", "tutorrl_dry_run": "true"},
                  entrypoint_num_cpus=1, entrypoint_num_gpus=0)


@pytest.fixture
def dashboard():
    server = support.HostileServer()
    server.routes["/api/version"] = VERSION
    yield server
    server.close()


def _posted(server) -> dict:
    (body,) = [b for (method, path, _), b in zip(server.seen, server.bodies) if method == "POST"]
    return json.loads(body)


@pytest.mark.needs_ray
def test_it_posts_what_rays_sdk_posts(dashboard):
    dashboard.routes["/api/jobs/"] = (200, {}, b'{"job_id": "tutorrl-abc-1", "submission_id": "tutorrl-abc-1"}')
    assert jobs_api.client(dashboard.url, {}).submit_job(**SUBMISSION) == "tutorrl-abc-1"
    by_sdk = _posted(dashboard)
    dashboard.seen.clear()
    dashboard.bodies.clear()
    assert jobs_api.http_client(dashboard.url, {"Authorization": "Bearer t"}).submit_job(**SUBMISSION) == "tutorrl-abc-1"
    assert _posted(dashboard) == by_sdk
    assert [h.get("Authorization") for m, _, h in dashboard.seen if m == "POST"] == ["Bearer t"]


def test_a_refusal_reads_as_rays_so_an_id_in_use_is_recognised(dashboard):
    dashboard.routes["/api/jobs/"] = (400, {}, b"Job with submission_id tutorrl-abc-1 already exists. Please use a "
                                              b"different submission_id.")
    with pytest.raises(RuntimeError, match="already exists"):
        jobs_api.http_client(dashboard.url, {}).submit_job(**SUBMISSION)


def test_it_uploads_nothing(dashboard):
    with pytest.raises(RefusedError, match="uploads nothing .working_dir"):
        jobs_api.http_client(dashboard.url, {}).submit_job(**{**SUBMISSION, "runtime_env": {"working_dir": "/b"}})
    assert [m for m, _, _ in dashboard.seen if m == "POST"] == []


@pytest.mark.parametrize("answer", [(200, {}, b"{}"), (200, {}, b"<html>sign in</html>"), "silent"])
def test_an_answer_that_is_not_rays_is_a_located_refusal(dashboard, answer):
    dashboard.routes["/api/jobs/"] = answer
    with pytest.raises(RefusedError) as caught:
        jobs_api.http_client(dashboard.url, {}, timeout=0.5).submit_job(**SUBMISSION)
    assert f"{dashboard.url}/api/jobs/" in str(caught.value)


def test_no_dashboard_there_is_a_refusal(dashboard):
    dashboard.routes["/api/version"] = (404, {}, b"not found")
    with pytest.raises(RefusedError, match="cannot connect to the Ray Jobs API"):
        jobs_api.http_client(dashboard.url, {})


def test_the_tail_yields_what_the_log_gained(dashboard, monkeypatch):
    monkeypatch.setattr(jobs_api, "TAIL_POLL_S", 0.01)
    logs = ["", "one\n", "one\n", "one\ntwo\n"]
    dashboard.routes["/api/jobs/tutorrl-abc-1/logs"] = [(200, {}, json.dumps({"logs": t}).encode()) for t in logs]
    client = jobs_api.http_client(dashboard.url, {})

    async def first_two():
        chunks = []
        async for chunk in client.tail_job_logs("tutorrl-abc-1"):
            chunks.append(chunk)
            if len(chunks) == 2:
                return chunks

    assert asyncio.run(asyncio.wait_for(first_two(), 30)) == ["one\n", "two\n"]


def test_reading_answers_needs_no_ray():
    # The point of the client: tutorrl's process never imports Ray's SDK (or Ray) for it.
    code = ("import sys; from tutorrl.runtime import jobs_api; jobs_api.HttpJobClient('http://127.0.0.1:1', {}); "
            "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
