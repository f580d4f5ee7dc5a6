"""A dashboard that redirects, stays silent, answers too much or answers nonsense:
tutorrl says so, in bounded time, and the user's token goes nowhere but the
address the user gave. Real HTTP servers on 127.0.0.1, the real clients
(`runtime/cluster.py`, `runtime/jobs_api.py`)."""

from __future__ import annotations

import json
import threading

import pytest

import support
from tutorrl.errors import RefusedError
from tutorrl.runtime import cluster, jobs_api

TOKEN = "s3cret-token-of-the-user"
VERSION = (200, {"Content-Type": "application/json"}, json.dumps({"ray_version": "2.60.0", "version": "4"}).encode())


@pytest.fixture
def dashboard():
    server = support.HostileServer()
    yield server
    server.close()


@pytest.fixture
def elsewhere():
    server = support.HostileServer()
    server.routes["/api/v0/nodes"] = (200, {}, support.ray_nodes_answer(8))
    server.routes["/api/version"] = VERSION
    yield server
    server.close()


def _within(seconds: float, call):
    """call() in a thread; what it returned or raised, or AssertionError if it is still waiting after ``seconds``."""
    got: list = []

    def main():
        try:
            got.append(call())
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            got.append(exc)

    worker = threading.Thread(target=main, daemon=True)
    worker.start()
    worker.join(seconds)
    assert got, f"still waiting after {seconds} s"
    return got[0]


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_to_another_host_never_gets_the_token(dashboard, elsewhere, status):
    dashboard.routes["/api/v0/nodes"] = (status, {"Location": elsewhere.url + "/api/v0/nodes"}, b"")
    got = _within(30, lambda: cluster.cluster_resources(dashboard.url, cluster.auth_headers(TOKEN)))
    assert isinstance(got, RefusedError) and "redirects" in str(got) and elsewhere.url in str(got)
    assert elsewhere.seen == []
    assert dashboard.tokens_seen() == [f"Bearer {TOKEN}"]


@pytest.mark.needs_ray
def test_the_jobs_api_follows_no_redirect_either(dashboard, elsewhere):
    dashboard.routes["/api/v0/nodes"] = (200, {}, support.ray_nodes_answer())
    dashboard.routes["/api/version"] = (302, {"Location": elsewhere.url + "/api/version"}, b"")
    got = _within(30, lambda: jobs_api.client(dashboard.url, cluster.auth_headers(TOKEN)))
    assert isinstance(got, RefusedError) and "redirects" in str(got)
    assert elsewhere.tokens_seen() == []


@pytest.mark.needs_ray
def test_a_silent_jobs_api_is_a_refusal_in_bounded_time(dashboard):
    dashboard.routes["/api/version"] = "silent"
    got = _within(30, lambda: jobs_api.client(dashboard.url, {}, timeout=0.5))
    assert isinstance(got, RefusedError) and "no complete answer within 0.5 s" in str(got)
    assert dashboard.url in str(got)


@pytest.mark.needs_ray
def test_a_job_status_that_never_comes_is_a_refusal_in_bounded_time(dashboard):
    dashboard.routes["/api/version"] = VERSION
    dashboard.routes["/api/jobs/tutorrl-x-1"] = "silent"
    client = jobs_api.client(dashboard.url, {}, timeout=0.5)
    got = _within(30, lambda: client.get_job_status("tutorrl-x-1"))
    assert isinstance(got, RefusedError) and "no complete answer within 0.5 s" in str(got)
    assert "/api/jobs/tutorrl-x-1" in str(got)


@pytest.mark.needs_ray
def test_an_answer_over_the_limit_is_refused_not_read_whole(dashboard, monkeypatch):
    monkeypatch.setattr(jobs_api, "MAX_LOG", 1 << 20)
    dashboard.routes["/api/version"] = VERSION
    dashboard.routes["/api/jobs/tutorrl-x-1/logs"] = ("stream", 3 << 20)
    client = jobs_api.client(dashboard.url, {})
    got = _within(30, lambda: client.get_job_logs("tutorrl-x-1"))
    assert isinstance(got, RefusedError) and "larger than the 1048576-byte limit" in str(got)


@pytest.mark.needs_ray
@pytest.mark.parametrize("route,answer", [
    ("/api/version", (200, {}, b"{}")),
    ("/api/version", (200, {}, b"<html>sign in</html>")),
    ("/api/version", (500, {}, b"Internal Server Error")),
    ("/api/version", (200, {}, b'{"ray_version": 2}')),
    ("/api/jobs/tutorrl-x-1", (200, {}, b"{}")),
    ("/api/jobs/tutorrl-x-1", (200, {}, b'{"status": "EXPLODED"}')),
    ("/api/jobs/tutorrl-x-1", (200, {}, b"[" * 5000 + b"]" * 5000)),
    ("/api/jobs/tutorrl-x-1", (200, {}, b'{"status": "FAILED", "driver_exit_code": ' + b"9" * 5000 + b"}")),
])
def test_an_answer_that_is_not_one_is_a_located_refusal(dashboard, route, answer):
    dashboard.routes["/api/version"] = VERSION
    dashboard.routes[route] = answer

    def ask():
        client = jobs_api.client(dashboard.url, {})
        return client.get_job_info("tutorrl-x-1")

    got = _within(30, ask)
    assert isinstance(got, RefusedError), got
    assert dashboard.url in str(got)


@pytest.mark.needs_ray
def test_a_valid_job_answer_is_read(dashboard):
    dashboard.routes["/api/version"] = VERSION
    dashboard.routes["/api/jobs/tutorrl-x-1"] = (200, {}, json.dumps(
        {"status": "FAILED", "driver_exit_code": 3, "error_type": "JOB_ERROR", "message": "boom", "extra": 1}).encode())
    info = jobs_api.client(dashboard.url, {}).get_job_info("tutorrl-x-1")
    assert (info.status.value, info.driver_exit_code, info.message) == ("FAILED", 3, "boom")


def test_refused_credentials_name_every_place_the_token_is_read_from(dashboard):
    dashboard.routes["/api/v0/nodes"] = (401, {}, b"Unauthorized")
    with pytest.raises(RefusedError) as caught:
        cluster.cluster_resources(dashboard.url, cluster.auth_headers("wrong"))
    text = str(caught.value)
    assert "HTTP 401" in text
    assert all(source in text for source in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "~/.ray/auth_token"))


def test_rays_default_token_file_is_read_last(tmp_path, monkeypatch):
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cluster.token_from_environment() is None
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text("from-the-default-file\n")
    assert cluster.token_from_environment() == "from-the-default-file"
    named = tmp_path / "named"
    named.write_text("from-the-named-file")
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(named))
    assert cluster.token_from_environment() == "from-the-named-file"
    monkeypatch.setenv("RAY_AUTH_TOKEN", "from-the-variable")
    assert cluster.token_from_environment() == "from-the-variable"


@pytest.mark.parametrize("url", ["http://[::1", "http://[::1\x1b[31m]:80", "nonsense"])
def test_an_address_that_is_no_dashboard_url_is_a_refusal_wherever_it_comes_from(url):
    """A run record's address reaches the client without `--address`'s parsing."""
    got = _within(30, lambda: cluster.cluster_resources(url, {}))
    assert isinstance(got, RefusedError), got


def test_a_file_url_is_not_read(tmp_path):
    """urllib reads file:// too: a record naming one would have tutorrl read a local file as the answer."""
    nodes = tmp_path / "api" / "v0" / "nodes?detail=1&limit=10000"
    nodes.parent.mkdir(parents=True)
    nodes.write_bytes(support.ray_nodes_answer(8))
    got = _within(30, lambda: cluster.cluster_resources(tmp_path.as_uri(), {}))
    assert isinstance(got, RefusedError) and "not a dashboard URL" in str(got)


@pytest.mark.needs_ray
def test_a_missed_answer_while_a_job_runs_does_not_end_the_run(dashboard):
    """Each request is bounded now; a run follows its job through a few slow answers."""
    from tutorrl.runtime import submit

    dashboard.routes["/api/version"] = VERSION
    dashboard.routes["/api/jobs/tutorrl-x-1"] = ["silent", "silent", (200, {}, b'{"status": "RUNNING"}'), "silent",
                                                 (200, {}, b'{"status": "SUCCEEDED"}')]
    client = jobs_api.client(dashboard.url, {}, timeout=0.3)
    seen: list[str] = []
    got = _within(60, lambda: submit.wait_terminal(client, "tutorrl-x-1", on_status=seen.append, poll_s=0))
    assert got == "SUCCEEDED" and seen == ["RUNNING", "SUCCEEDED"]


@pytest.mark.needs_ray
def test_a_dashboard_that_stops_answering_is_given_up_on(dashboard):
    from tutorrl.runtime import submit

    dashboard.routes["/api/version"] = VERSION
    dashboard.routes["/api/jobs/tutorrl-x-1"] = "silent"
    client = jobs_api.client(dashboard.url, {}, timeout=0.3)
    got = _within(60, lambda: submit.wait_terminal(client, "tutorrl-x-1", poll_s=0, unanswered_s=1.0))
    assert isinstance(got, RefusedError) and "no answer about tutorrl-x-1 for 1 s" in str(got)
