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


def make_client(dashboard_url: str, headers: dict[str, str], *, timeout: float = cluster.TIMEOUT_S):
    """A ``JobSubmissionClient`` for ``dashboard_url`` whose every request is bounded and checked."""
    from ray.job_submission import JobSubmissionClient

    class BoundedJobClient(JobSubmissionClient):
        def _do_request(self, method, endpoint, *, data=None, json_data=None, **kwargs):
            body, sent = data, dict(self._headers)
            if json_data is not None:
                body = json.dumps(json_data).encode()
                sent["Content-Type"] = "application/json"
            total = UPLOAD_TIMEOUT_S if method == "PUT" else timeout
            return _Answer(*cluster.exchange(method, self._address + endpoint, sent, body=body, timeout=total,
                                             limit=MAX_LOG))

        def _get(self, endpoint: str, kind: type):
            url = self._address + endpoint
            status, raw = cluster.exchange("GET", url, self._headers, timeout=timeout, limit=MAX_LOG)
            if status != 200:
                # Ray's own wording for a job it does not know; callers treat it as "not there".
                raise RuntimeError(f"Request failed with status code {status}: {raw[:300].decode('utf-8', 'replace')}.")
            return _decode(url, raw, kind)

        def _check_connection_and_version_with_url(self, min_version="1.9", version_error_message=None,
                                                   url="/api/version"):
            self._server_ray_version = self._get(url, _Version).ray_version

        def get_job_info(self, job_id: str) -> JobInfo:
            return self._get(f"/api/jobs/{job_id}", JobInfo)

        def get_job_status(self, job_id: str) -> JobStatus:
            return self.get_job_info(job_id).status

        def get_job_logs(self, job_id: str) -> str:
            return self._get(f"/api/jobs/{job_id}/logs", _Logs).logs

        def stop_job(self, job_id: str) -> bool:
            url = f"{self._address}/api/jobs/{job_id}/stop"
            status, raw = cluster.exchange("POST", url, self._headers, body=b"", timeout=timeout)
            if status != 200:
                raise RuntimeError(f"Request failed with status code {status}: {raw[:300].decode('utf-8', 'replace')}.")
            return _decode(url, raw, _Stopped).stopped

        def submit_job(self, **kwargs) -> str:
            try:
                return super().submit_job(**kwargs)
            except (RuntimeError, RefusedError):
                raise  # RuntimeError: Ray's refusal, which the caller reads ("already exists")
            except Exception as exc:  # noqa: BLE001 - Ray's reading of an answer that is not one
                raise RefusedError(f"{self._address}/api/jobs/: not an answer of Ray's Jobs API "
                                   f"({type(exc).__name__}: {str(exc)[:200]}); is --address a Ray dashboard?") from None

    return BoundedJobClient(dashboard_url, headers=dict(headers))


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
