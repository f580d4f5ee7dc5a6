"""Ray's Jobs API, spoken through tutorrl's bounded HTTP (``cluster.exchange``).

Ray's ``JobSubmissionClient`` sends every request through ``requests`` with no
timeout, reads any body whole into memory, follows redirects, and reads its
answers as ``r.json()["ray_version"]`` or ``JobDetails(**r.json())``: a silent
dashboard holds ``run --address`` and ``status`` for as long as it likes, a
10 GB answer exhausts memory, and ``{}`` is a traceback. Its one funnel,
``_do_request``, is replaced here (so the working_dir upload goes the same
way), and the answers tutorrl reads are decoded into structs checked field by
field. The log tail (a websocket) stays Ray's: it only feeds the display, in
a daemon thread, and completion is decided by the polled status.
"""

from __future__ import annotations

import enum
import json

import msgspec

from tutorrl._read import ReadError, decode_json
from tutorrl.errors import RefusedError
from tutorrl.runtime import cluster

# A job's log is returned whole; Ray itself keeps no more than its own files hold.
MAX_LOG = 64 * 1024 * 1024
# The working_dir upload sends the bundle (a few KB); slow links get longer than one answer.
UPLOAD_TIMEOUT_S = 120.0


class JobStatus(str, enum.Enum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    STOPPED = "STOPPED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"


class JobInfo(msgspec.Struct, forbid_unknown_fields=False):
    status: JobStatus
    driver_exit_code: int | None = None
    error_type: str | None = None
    message: str | None = None


class _Logs(msgspec.Struct, forbid_unknown_fields=False):
    logs: str


class _Stopped(msgspec.Struct, forbid_unknown_fields=False):
    stopped: bool


class _Version(msgspec.Struct, forbid_unknown_fields=False):
    ray_version: str


class _Answer:
    """What Ray's SDK reads of a ``requests.Response``."""

    def __init__(self, status: int, content: bytes):
        self.status_code, self.content = status, content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self):
        return decode_json(self.content, name="answer")


def _decode(url: str, raw: bytes, kind: type):
    try:
        return msgspec.convert(decode_json(raw, name=url), kind)
    except ReadError as exc:
        raise RefusedError(f"{exc}; is --address a Ray dashboard?") from None
    except msgspec.ValidationError as exc:
        raise RefusedError(f"{url}: not an answer of Ray's Jobs API ({exc}); is --address a Ray dashboard?") from None


class _Submitted(msgspec.Struct, forbid_unknown_fields=False):
    submission_id: str


class _Reads:
    """The Jobs API answers tutorrl reads, each one bounded exchange decoded into a checked struct."""

    _address: str
    _headers: dict[str, str]
    _bound_s: float

    def _get(self, endpoint: str, kind: type):
        url = self._address + endpoint
        status, raw = cluster.exchange("GET", url, self._headers, timeout=self._bound_s, limit=MAX_LOG)
        if status != 200:
            # Ray's own wording for a job it does not know; callers treat it as "not there".
            raise RuntimeError(f"Request failed with status code {status}: {raw[:300].decode('utf-8', 'replace')}.")
        return _decode(url, raw, kind)

    def get_job_info(self, job_id: str) -> JobInfo:
        return self._get(f"/api/jobs/{job_id}", JobInfo)

    def get_job_status(self, job_id: str) -> JobStatus:
        return self.get_job_info(job_id).status

    def get_job_logs(self, job_id: str) -> str:
        return self._get(f"/api/jobs/{job_id}/logs", _Logs).logs

    def stop_job(self, job_id: str) -> bool:
        url = f"{self._address}/api/jobs/{job_id}/stop"
        status, raw = cluster.exchange("POST", url, self._headers, body=b"", timeout=self._bound_s)
        if status != 200:
            raise RuntimeError(f"Request failed with status code {status}: {raw[:300].decode('utf-8', 'replace')}.")
        return _decode(url, raw, _Stopped).stopped


def make_client(dashboard_url: str, headers: dict[str, str], *, timeout: float = cluster.TIMEOUT_S):
    """A ``JobSubmissionClient`` for ``dashboard_url`` whose every request is bounded and checked."""
    from ray.job_submission import JobSubmissionClient

    class BoundedJobClient(_Reads, JobSubmissionClient):
        _bound_s = timeout

        def _do_request(self, method, endpoint, *, data=None, json_data=None, **kwargs):
            body, sent = data, dict(self._headers)
            if json_data is not None:
                body = json.dumps(json_data).encode()
                sent["Content-Type"] = "application/json"
            total = UPLOAD_TIMEOUT_S if method == "PUT" else timeout
            return _Answer(*cluster.exchange(method, self._address + endpoint, sent, body=body, timeout=total,
                                             limit=MAX_LOG))

        def _check_connection_and_version_with_url(self, min_version="1.9", version_error_message=None,
                                                   url="/api/version"):
            self._server_ray_version = self._get(url, _Version).ray_version

        def submit_job(self, **kwargs) -> str:
            try:
                return super().submit_job(**kwargs)
            except (RuntimeError, RefusedError):
                raise  # RuntimeError: Ray's refusal, which the caller reads ("already exists")
            except Exception as exc:  # noqa: BLE001 - Ray's reading of an answer that is not one
                raise RefusedError(f"{self._address}/api/jobs/: not an answer of Ray's Jobs API "
                                   f"({type(exc).__name__}: {str(exc)[:200]}); is --address a Ray dashboard?") from None

    return BoundedJobClient(dashboard_url, headers=dict(headers))


# How often HttpJobClient.tail_job_logs asks for the log.
TAIL_POLL_S = 0.5


class HttpJobClient(_Reads):
    """The Jobs API as a dry run on its own embedded head uses it, in tutorrl's bounded HTTP alone.

    Ray's SDK is heavy to import (requests, aiohttp, pydantic, Ray's core: docs/architecture.md,
    "Measured"), on a machine whose cores the head is starting on at that moment. A dry
    run needs none of what the SDK adds: no working_dir or py_modules to upload (the embedded head
    sees this machine's files; they are refused here), and its log -- a few lines of standard
    error -- is followed by asking for the whole log again (``TAIL_POLL_S``) instead of Ray's
    websocket. That is quadratic in the log's length, so a training run keeps Ray's SDK."""

    def __init__(self, dashboard_url: str, headers: dict[str, str], *, timeout: float = cluster.TIMEOUT_S):
        self._address, self._headers, self._bound_s = dashboard_url.rstrip("/"), dict(headers), timeout

    def submit_job(self, *, entrypoint: str, submission_id: str, runtime_env: dict | None = None,
                   metadata: dict | None = None, **entrypoint_options) -> str:
        runtime_env = dict(runtime_env or {})
        local = sorted({"working_dir", "py_modules"} & set(runtime_env))
        if local:
            raise RefusedError(f"the plain HTTP Jobs client uploads nothing ({', '.join(local)} given)")
        # What Ray's SDK posts (JobSubmitRequest, None fields left out).
        body = {"entrypoint": entrypoint, "submission_id": submission_id, "runtime_env": runtime_env,
                "metadata": dict(metadata or {}),
                **{k: v for k, v in entrypoint_options.items() if v is not None}}
        url = f"{self._address}/api/jobs/"
        status, raw = cluster.exchange("POST", url, {**self._headers, "Content-Type": "application/json"},
                                       body=json.dumps(body).encode(), timeout=self._bound_s)
        if status != 200:
            # Ray's SDK's wording (JobSubmissionClient._raise_error), which the caller reads ("already exists").
            raise RuntimeError(f"Request failed with status code {status}: {raw[:2000].decode('utf-8', 'replace')}.")
        return _decode(url, raw, _Submitted).submission_id

    async def tail_job_logs(self, job_id: str):
        """What the log gained since the last answer, until cancelled (the log follower's stop)."""
        import asyncio

        sent = 0
        while True:
            try:
                text = await asyncio.to_thread(self.get_job_logs, job_id)
            except (RuntimeError, RefusedError):
                text = ""  # not there yet, or one missed answer: the follower is for display only
            if len(text) > sent:
                yield text[sent:]
                sent = len(text)
            await asyncio.sleep(TAIL_POLL_S)


def http_client(dashboard_url: str, headers: dict[str, str], *, timeout: float = cluster.TIMEOUT_S) -> HttpJobClient:
    """A :class:`HttpJobClient`; like :func:`client`, refused if the dashboard does not answer as Ray's."""
    jobs = HttpJobClient(dashboard_url, headers, timeout=timeout)
    try:
        jobs._get("/api/version", _Version)
    except RuntimeError as exc:
        raise RefusedError(f"cannot connect to the Ray Jobs API at {dashboard_url}: {str(exc)[:300]}") from None
    return jobs


def client(dashboard_url: str, headers: dict[str, str], *, timeout: float = cluster.TIMEOUT_S):
    """A Jobs API client whose every request is bounded in time and size and never redirected (``jobs_api``)."""
    cluster.drop_hijack_vars()
    try:
        import ray.job_submission  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise RefusedError("tutorrl run needs Ray: pip install 'tutorrl[ray]'") from exc
    try:
        return make_client(dashboard_url, headers, timeout=timeout)
    except (ConnectionError, RuntimeError) as exc:
        raise RefusedError(f"cannot connect to the Ray Jobs API at {dashboard_url}: {str(exc)[:300]}") from None
