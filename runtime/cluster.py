"""Talking to a Ray cluster's dashboard: the Jobs API client, auth, resources.

Two Ray quirks are handled here once for every caller:

* ``JobSubmissionClient(address)`` silently prefers ``RAY_API_SERVER_ADDRESS``
  and then ``RAY_ADDRESS`` from the environment over its argument (and every
  Ray job has ``RAY_ADDRESS`` set), so both are removed from this process
  before a client is made: the address tutorrl was given is the one it uses.
* The client only attaches a token on its own if ``RAY_AUTH_MODE=token`` was
  set before ``ray`` was first imported; the ``Authorization`` header is
  therefore always passed explicitly.
"""

from __future__ import annotations

import http.client
import ipaddress
import os
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from tutorrl._http import open_bounded
from tutorrl._read import ReadError, decode_json, read_file, read_stream
from tutorrl.errors import RefusedError

HIJACK_VARS = ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")
# Token for an existing cluster, in Ray's own conventions: the value itself,
# or a file holding it.
TOKEN_ENV = "RAY_AUTH_TOKEN"
TOKEN_PATH_ENV = "RAY_AUTH_TOKEN_PATH"
# The nodes API answers a few KB per node; limit=10000 nodes stays far below this.
MAX_ANSWER = 256 * 1024 * 1024
MAX_TOKEN = 64 * 1024


def normalise_address(address: str) -> str:
    """``host:port`` or ``http(s)://host:port`` -> dashboard URL (no trailing slash)."""
    address = address.strip()
    if "://" not in address:
        # Without a scheme Ray treats it as a GCS address and hangs ~40 s on a
        # dashboard port; tutorrl only speaks to dashboards.
        address = "http://" + address
    try:
        parsed = urllib.parse.urlsplit(address)
        parsed.port  # noqa: B018 -- raises for a port that is not a number in range
    except ValueError as exc:  # "[::1" and other hosts urllib cannot take apart
        raise RefusedError(f"--address {address!r}: not a URL ({exc}); expected the dashboard URL, "
                           "e.g. http://head:8265") from None
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise RefusedError(f"--address {address!r}: expected the dashboard URL, e.g. http://head:8265")
    if parsed.username or parsed.password:
        raise RefusedError("--address must not carry credentials; put the token in RAY_AUTH_TOKEN")
    return urllib.parse.urlunsplit((parsed.scheme, parsed.netloc, parsed.path.rstrip("/"), "", ""))


def is_loopback(url: str) -> bool:
    host = urllib.parse.urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def token_from_environment() -> str | None:
    value = os.environ.get(TOKEN_ENV)
    if value:
        return value.strip()
    path = os.environ.get(TOKEN_PATH_ENV)
    if path:
        # Followed if a symlink (mounted secrets usually are), but never a FIFO or a huge file.
        try:
            raw = read_file(Path(path).expanduser(), MAX_TOKEN, name=f"{TOKEN_PATH_ENV}={path}", follow=True)
            return raw.decode("utf-8").strip()
        except FileNotFoundError:
            raise RefusedError(f"{TOKEN_PATH_ENV}={path}: cannot read the token (no such file)") from None
        except (ReadError, UnicodeDecodeError) as exc:
            raise RefusedError(f"{TOKEN_PATH_ENV}={path}: cannot read the token: {exc}") from None
    return None


def auth_headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def drop_hijack_vars() -> dict[str, str]:
    """Remove the address overrides from this process; returns what was there."""
    return {name: os.environ.pop(name) for name in HIJACK_VARS if name in os.environ}


@dataclass
class Resources:
    alive_nodes: int = 0
    total: dict[str, float] = field(default_factory=dict)
    per_node: list[dict[str, float]] = field(default_factory=list)

    @property
    def gpus(self) -> float:
        return self.total.get("GPU", 0.0)


def _get_json(url: str, headers: dict[str, str], timeout: float = 10.0):
    req = urllib.request.Request(url, headers=headers)
    try:
        with open_bounded(req, timeout) as resp:
            raw = read_stream(resp, MAX_ANSWER, name=url, within=timeout)
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            raise RefusedError(
                f"{url}: the cluster refused our credentials (HTTP {exc.code}); "
                f"set {TOKEN_ENV} (or {TOKEN_PATH_ENV}) to the cluster's auth token"
            ) from None
        raise RefusedError(f"{url}: HTTP {exc.code} {exc.reason}") from None
    except ReadError as exc:
        raise RefusedError(f"{exc}; is --address a Ray dashboard?") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise RefusedError(f"cannot reach the Ray dashboard at {url}: {reason}") from None
    try:
        return decode_json(raw, name=url)
    except ReadError as exc:
        raise RefusedError(f"{exc}; is --address a Ray dashboard?") from None


def _nodes(url: str, body: object) -> list:
    """The node list of a state-API answer: {"result": true, "data": {"result": {"result": [...]}}}."""
    if isinstance(body, dict) and body.get("result", True) is not False:
        data = body.get("data")
        inner = data.get("result") if isinstance(data, dict) else None
        nodes = inner.get("result") if isinstance(inner, dict) else None
        if isinstance(nodes, list) and all(isinstance(n, dict) for n in nodes):
            return nodes
    raise RefusedError(f"{url}: not an answer of Ray's nodes API (is --address a Ray dashboard?): {str(body)[:200]}")


def _amount(url: str, name: object, value: object) -> float:
    # bool is an int in Python; NaN and infinities cannot come from JSON (decode refuses them).
    if not isinstance(name, str) or type(value) not in (int, float) or value < 0:
        raise RefusedError(f"{url}: resource {str(name)[:80]!r} = {str(value)[:80]}: not a non-negative number"
                           " (is --address a Ray dashboard?)")
    return float(value)


def cluster_resources(dashboard_url: str, headers: dict[str, str]) -> Resources:
    """Sum ``resources_total`` over ALIVE nodes (the state API, as the dashboard serves it)."""
    url = f"{dashboard_url}/api/v0/nodes?detail=1&limit=10000"
    nodes = _nodes(url, _get_json(url, headers))
    res = Resources()
    for node in nodes:
        if node.get("state") != "ALIVE":
            continue
        totals = node.get("resources_total") or {}
        if not isinstance(totals, dict):
            raise RefusedError(f"{url}: a node's resources_total is not an object (is --address a Ray dashboard?)")
        res.alive_nodes += 1
        node_total = {k: _amount(url, k, v) for k, v in totals.items()}
        res.per_node.append(node_total)
        for k, v in node_total.items():
            res.total[k] = res.total.get(k, 0.0) + v
    return res


def job_client(dashboard_url: str, headers: dict[str, str]):
    drop_hijack_vars()
    try:
        from ray.job_submission import JobSubmissionClient
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise RefusedError("tutorrl run needs Ray: pip install 'tutorrl[ray]'") from exc
    try:
        return JobSubmissionClient(dashboard_url, headers=dict(headers))
    except (ConnectionError, RuntimeError) as exc:
        raise RefusedError(f"cannot connect to the Ray Jobs API at {dashboard_url}: {exc}") from None
