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


def default_token_file() -> Path:
    """Ray's own default token file (``ray/_private/authentication``), read when neither variable is set."""
    return Path(os.path.expanduser("~")) / ".ray" / "auth_token"


def token_from_environment() -> str | None:
    """The cluster token, from where Ray itself looks, in Ray's order:
    RAY_AUTH_TOKEN, then the file RAY_AUTH_TOKEN_PATH names, then ~/.ray/auth_token."""
    value = os.environ.get(TOKEN_ENV)
    if value:
        return value.strip()
    path = os.environ.get(TOKEN_PATH_ENV)
    if path:
        return _token_file(Path(path).expanduser(), f"{TOKEN_PATH_ENV}={path}", missing_ok=False)
    return _token_file(default_token_file(), str(default_token_file()), missing_ok=True)


def _token_file(path: Path, label: str, *, missing_ok: bool) -> str | None:
    # Followed if a symlink (mounted secrets usually are), but never a FIFO or a huge file.
    try:
        raw = read_file(path, MAX_TOKEN, name=label, follow=True)
        return raw.decode("utf-8").strip() or None
    except FileNotFoundError:
        if missing_ok:
            return None
        raise RefusedError(f"{label}: cannot read the token (no such file)") from None
    except (ReadError, UnicodeDecodeError) as exc:
        raise RefusedError(f"{label}: cannot read the token: {exc}") from None


TOKEN_SOURCES = f"{TOKEN_ENV}, the file {TOKEN_PATH_ENV} names, or ~/.ray/auth_token (read in that order)"


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


# Seconds for one whole exchange with a dashboard, from the connect to the last byte.
TIMEOUT_S = 10.0


def exchange(method: str, url: str, headers: dict[str, str], *, body: bytes | None = None,
             timeout: float = TIMEOUT_S, limit: int = MAX_ANSWER) -> tuple[int, bytes]:
    """Status and body of one request to a cluster: the one way tutorrl talks to a dashboard.

    Bounded in total time and size whatever the server does; a redirect is
    never followed (the token would go with it); refused credentials and
    anything that is not an HTTP answer are a ``RefusedError`` naming the URL.
    Other HTTP errors are returned, for the caller to judge.
    """
    try:
        scheme = urllib.parse.urlsplit(url).scheme
    except ValueError as exc:
        raise RefusedError(f"{url!r}: not a URL ({exc})") from None
    if scheme not in ("http", "https"):  # urllib would also read file:// and ftp://
        raise RefusedError(f"{url!r}: not a dashboard URL (http:// or https://)")
    try:
        try:
            req = urllib.request.Request(url, data=body, headers=headers, method=method)
            with open_bounded(req, timeout) as resp:
                return resp.status, read_stream(resp, limit, name=url, within=timeout)
        except urllib.error.HTTPError as exc:
            code = exc.code
            if 300 <= code < 400:
                where = str(exc.headers.get("Location", "elsewhere"))[:200]
                raise RefusedError(f"{url}: the dashboard redirects (HTTP {code}) to {where!r}; tutorrl follows "
                                   "no redirect from a cluster, so the token goes nowhere else: give --address "
                                   "the URL it should be") from None
            if code in (401, 403):
                raise RefusedError(f"{url}: the cluster refused our credentials (HTTP {code}); put the cluster's "
                                   f"auth token in {TOKEN_SOURCES}") from None
            try:
                return code, read_stream(exc, limit, name=url, within=timeout)
            finally:
                exc.close()
    except ReadError as exc:
        raise RefusedError(f"{exc}; is --address a Ray dashboard?") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, TimeoutError):  # a socket timeout, or _http's cut of the whole exchange
            raise RefusedError(f"{url}: no complete answer within {timeout:g} s; is --address a Ray dashboard, "
                               "and is it up?") from None
        raise RefusedError(f"cannot reach the Ray dashboard at {url}: {reason}") from None


def _get_json(url: str, headers: dict[str, str], timeout: float = TIMEOUT_S):
    status, raw = exchange("GET", url, headers, timeout=timeout)
    if status != 200:
        raise RefusedError(f"{url}: HTTP {status} {http.client.responses.get(status, '')}".rstrip()
                           + "; is --address a Ray dashboard?")
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
    return node_resources(url, _get_json(url, headers))


def node_resources(url: str, body: object) -> Resources:
    """Sum ``resources_total`` over the ALIVE nodes of a state-API answer (``url``: where it came from)."""
    nodes = _nodes(url, body)
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
