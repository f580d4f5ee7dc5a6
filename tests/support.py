"""Test helpers shared by several test folders (real bash, real Hydra, real verl config)."""

from __future__ import annotations

import copy
import functools
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SPECS = REPO / "specs"
BUNDLES = REPO / "bundles"


def example_specs() -> list[Path]:
    return sorted(SPECS.glob("*.toml"))


# -- the one spec builder ---------------------------------------------------------------------------------------

# The smallest spec that describes a whole training run: every section a launch needs, verl's defaults elsewhere.
MINIMAL_SPEC = {
    "experiment": {"name": "t", "verl": "0.9.1"},
    "data": {"train": "train.parquet", "val": "val.parquet", "train_batch_size": 16},
    "model": {"path": "m"},
    "actor": {"ppo_mini_batch_size": 8, "ppo_micro_batch_size_per_gpu": 2},
    "rollout": {"engine": "sglang", "n": 2},
    # Console only: verl's default loggers include wandb, which the compiler warns about without an account.
    "trainer": {"total_steps": 10, "loggers": ["console"]},
    "resources": {"trainer_gpus_per_node": 2},
    "reward": {"module": "rewards.mine"},
}


class _Drop:
    def __repr__(self) -> str:
        return "DROP"


# A value that removes its key (or whole table) from the spec being built.
DROP = _Drop()


class Whole(dict):
    """A table that replaces the one below it instead of being merged into it."""


def _merged(into: dict, layer: dict) -> dict:
    out = dict(into)
    for key, value in layer.items():
        if value is DROP:
            out.pop(key, None)
        elif isinstance(value, dict) and not isinstance(value, Whole) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        else:
            out[key] = copy.deepcopy(dict(value) if isinstance(value, Whole) else value)
    return out


def spec_doc(base: dict | None = None, /, **tables) -> dict:
    """A spec as plain data: ``tables`` merged key by key into ``base`` (MINIMAL_SPEC if none).

    A table given as a dict is merged into the one below it (nested tables too), so
    ``spec_doc(actor={"strategy": "megatron"})`` keeps the minimal actor's batch sizes; a list or
    scalar replaces, and so does a table given as ``Whole({...})``; ``DROP`` removes a key or a
    table. ``base`` is a whole spec, typically an earlier spec_doc (a shared shape such as the
    chess tutor's), so a variant names only what it changes; the base itself is never modified.

    Tests build whole specs with this (the per-folder shapes, review_helpers.BASE and
    compiler_helpers.CHESS / FSDP_CUSTOM, are spec_doc calls). Literal TOML stays where the text
    is the point: error positions and located problems (tests/compiler/spec/test_spec_errors.py,
    test_toml_positions.py, test_rewards.py's "spec.toml:9:1", test_compose.py's "set in
    a.toml:6"), specs written to be refused (a
    builder that starts from a valid spec would hide the one broken line), the partial children
    of ``extends`` and ``[sweep]`` (they must say only what they change), spec families on disk
    (tests/review/test_*_family.py), and golden inputs (tests/importer/golden/).
    """
    return _merged(copy.deepcopy(MINIMAL_SPEC if base is None else base), tables)


def example_spec(name: str) -> dict:
    """The committed example ``specs/<name>`` as plain data, a base for spec_doc."""
    import tomllib

    return tomllib.loads((SPECS / name).read_text(encoding="utf-8"))


def nested(dotted: dict, sep: str = ".") -> dict:
    """``{"data.train": v}`` as the tables spec_doc takes (``{"data": {"train": v}}``).

    Each path names what it sets: a table given as its value replaces the table there (``Whole``)."""
    out: dict = {}
    for path, value in dotted.items():
        *parents, leaf = path.split(sep)
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = Whole(value) if isinstance(value, dict) else value
    return out


def spec_toml(base: dict | None = None, /, **tables) -> str:
    """spec_doc's spec as TOML text (tomli_w's spelling)."""
    import tomli_w

    return tomli_w.dumps(spec_doc(base, **tables))


_STANDIN = '''#!{python}
"""Stand-in for `python`: answers launch.sh's verl version check and import
checks, runs the programs launch.sh computes values with (roots) under the
real Python, and records the argv of verl's launch."""
import json, os, sys
if len(sys.argv) > 2 and sys.argv[1] == "-c":
    if sys.argv[2].startswith("import json, math, os, re, sys"):  # the roots program (compiler/pipeline/roots.py)
        os.execv({python!r}, [{python!r}, *sys.argv[1:]])
    print(os.environ.get("STANDIN_VERL", "0.9.1"))
    raise SystemExit(0)
with open(os.environ["STANDIN_ARGV_FILE"], "w", encoding="utf-8") as f:
    json.dump({{"argv": sys.argv[1:], "env": dict(os.environ)}}, f)
'''


class StandinPython:
    """Runs a bundle's launch.sh with real bash and a `python` that records what it got."""

    def __init__(self, folder: Path):
        self.folder = folder
        script = folder / "python"
        script.write_text(_STANDIN.format(python=sys.executable))
        script.chmod(0o755)
        self.record = folder / "argv.json"

    def run(self, bundle: Path, *args: str, env: dict | None = None, verl: str = "0.9.1",
            cwd: Path | None = None) -> subprocess.CompletedProcess:
        if self.record.exists():
            self.record.unlink()
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("TUTORRL_")}
        full_env.update(env or {})
        full_env["PATH"] = f"{self.folder}{os.pathsep}{full_env.get('PATH', '')}"
        full_env["STANDIN_ARGV_FILE"] = str(self.record)
        full_env["STANDIN_VERL"] = verl
        return subprocess.run(["bash", str(bundle / "launch.sh"), *args], env=full_env, cwd=cwd or self.folder,
                              capture_output=True, text=True, timeout=60)

    def argv(self, bundle: Path, *args: str, **kwargs) -> list[str]:
        result = self.run(bundle, *args, **kwargs)
        assert result.returncode == 0, result.stderr
        return json.loads(self.record.read_text())["argv"]

    def seen_env(self) -> dict:
        return json.loads(self.record.read_text())["env"]


@functools.cache
def verl_config_dir() -> str:
    """The installed verl's Hydra config folder (found without importing verl: it is slow)."""
    spec = importlib.util.find_spec("verl")
    assert spec is not None and spec.submodule_search_locations, "verl is not installed"
    return str(Path(spec.submodule_search_locations[0]) / "trainer" / "config")


def compose_verl(config_name: str, overrides: list[str], config_dir: str | None = None):
    """verl's trainer config (an OmegaConf DictConfig) composed by Hydra with ``overrides``."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=config_dir or verl_config_dir(), version_base=None):
        return compose(config_name=config_name, overrides=overrides)


def lookup(config, dotted: str):
    """The value verl reads at ``dotted``: interpolations resolved, as plain data."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    value = OmegaConf.select(config, dotted, throw_on_missing=True)
    if isinstance(value, (DictConfig, ListConfig)):
        return OmegaConf.to_container(value, resolve=True)
    return value


def parse_override(text: str):
    """Hydra's own reading of one override: (type name, key, value)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    (override,) = OverridesParser.create().parse_overrides([text])
    return override.type.name, override.key_or_group, override.value()


def unescape_interpolation(value):
    """What OmegaConf makes of an escaped ``\\${`` once the config is read."""
    if isinstance(value, str):
        import re

        return re.sub(r"(\\*)\\\$\{", lambda m: m.group(1)[: len(m.group(1)) // 2] + "${", value)
    if isinstance(value, list):
        return [unescape_interpolation(v) for v in value]
    if isinstance(value, dict):
        return {k: unescape_interpolation(v) for k, v in value.items()}
    return value


def cli(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """The real `tutorrl` console entry point in a subprocess."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "tutorrl", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


class CannedServer:
    """A real HTTP server on 127.0.0.1 that answers every request with ``status`` and ``body``.

    Readers of answers tutorrl does not control (a Ray dashboard, an engine)
    are fuzzed against it: set ``status``/``body``, then let the real client ask.
    """

    def __init__(self):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        canned = self
        self.status, self.body = 200, b"{}"
        # Seconds between single bytes of an answer that never ends (a
        # server holding a reader within every socket timeout); None: answer at once.
        self.trickle: float | None = None
        # An answer whose head never ends: "continue" sends `100 Continue` without
        # end, "headers" a status line and then one header byte every 50 ms.
        self.stall: str | None = None

        class Handler(BaseHTTPRequestHandler):
            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                if canned.stall is not None:
                    import time

                    head = b"HTTP/1.1 200 OK\r\n" if canned.stall == "headers" else b""
                    piece = b"X" if canned.stall == "headers" else b"HTTP/1.1 100 Continue\r\n\r\n"
                    try:
                        self.wfile.write(head)
                        while True:
                            self.wfile.write(piece)
                            self.wfile.flush()
                            time.sleep(0.05)
                    except OSError:  # the reader gave up
                        return
                self.send_response(canned.status)
                trickle = canned.trickle  # read once: a test may reset it while this thread still answers
                if trickle is not None:
                    import time

                    self.send_header("Content-Length", str(1 << 30))
                    self.end_headers()
                    try:
                        while canned.trickle is not None:
                            self.wfile.write(b" ")
                            self.wfile.flush()
                            time.sleep(trickle)
                    except OSError:  # the reader gave up
                        pass
                    return
                self.send_header("Content-Length", str(len(canned.body)))
                self.end_headers()
                self.wfile.write(canned.body)

            do_GET = do_POST = _answer

            def log_message(self, *args):
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    def answer(self, status: int, body: bytes) -> None:
        self.status, self.body = status, body

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def as_launched(spec, value):
    """An override's value as verl receives it from launch.sh run with no root set:
    each ``$ROOT/...`` of a root the spec declares with the root's default put
    in (what launch.sh does); a ``$NAME`` the spec does not declare is text."""
    from tutorrl.compiler.pipeline import roots

    env = {name: root.default for name, root in spec.roots.items() if root.default}

    def one(v):
        ref = roots.reference(v) if isinstance(v, str) else None
        return roots.expand(v, env) if ref is not None and ref[0] in spec.roots else v

    return [one(v) for v in value] if isinstance(value, list) else one(value)


class HostileServer:
    """A real HTTP server on 127.0.0.1 that answers by path, as a hostile dashboard might.

    ``routes[path]`` (the path without its query) is ``(status, headers, body)``;
    ``"silent"`` never answers (until the server closes), ``("stream", n)``
    sends a 200 of ``n`` bytes in pieces; a list gives its answers in turn. Every request is kept in ``seen`` as
    ``(method, path, headers)``, so a test can tell whether a token reached it.
    """

    def __init__(self):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        hostile = self
        self.routes: dict[str, object] = {}
        self.seen: list[tuple[str, str, dict[str, str]]] = []
        self.bodies: list[bytes] = []  # the body of each request in ``seen``
        self._closing = threading.Event()

        class Handler(BaseHTTPRequestHandler):
            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                path = self.path.split("?", 1)[0]
                hostile.seen.append((self.command, path, dict(self.headers)))
                hostile.bodies.append(body)
                route = hostile.routes.get(path, (404, {}, b'{"detail": "not found"}'))
                if isinstance(route, list):  # answers in turn, the last one for good
                    route = route.pop(0) if len(route) > 1 else route[0]
                try:
                    if route == "silent":
                        hostile._closing.wait()
                        return
                    if isinstance(route, tuple) and route[0] == "stream":
                        self.send_response(200)
                        self.send_header("Content-Length", str(route[1]))
                        self.end_headers()
                        piece, left = b"0" * 65536, route[1]
                        while left > 0:
                            self.wfile.write(piece[:left])
                            left -= len(piece)
                        return
                    status, headers, body = route
                    self.send_response(status)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:  # the client gave up
                    return

            do_GET = do_POST = do_PUT = _answer

            def log_message(self, *args):
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    def tokens_seen(self) -> list[str]:
        return [h["Authorization"] for _, _, h in self.seen if "Authorization" in h]

    def close(self) -> None:
        self._closing.set()
        self._httpd.shutdown()
        self._httpd.server_close()


def ray_nodes_answer(gpus: float = 0.0) -> bytes:
    """What a Ray dashboard's nodes API answers for one ALIVE node."""
    return json.dumps({"result": True, "data": {"result": {"result": [
        {"state": "ALIVE", "resources_total": {"CPU": 4.0, "GPU": gpus}}]}}}).encode()


def free_ports(n: int) -> list[int]:
    """``n`` distinct free TCP ports on loopback (every socket held until all are chosen)."""
    import socket

    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def end_procs(procs, *, grace: float) -> None:
    """End daemons a test started, the last started first: SIGTERM, up to ``grace``
    seconds to exit, then SIGKILL to the process group (each was started in its own
    session), and reap it. What left the group is the caller's to find."""
    import signal

    for proc in reversed(procs):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            pass


def procs_with_env(name: str, value: str) -> list[int]:
    """PIDs (other than this one) whose environment holds name=value: how a test finds, to end
    by id, every process a daemon it started left behind (Ray's workers, Slurm's job steps)."""
    needle = f"{name}={value}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if needle in fh.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def _tails(logs) -> str:
    out = []
    for path in logs:
        path = Path(path)
        text = path.read_text(errors="replace")[-3000:] if path.is_file() else "(not written)"
        out.append(f"== {path.name}\n{text}")
    return "\n".join(out)


def wait_until(ready, timeout: float, what: str, *, procs=(), logs=(), interval: float = 0.2):
    """Polls ``ready()`` until it returns something true (returned) or ``timeout`` seconds pass.

    ``procs`` are the daemons the wait depends on: when one has exited, waiting longer cannot
    help, so the wait fails at once. Either failure names ``what`` and shows the tail of each of
    ``logs`` (a callable returning the paths may stand for the list: files a daemon writes later)."""
    import time

    def failure(why: str) -> AssertionError:
        return AssertionError(f"{why} waiting for {what}\n{_tails(logs() if callable(logs) else logs)}")

    deadline = time.monotonic() + timeout
    while True:
        value = ready()
        if value:
            return value
        for proc in procs:
            if proc.poll() is not None:
                raise failure(f"{proc.args[0] if isinstance(proc.args, list) else proc.args} "
                              f"exited {proc.returncode}")
        if time.monotonic() > deadline:
            raise failure(f"timed out after {timeout}s")
        time.sleep(interval)


def wait_ray_ready(url: str, token: str | None, *, nodes: int = 1, procs=(), logs=(), timeout: float = 120,
                   what: str | None = None):
    """Waits until the Ray dashboard at ``url`` answers its nodes API (with ``token``, where the
    cluster has token auth) with at least ``nodes`` ALIVE nodes; returns tutorrl's reading of the
    cluster's resources. Fails at once, with the logs' tails, when one of ``procs`` (``ray start``
    processes) has died, and at the deadline."""
    from tutorrl.runtime import cluster

    headers = cluster.auth_headers(token) if token else {}

    def ready():
        try:
            got = cluster.cluster_resources(url, headers)
        except Exception:  # not up yet: refused, 5xx, a dashboard still starting its modules
            return None
        return got if got.alive_nodes >= nodes else None

    return wait_until(ready, timeout, what or f"{nodes} ALIVE Ray node(s) at {url}", procs=procs, logs=logs)


class RayNodes:
    """A Ray cluster of real nodes on this machine, as a cluster tutorrl did not start would be: a
    head (``ray start --head``) and worker nodes joining it (``ray start --address``), each with its
    own temp folder and ports, on loopback only, token auth, a loopback dashboard. Node ``i`` has
    the address 127.0.0.``i + 2``: `ray start` replaces 127.0.0.1 (and localhost, ::1) by the
    machine's routable address (``resolve_ip_for_localhost``), and every process then dials that;
    any other loopback address it keeps, so nothing here leaves the loopback interface.

    ``ray`` is the ``ray`` command of the environment the nodes run (their workers run its
    Python); ``env`` is added to each node's environment (what a cluster's image sets). Every
    process carries ``marker`` in its environment, and ``stop`` ends each by id."""

    def __init__(self, ray: str, marker: str, env: dict[str, str] | None = None):
        import secrets
        import tempfile

        self.ray, self.marker = ray, marker
        self.root = Path(tempfile.mkdtemp(prefix="trn-", dir="/tmp"))  # short: Ray's AF_UNIX paths live below it
        self.token = secrets.token_hex(16)
        (self.root / "token").write_text(self.token)
        self.gcs, dash, self._client, self._agent, m1, m2, self._mexp = free_ports(7)
        self.url = f"http://127.0.0.1:{dash}"
        keep = {k: v for k, v in os.environ.items()
                if not k.startswith(("RAY_", "TUTORRL_")) and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        self.env = {**keep, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token",
                    "RAY_AUTH_TOKEN_PATH": str(self.root / "token"), "TMPDIR": str(self.root),
                    "AUTOSCALER_METRIC_PORT": str(m1), "DASHBOARD_METRIC_PORT": str(m2),
                    "PATH": str(Path(ray).parent) + os.pathsep + os.environ.get("PATH", ""),
                    marker: str(self.root), **(env or {})}
        self.procs: list[subprocess.Popen] = []
        self.logs: list[Path] = []

    @staticmethod
    def address(index: int) -> str:
        """The address of node ``index`` (0: the head)."""
        return f"127.0.0.{index + 2}"

    def _start(self, name: str, argv: list[str]) -> None:
        (self.root / name).mkdir()
        log = self.root / f"{name}.log"
        self.logs.append(log)
        self.procs.append(subprocess.Popen(
            [self.ray, "start", "--block", f"--node-ip-address={self.address(len(self.procs))}",
             "--disable-usage-stats",
             f"--temp-dir={self.root / name}", *argv], env=self.env, cwd=self.root, stdin=subprocess.DEVNULL,
            stdout=open(log, "wb"), stderr=subprocess.STDOUT, start_new_session=True))
        wait_ray_ready(self.url, self.token, nodes=len(self.procs), procs=self.procs, logs=self.logs,
                       what=f"Ray node {name} ({len(self.procs)} ALIVE)")

    def start_head(self, *options: str) -> "RayNodes":
        self._start("head", ["--head", f"--port={self.gcs}", "--dashboard-host=127.0.0.1",
                             f"--dashboard-port={self.url.rsplit(':', 1)[1]}",
                             f"--dashboard-agent-listen-port={self._agent}",
                             f"--ray-client-server-port={self._client}", f"--metrics-export-port={self._mexp}",
                             "--include-dashboard=true", *options])
        return self

    def add_worker(self, *options: str) -> "RayNodes":
        agent, mexp = free_ports(2)
        self._start(f"worker{len(self.procs)}", [f"--address={self.address(0)}:{self.gcs}",
                                                 f"--dashboard-agent-listen-port={agent}",
                                                 f"--metrics-export-port={mexp}", *options])
        return self

    def state(self, kind: str) -> list[dict]:
        """Ray's state API (``nodes``, ``actors``, ...), every entry, in detail."""
        import urllib.request

        from tutorrl.runtime import cluster

        req = urllib.request.Request(f"{self.url}/api/v0/{kind}?detail=1&limit=10000",
                                     headers=cluster.auth_headers(self.token))
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.load(resp)["data"]["result"]["result"]

    def stop(self) -> None:
        import shutil
        import signal

        end_procs(self.procs, grace=15)
        for pid in procs_with_env(self.marker, str(self.root)):  # what left the process groups (Ray's workers)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.root, ignore_errors=True)


def renamed_wheel(wheel: Path, new_version: str, dest: Path) -> Path:
    """A copy of a release wheel that says it is ``new_version``: its dist-info folder renamed, METADATA's
    Version rewritten and RECORD's paths (and METADATA's hash) to match -- a release whose code and config are
    the old one's, as the day-0 path sees a verl release that changed nothing. pip installs it as that version."""
    import base64
    import hashlib
    import re
    import zipfile

    name, old_version = wheel.name.split("-")[:2]
    old_info, new_info = f"{name}-{old_version}.dist-info/", f"{name}-{new_version}.dist-info/"
    out = dest / wheel.name.replace(f"-{old_version}-", f"-{new_version}-", 1)
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        members = {m.filename: src.read(m.filename) for m in src.infolist()}
        metadata = re.sub(rb"(?m)^Version: .*$", f"Version: {new_version}".encode(), members[old_info + "METADATA"], count=1)
        members[old_info + "METADATA"] = metadata
        digest = base64.urlsafe_b64encode(hashlib.sha256(metadata).digest()).rstrip(b"=").decode()
        record = []
        for line in members[old_info + "RECORD"].decode().splitlines():
            path = line.split(",", 1)[0].replace(old_info, new_info, 1)
            if path == new_info + "METADATA":
                line = f"{path},sha256={digest},{len(metadata)}"
            else:
                line = path + line[len(line.split(",", 1)[0]):]
            record.append(line)
        members[old_info + "RECORD"] = ("\n".join(record) + "\n").encode()
        for member, data in members.items():
            dst.writestr(member.replace(old_info, new_info, 1) if member.startswith(old_info) else member, data)
    return out
