"""The embedded single-machine Ray head: started for one run, stopped after it.

Recipe measured on Ray 2.60 (see docs): ``ray start --head --block`` as a child
in its own session, every port chosen free (Ray's fixed defaults collide
between two heads), a short private temp dir (Ray appends ~62 characters to it
and AF_UNIX paths stop at 107 bytes), token auth with a per-run token file, and
loopback only (the node at 127.0.0.1, the dashboard too). It is stopped by
process group -- never ``ray stop``, which is machine-wide -- and
PR_SET_PDEATHSIG takes it down if tutorrl itself is killed without a chance
to clean up.
"""

from __future__ import annotations

import ctypes
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from tutorrl.contract import RUN_ID_ENV
from tutorrl.errors import RefusedError
from tutorrl.runtime.lean_ray import LEAN_AGENT_MODULES, LEAN_MODULES

# Ray appends about 62 characters (session_<date>/sockets/plasma_store) to the
# temp dir; keep the whole under the 107-byte AF_UNIX limit with margin.
_MAX_RUN_DIR = 40
_PR_SET_PDEATHSIG = 1
# Backstop for a job whose resources never appear (Ray's default is 900 s).
JOB_START_TIMEOUT_S = 120
# The GPU count the embedded head declares when `tutorrl run --num-gpus` is not
# given (tests of scheduling paths on machines without GPUs); else detected.
from tutorrl.contract import EMBEDDED_NUM_GPUS_ENV as NUM_GPUS_ENV  # noqa: E402
# Environment a client in the user's shell could use to redirect us elsewhere.
HIJACK_VARS = ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")


def detect_gpus() -> int:
    """The GPUs this machine offers: CUDA_VISIBLE_DEVICES if set, else nvidia-smi."""
    override = os.environ.get(NUM_GPUS_ENV)
    if override is not None:
        try:
            value = int(override)
        except ValueError:
            raise RefusedError(f"{NUM_GPUS_ENV}={override!r} is not a whole number") from None
        if value < 0:
            raise RefusedError(f"{NUM_GPUS_ENV}={override!r} is negative")
        return value
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        entries = [e for e in visible.split(",") if e.strip()]
        if not entries or entries[0].strip().startswith("-"):
            return 0
        return len(entries)
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    if out.returncode != 0:
        return 0
    return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))


# CPUs verl reserves in Ray beside its GPU workers: the job's entrypoint (the
# bundle asks 1), the TaskRunner (`@ray.remote(num_cpus=1)` in main_ppo),
# TransferQueue's controller and storage units in a 0.9.x v1 run (1 CPU each,
# transfer_queue/controller.py and storage/simple_storage.py; 8 units by
# default, transfer_queue.backend.SimpleStorage.num_data_storage_units), and
# per GPU bundle of the worker pool its max_colocate_count in CPUs (1 in 0.5.0's
# ResourcePoolManager, 3 in 0.9.1's, verl/single_controller/ray/base.py).
_FIXED_CPUS = 2 + 1 + 8
_CPUS_PER_GPU = 3


def embedded_cpus(num_gpus: int) -> int:
    """The CPUs the embedded head declares: the machine's, or -- on a small
    machine -- what verl reserves for this many GPUs. Ray's CPU count is a
    scheduling token, not a core: declaring more makes processes share cores,
    declaring fewer leaves verl's worker pool PENDING for ever (a 2-core
    machine cannot place the entrypoint, the TaskRunner and one worker; a
    verl 0.9.1 run there waited on TransferQueue's storage units)."""
    return max(os.cpu_count() or 1, _FIXED_CPUS + _CPUS_PER_GPU * max(num_gpus, 1))


def free_ports(n: int) -> list[int]:
    # Hold every socket until all are chosen, so the n ports are distinct.
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _run_dir_base() -> str:
    base = tempfile.gettempdir()
    return "/tmp" if len(base) + len("/trl-xxxxxxxx") > _MAX_RUN_DIR else base


# Who made a head's folder: "<pid> <start time>" of the tutorrl process that owns
# the head (PR_SET_PDEATHSIG ties the head to it), so a later tutorrl can tell
# a folder left by a killed owner (kill -9, power loss) from one in use.
_OWNER_FILE = "owner"


def _process_start(pid: int) -> str | None:
    from tutorrl.runtime.records import process_start_time

    start = process_start_time(pid)
    return None if start is None else str(start)


def sweep_orphans(base: str | None = None) -> list[Path]:
    """Remove head folders whose owner is gone; returns what was removed.

    Ray's logs there can hold what a job printed (secret values included), so
    they must not outlive the run. A folder with no owner file (being made
    right now, or made by an older tutorrl) is left alone.
    """
    removed = []
    for path in Path(base or _run_dir_base()).glob("trl-*"):
        try:
            if path.is_symlink() or not path.is_dir() or path.stat().st_uid != os.getuid():
                continue
            with open(path / _OWNER_FILE, "rb") as fh:
                pid, start = fh.read(64).decode("ascii").split()
            alive = _process_start(int(pid)) == start
        except (OSError, ValueError, UnicodeDecodeError):
            continue
        if not alive:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def own_head_folder(path: str | None) -> Path | None:
    """``path`` if it is an embedded head's folder of this user: a ``trl-*`` folder right under the
    temp base heads are made in, owned by this uid, not a symlink. Nothing else is ever removed,
    or read a token from, whatever a record or a variable names."""
    import stat

    if not path or not os.path.isabs(path):
        return None
    folder = Path(os.path.normpath(path))
    if not folder.name.startswith("trl-") or os.path.realpath(folder.parent) != os.path.realpath(_run_dir_base()):
        return None
    try:
        st = os.lstat(folder)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        return None
    return folder


def _short_run_dir() -> Path:
    base = _run_dir_base()
    path = Path(tempfile.mkdtemp(prefix="trl-", dir=base))
    if len(str(path)) > _MAX_RUN_DIR:
        shutil.rmtree(path, ignore_errors=True)
        raise RefusedError(
            f"no short temporary directory available for the embedded Ray head "
            f"(Ray's socket paths need a base of at most {_MAX_RUN_DIR} characters; got {path})"
        )
    return path


def _ray_executable(python: str | None = None) -> str:
    """The ``ray`` beside the job's Python, so the raylet -- and every worker it
    starts for verl, which runs the raylet's interpreter -- runs that Python.
    A head from tutorrl's own environment would run verl's workers with
    whatever verl that environment has, not the one launch.sh checked."""
    from tutorrl.runtime.preflight import same_environment

    if python is not None and not same_environment(python):
        candidate = Path(python).parent / "ray"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
        raise RefusedError(
            f"the job's Python ({python}, TUTORRL_PYTHON) has no `ray` beside it: the embedded head runs from "
            f"the job's environment so that verl's Ray workers run its Python too; install Ray there "
            f"({python} -m pip install 'ray[default]==2.60.0')")
    candidate = Path(sys.executable).parent / "ray"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    found = shutil.which("ray")
    if found is None:
        raise RefusedError("the `ray` command is not installed (pip install 'tutorrl[ray]')")
    return found


# A dry run's head is `ray start` run by the program runtime/lean_ray.py, which
# narrows it through Ray's own process launcher to what the Jobs API needs (its
# docstring says what it leaves out and why; docs/architecture.md, "Measured",
# what that saves). It is copied into the head's folder and started by that
# path: the raylet starts the agent and its workers from command lines that
# name it, and it writes its `started` file and the zygotes' sockets beside it.
_LEAN_FILE = "lean_ray.py"
_LEAN_SOURCE = Path(__file__).with_name(_LEAN_FILE)
_PLAIN_PATH = re.compile(r"[A-Za-z0-9_./+-]+")


def _module_spec(modules: dict[str, str]) -> str:
    return ",".join(f"{module}:{name}" for name, module in modules.items())


def _script_python(script: str) -> str | None:
    """The interpreter a console script (``ray``) runs with: its ``#!`` line."""
    try:
        with open(script, "rb") as fh:
            first = fh.readline(4096).decode("utf-8", "replace").strip()
    except OSError:
        return None
    if not first.startswith("#!") or " " in first[2:].strip():
        return None
    python = first[2:].strip()
    return python if os.path.isfile(python) and os.access(python, os.X_OK) else None


def _child_setup(parent_pid: int):
    def setup() -> None:
        os.setsid()
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        # The parent may have died between fork and prctl: then nobody would signal us.
        if os.getppid() != parent_pid:
            os._exit(1)

    return setup


def _carrying(run_id: str) -> list[int]:
    """This user's processes whose environment names this head's run (environment() sets it)."""
    needle, uid, found = f"{RUN_ID_ENV}={run_id}".encode(), os.getuid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid != uid:
                continue
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if needle in fh.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def _end_stragglers(run_id: str, wait_s: float = 3.0) -> None:
    """Wait for what the head started outside its process group, then end what is left.

    Ray's job supervisor starts, in a session of its own, a shell that kills the
    job's process group once the supervisor is gone (it polls every second,
    job_supervisor.py): it ends on its own within a second of the head, and must
    not be cut short while the job's processes may still run. What outlives
    that is ended by id, so nothing of the run outlives its head."""
    deadline = time.monotonic() + wait_s
    while (left := _carrying(run_id)) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _started_file(folder: Path) -> bytes | None:
    """The lean head's `started` file (its program writes it whole, by rename), None while absent."""
    try:
        with open(folder / "started", "rb") as fh:
            return fh.read(1 << 20)
    except FileNotFoundError:
        return None


def _written_resources(folder: Path):
    """The resources of the node table in a lean head's `started` file; None when it has none (a
    full head started in its place: its State API answers)."""
    from tutorrl.runtime.cluster import node_resources

    table = _started_file(folder)
    if not table:
        return None
    from tutorrl._read import ReadError, decode_json

    where = str(folder / "started")
    try:
        return node_resources(where, decode_json(table, name=where))
    except ReadError as exc:
        raise RefusedError(f"the embedded Ray head's node table: {exc}") from None


class EmbeddedHead:
    """One private Ray head. Use as a context manager, or call start()/stop()."""

    def __init__(self, *, run_id: str, num_gpus: int | None = None, num_cpus: int | None = None,
                 job_start_timeout_s: int = JOB_START_TIMEOUT_S, workdir: Path | None = None,
                 python: str | None = None, lean: bool = False):
        self.run_id = run_id
        # Only what one dry-run job needs (runtime/lean_ray.py says what it leaves out).
        self.lean = lean
        # Ray workers (verl's TaskRunner and its actors) start in the raylet's
        # folder, not the driver's: starting the head where the user works
        # keeps relative spec paths meaning the same in every process.
        self.workdir = workdir
        self.num_gpus = detect_gpus() if num_gpus is None else num_gpus
        # The job's interpreter (TUTORRL_PYTHON); None: tutorrl's own.
        self.python = python
        self.ray = _ray_executable(python)
        self.num_cpus = num_cpus
        self.job_start_timeout_s = job_start_timeout_s
        self.proc: subprocess.Popen | None = None
        self.run_dir: Path | None = None
        self.token: str | None = None
        self.dashboard_port: int | None = None
        self.gcs_port: int | None = None
        self._log = None
        self._lean_file: Path | None = None  # the lean program, when the head runs it
        # Called with the head once its process exists (the run record notes it).
        self.started = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    @property
    def log_path(self) -> Path:
        assert self.run_dir is not None
        return self.run_dir / "head.log"

    def environment(self) -> dict[str, str]:
        assert self.run_dir is not None
        env = dict(os.environ)
        for name in (*HIJACK_VARS, "RAY_AUTH_TOKEN"):
            env.pop(name, None)
        bin_dir = str(Path(self.ray).parent)
        env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
        env.update({
            "RAY_USAGE_STATS_ENABLED": "0",
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN_PATH": str(self.run_dir / "token"),
            "TMPDIR": str(self.run_dir),
            "RAY_JOB_START_TIMEOUT_SECONDS": str(self.job_start_timeout_s),
            # With it 0, Ray's get_node_ip_address answers 127.0.0.1 instead of the routable address:
            # `ray start` keeps --node-ip-address=127.0.0.1 (resolve_ip_for_localhost would replace it),
            # and every worker and driver (verl's ray.init) looks for its node there too. The head
            # then cannot be joined: `ray start --address` refuses in this environment, as wanted.
            "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
            RUN_ID_ENV: self.run_id,
        })
        from tutorrl.runtime.envtransport import NOTHING_VAR

        # The `$` transport relies on this name being unset in every worker.
        env.pop(NOTHING_VAR, None)
        return env

    def start(self, progress=None, timeout_s: float = 120.0, should_stop=lambda: False) -> None:
        sweep_orphans()
        self.run_dir = _short_run_dir()
        (self.run_dir / _OWNER_FILE).write_text(f"{os.getpid()} {_process_start(os.getpid())}")
        self.token = secrets.token_hex(32)
        token_path = self.run_dir / "token"
        fd = os.open(token_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(self.token)
        gcs, dash, client, agent, m1, m2, mexp = free_ports(7)
        self.gcs_port, self.dashboard_port = gcs, dash
        env = self.environment()
        env["AUTOSCALER_METRIC_PORT"] = str(m1)
        env["DASHBOARD_METRIC_PORT"] = str(m2)
        if self.lean:
            env["RAY_prestart_worker_first_driver"] = "0"
            env["RAY_enable_worker_prestart"] = "0"
            env["RAY_enable_metrics_collection"] = "0"
        argv = [
            self.ray, "start", "--head", "--block",
            # Loopback only (and RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER above): without it Ray advertises the
            # machine's routable address and its GCS, raylet and agents listen there (or on every
            # address), where anyone on the network could reach them. Ray's processes only: what the
            # job opens itself (torch's c10d store listens on [::]) is the job's.
            "--node-ip-address=127.0.0.1",
            f"--port={gcs}", "--dashboard-host=127.0.0.1", f"--dashboard-port={dash}",
            f"--dashboard-agent-listen-port={agent}", f"--ray-client-server-port={client}",
            f"--metrics-export-port={mexp}", "--include-dashboard=true", "--disable-usage-stats",
            f"--temp-dir={self.run_dir / 'ray'}", f"--num-gpus={self.num_gpus}",
        ]
        argv.append(f"--num-cpus={self.num_cpus if self.num_cpus is not None else embedded_cpus(self.num_gpus)}")
        if self.lean:
            python = _script_python(self.ray)
            # Ray hands the raylet the agent's command as one string that the raylet splits again, and
            # the lean program's path goes into it as written: a folder that would need quoting there
            # (a TMPDIR with a space) gets the full head instead of an agent that never starts.
            if python is not None and _PLAIN_PATH.fullmatch(str(self.run_dir / _LEAN_FILE)):
                lean = self._lean_file = self.run_dir / _LEAN_FILE
                shutil.copyfile(_LEAN_SOURCE, lean)
                argv = [python, str(lean), "start", _module_spec(LEAN_MODULES), _module_spec(LEAN_AGENT_MODULES),
                        *argv[1:], "--no-monitor", "--include-log-monitor=false"]
        if progress:
            progress.status(f"starting embedded Ray head (dashboard 127.0.0.1:{dash}, {self.num_gpus} GPU)")
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            argv, env=env, cwd=self.workdir or self.run_dir, stdin=subprocess.DEVNULL, stdout=self._log,
            stderr=subprocess.STDOUT, preexec_fn=_child_setup(os.getpid()),
        )
        if self.started is not None:
            self.started(self)
        self._wait_ready(progress, timeout_s, should_stop)

    def _wait_ready(self, progress, timeout_s: float, should_stop) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RefusedError(
                    f"the embedded Ray head exited with code {self.proc.returncode} while starting:\n"
                    + self.log_tail()
                )
            if self._ready():
                return
            if should_stop():
                return
            if time.monotonic() > deadline:
                raise RefusedError(
                    f"the embedded Ray head did not become ready within {timeout_s:.0f}s:\n" + self.log_tail()
                )
            if progress:
                progress.tick()
            # A lean head's first check is a file's presence: asked often, it costs nothing.
            time.sleep(0.05 if self._lean_file is not None else 0.2)

    def _ready(self) -> bool:
        """A lean head is up once its program says so (the agent can take a job, the node table is
        written) and JobHead answers; a full head once the State API shows the node ALIVE."""
        if self._lean_file is not None:
            table = _started_file(self._lean_file.parent)
            if table is None:
                return False
            if table:
                return self._answers("/api/version", b'"ray_version"')
        return self._answers("/api/v0/nodes?detail=1", b'"ALIVE"')

    def _answers(self, endpoint: str, needle: bytes) -> bool:
        try:
            req = urllib.request.Request(self.url + endpoint, headers=self.headers)
            with urllib.request.urlopen(req, timeout=5) as resp:
                return resp.status == 200 and needle in resp.read()
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def resources(self):
        """The node table the lean head's program wrote (cluster.Resources), or None: ask the State API."""
        return None if self._lean_file is None else _written_resources(self._lean_file.parent)

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no head log)"
        return "\n".join(text.splitlines()[-lines:])

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM the head, then SIGKILL its whole process group (stragglers, agents)."""
        proc, self.proc = self.proc, None
        if proc is not None:
            if proc.poll() is None:
                try:
                    proc.send_signal(signal.SIGTERM)
                    proc.wait(grace_s)
                except subprocess.TimeoutExpired:
                    pass
                except ProcessLookupError:
                    pass
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
            _end_stragglers(self.run_id)
        if self._log is not None:
            self._log.close()
            self._log = None
        if self.run_dir is not None:
            shutil.rmtree(self.run_dir, ignore_errors=True)
            self.run_dir = None

    def __enter__(self) -> "EmbeddedHead":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


# -- a set's head, shared by the runs of the set ------------------------------------------------------------------
# A set (runset.py) starts one embedded head and runs each bundle with a `tutorrl run` of its
# own; that run finds the head through SET_HEAD_ENV (the head's folder), where this file says
# where the head listens and which process it is. The token is the head's own token file.
from tutorrl.contract import SET_HEAD_ENV  # noqa: E402
SET_HEAD_FILE = "set-head.json"


def publish(head: EmbeddedHead, set_id: str) -> None:
    """Say in the head's folder that it is the set's, for the runs the set starts on it."""
    import json

    from tutorrl.runtime.records import process_start_time

    assert head.run_dir is not None and head.proc is not None
    doc = {"set_id": set_id, "dashboard": head.url, "pid": head.proc.pid,
           "start": process_start_time(head.proc.pid)}
    fd = os.open(head.run_dir / SET_HEAD_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(doc, fh)


def is_shared(folder: str | None) -> bool:
    """Whether the head of that folder is a set's: the set's `tutorrl run` stops it, no run of the set."""
    own = own_head_folder(folder)
    return own is not None and (own / SET_HEAD_FILE).is_file()


class SharedHead:
    """A set's embedded head, as one run of the set sees it: the same folder (the run's secrets
    file goes there, as on a head of its own), token and dashboard; started and stopped by the set."""

    shared = True

    def __init__(self, run_dir: Path, url: str, token: str, pid: int, start: int | None):
        self.run_dir, self.url, self.token, self.pid, self.start = run_dir, url, token, pid, start

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def resources(self):
        """As EmbeddedHead.resources: the node table the set's lean head wrote, else None."""
        return _written_resources(self.run_dir)

    def stop(self) -> None:
        """Nothing: the set stops its head once its last run has ended."""


# What a set's head writes (publish, start): each a few dozen bytes.
MAX_SET_HEAD_FILE = 4096


def _read_own(path: Path, limit: int) -> bytes:
    """A file the set's head wrote: opened without blocking (a FIFO cannot hang the run), a regular
    file owned by this user that nobody else may read or write, at most ``limit`` bytes."""
    import errno
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(f"{path.name} is a symlink; not followed") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{path.name} is not a regular file")
        if st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise OSError(f"{path.name} is not this user's alone (mode {stat.S_IMODE(st.st_mode):o})")
        if st.st_size > limit:
            raise OSError(f"{path.name} is {st.st_size} bytes, over {limit}")
        data = os.read(fd, limit + 1)
        if len(data) > limit:
            raise OSError(f"{path.name} is over {limit} bytes")
        return data
    finally:
        os.close(fd)


def loopback_dashboard(url: str) -> bool:
    """Whether ``url`` is a dashboard the head's token may be sent to: http, a loopback IP
    address as the parsed host, a port, and nothing that could name another host (userinfo)."""
    import ipaddress
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        port = parts.port
        host = ipaddress.ip_address(parts.hostname or "")
    except ValueError:
        return False
    return (parts.scheme == "http" and "@" not in parts.netloc and parts.username is None and port is not None
            and host.is_loopback and parts.path in ("", "/") and not parts.query and not parts.fragment)


def attach(folder: str) -> SharedHead:
    """The set's head named by SET_HEAD_ENV; refused unless it is a live head folder of this user."""
    import json

    from tutorrl.runtime.records import process_start_time

    own = own_head_folder(folder)
    try:
        if own is None:
            raise OSError("not an embedded head's folder of this user")
        doc = json.loads(_read_own(own / SET_HEAD_FILE, MAX_SET_HEAD_FILE))
        token = _read_own(own / "token", MAX_SET_HEAD_FILE).decode("ascii").strip()
        pid, start, url = doc["pid"], doc["start"], doc["dashboard"]
        if type(pid) is not int or type(start) is not int or type(url) is not str:
            raise ValueError("pid, start and dashboard are not a number, a number and a text")
    except (OSError, ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise RefusedError(f"{SET_HEAD_ENV}={folder}: no set's Ray head there ({exc})") from None
    if not loopback_dashboard(url):
        raise RefusedError(f"{SET_HEAD_ENV}={folder}: the set's dashboard {url!r} is not a loopback address "
                           "of this machine; the head's token is sent nowhere else")
    # The pid with its start time names one process for good: a pid reused since is not the head.
    if process_start_time(pid) != start:
        raise RefusedError(f"{SET_HEAD_ENV}={folder}: the set's Ray head is not running")
    return SharedHead(own, url, token, pid, start)
