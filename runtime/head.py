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


# What a dry run's head leaves out. A dry run is one Ray job whose entrypoint
# (launch.sh --cfg all) composes verl's config and exits without ray.init, so
# the head needs what the Jobs API needs and nothing more (Ray 2.60's sources;
# sizes from benchmarks/bench_dryrun.py on a 2-core machine):
#   * dashboard modules: JobHead alone (submit, status, logs, stop, and
#     /api/version; it finds the node's agent in the GCS's key-value store,
#     job_head.py _fetch_agent_info); not the State, Node, Metrics, Report,
#     Train, Data, Serve and Event heads, one ~90 MiB process each. What
#     tutorrl read of the State API (/api/v0/nodes: the node ALIVE, its
#     resources for the cluster check) the program below reads from the GCS
#     itself once the agent is up, and writes, in the State API's shape, into
#     the `started` file readiness waits for (EmbeddedHead.resources);
#   * the forkserver Ray forks dashboard modules from is a fork of the
#     dashboard's own process, made before it starts a thread: Ray's spawns a
#     second interpreter that imports Ray and JobHead's packages again (~1 s
#     of CPU), and starts it only once the dashboard has imported its own;
#   * the dashboard and its agent import only the modules they load: Ray's
#     get_all_modules imports every package of ray.dashboard.modules (Serve's,
#     Train's, Data's) to pick its classes from them. The agent loads JobAgent
#     alone -- the agent end of every job call -- not the Reporter (metrics, the
#     node's CPU and memory figures), Event, Log (the State API's log files) and
#     Healthz agents, which no call of a dry run reaches; metrics collection is
#     off, so no Ray process waits on an exporter that is not there;
#   * `ray start` imports its CLI without the Serve, Jobs and State API
#     commands (pandas and fastapi: ~1 s of CPU and ~120 MiB; Ray itself
#     imports them in try/except and only `ray start` runs here), and once the
#     head is up the process becomes (exec, same pid, same process group) a few
#     lines of Python that wait on the Ray processes it started, where
#     `--block`'s loop keeps all of that Ray resident (~200 MiB) to poll them;
#   * no autoscaler monitor: one fixed node scales nothing;
#   * no Ray Client server: tutorrl speaks HTTP to the Jobs API and verl's
#     driver connects to the GCS, never through Ray Client;
#   * no log monitor: it streams Ray workers' output to their driver, and a dry
#     run starts no worker (a real run keeps it: verl's TaskRunner prints its
#     metrics through it);
#   * no prestarted workers: the raylet starts idle Python workers (~80 MiB
#     each) for the first driver -- the dashboard's job manager here -- and a
#     dry run's only worker, the job's supervisor, is started for it anyway.
# And what lies between `ray start` and a job that runs (measured on 2 cores, A/B
# in one run: a whole dry run 10.7 -> 9.4 s against verl's own 6.1 s):
#   * `ray start` waits for its raylet to register in Ray's get_node, which asks
#     the GCS once a second: the program asks every 20 ms (0-1 s);
#   * `ray start` imports the dashboard's packages to check that they import
#     before it starts the dashboard (~0.15 s); the dashboard imports them anyway,
#     so the program only finds them (Ray's check runs where one is missing);
#   * a Ray worker starts as Ray's setup_worker.py, which imports all of Ray to
#     set the runtime env's variables and then execs a second interpreter that
#     imports it again: for a worker whose runtime env is variables alone (the
#     job's supervisor) the program sets them and runs default_worker.py in the
#     same process (submit -> RUNNING ~1.3 -> ~0.8 s); anything else goes through
#     Ray's own setup_worker.py;
#   * the agent (at its first job, when its job manager connects to Ray) and the
#     supervisor import pyarrow and numpy only to register Ray's serializers for
#     Arrow's types (~0.1 s each, before the job starts); neither passes Arrow data;
#   * each Python process of the head imported all of Ray for itself (~0.5 s of
#     CPU each), and the dashboard and its agent then their own packages (~1 s
#     more each), all after the GCS was up: the agent was the last part of the
#     head up. Here the dashboard, the agent and the runtime-env agent are forks
#     of `ray start`, made right after it imported Ray ("zygotes", which import
#     their packages while `ray start` starts the GCS). Ray starts each of them
#     from a command line and watches the process it started, so what it starts
#     is a stand-in that hands its arguments, Ray's variables and its standard
#     streams to the fork (the raylet's pipe on an agent's standard input is
#     how the agent knows its raylet is alive: an agent whose check is by its
#     parent's pid is not forked) and lives exactly as long as the fork; where
#     a fork is not safe (a thread already runs), the stand-in runs the process
#     itself, and a Ray other than 2.60.0 starts its processes unchanged. Head
#     start, 2-core machine, quiet:
#     3.0-3.6 s -> 1.5-1.9 s.
# `ray start` has no flag for most of these, so the head is `ray start` run by
# the program below (written into the head's folder: the raylet starts the
# agent and its workers from command lines) that narrows them through Ray's own
# process launcher. A Ray other than the one it was written for lacks those names: the
# program then starts the full head, as `ray start --block` alone would.
LEAN_MODULES = {"JobHead": "ray.dashboard.modules.job.job_head"}
LEAN_AGENT_MODULES = {"JobAgent": "ray.dashboard.modules.job.job_agent"}
_LEAN_FILE = "lean_ray.py"
_PLAIN_PATH = re.compile(r"[A-Za-z0-9_./+-]+")
_LEAN_RAY = r'''
"""tutorrl's lean Ray head (tutorrl/runtime/head.py says what it leaves out and why).

    lean_ray.py start HEAD_MODULES AGENT_MODULES start --head ...   `ray start`, narrowed
    lean_ray.py agent MODULES SCRIPT ARGS...                        the dashboard agent, narrowed
    lean_ray.py handoff NAME ROLE ARGS...                           ROLE, run by the zygote NAME (ZYGOTES)
    lean_ray.py script SCRIPT ARGS...                               a Ray script (the runtime-env agent)
    lean_ray.py dashboard MODULES SCRIPT ARGS...                    the dashboard head, narrowed
    lean_ray.py worker SETUP_WORKER ARGS...                         a Ray worker, set up in-process
"""
import os
import sys

HERE = os.path.abspath(__file__)


def one_thread():
    """Whether this process has one thread: what makes a fork of it safe."""
    return len(os.listdir("/proc/self/task")) == 1


def run_as_main(argv):
    """Run ``argv[0]``, a Ray script, as `python ARGV...` would: ``argv`` as sys.argv, its folder first
    on the path."""
    import runpy

    sys.argv, sys.path[0] = argv, os.path.dirname(argv[0])
    runpy.run_path(argv[0], run_name="__main__")


def exit_after(run, *args):
    """In a forked child: ``run(*args)``, then leave with the exit status Python would give it, never
    returning into the code of the process it was forked from."""
    code = 1
    try:
        run(*args)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, int) and exc.code is not None:
            print(exc.code, file=sys.stderr)  # what Python prints for sys.exit("message")
    except BaseException:  # noqa: BLE001 - whatever happens, the fork ends here
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
# Once the head is up: wait on its Ray processes; end the head when one ends or when told to.
WATCH = """
import os, signal, sys
pids = {int(p) for p in sys.argv[1:]}
def end(code):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.killpg(0, signal.SIGTERM)
    os._exit(code)
signal.signal(signal.SIGTERM, lambda *_: end(0))
signal.signal(signal.SIGINT, lambda *_: end(0))
while True:
    try:
        pid, status = os.wait()
    except ChildProcessError:
        end(1)
    if pid in pids:
        print(f"tutorrl: Ray process {pid} of the head ended (wait status {status}); the head stops",
              file=sys.stderr, flush=True)
        end(1)
"""


def started(nodes=b""):
    """Say that the head is up: the file EmbeddedHead waits for, holding the node table it reads
    instead of the State API's (empty: a full head, whose State API answers for itself)."""
    path = os.path.join(os.path.dirname(HERE), "started")
    with open(path + ".part", "wb") as fh:
        fh.write(nodes)
    os.rename(path + ".part", path)  # whole or absent: EmbeddedHead reads it as soon as it is there


def narrow(spec):
    """Ray's get_all_modules, importing only the modules named (module:Class,...)."""
    import importlib

    import ray.dashboard.utils as utils

    wanted = [item.split(":", 1) for item in spec.split(",")]
    names = {name for _, name in wanted}

    def get_all_modules(module_type):
        for module, _ in wanted:
            importlib.import_module(module)
        return [m for m in module_type.__subclasses__()
                if m.__name__ in names and getattr(m, "__ray_dashboard_module_enable__", True)]

    utils.get_all_modules = get_all_modules


def node_table(gcs):
    """What tutorrl reads of the State API's /api/v0/nodes (state, node_ip, resources_total), from the GCS
    directly: the State API's head (StateHead, a ~90 MiB process) is not started."""
    import json

    from ray.core.generated.gcs_pb2 import GcsNodeInfo

    table = [{"state": GcsNodeInfo.GcsNodeState.Name(info.state), "node_ip": info.node_manager_address,
              "resources_total": dict(info.resources_total)} for info in gcs.get_all_node_info(timeout=10).values()]
    # The State API's answer, as cluster.node_resources reads it.
    return json.dumps({"result": True, "data": {"result": {"result": table}}}).encode()


def warm_forkserver(spec):
    """Start the forkserver Ray forks dashboard modules from now, before this process starts a thread
    (dashboard/subprocesses/handle.py starts it at the first module, after the dashboard has imported
    all of its own): JobHead -- the last part of the head to come up -- is then a fork of a ready
    process. The server is this process, forked once it has imported what Ray preloads there
    (preload_in_forkserver's list for these modules): one import of Ray for the dashboard and its
    modules, where multiprocessing's own start spawns a second interpreter that imports it all again
    (~1 s of CPU on the head's path to ready). The dashboard's later call to set the list finds the
    server running, which keeps the list it started with."""
    import importlib
    import multiprocessing
    import multiprocessing.forkserver as forkserver

    preload = ["ray", "ray.dashboard.subprocesses.module", *sorted({item.split(":", 1)[0] for item in spec.split(",")})]
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(preload)
    server = getattr(forkserver, "_forkserver", None)
    # multiprocessing's forkserver state as Python 3.10-3.13 keep it (3.14 adds an authentication key).
    if sys.version_info >= (3, 14) or not all(hasattr(server, name) for name in FORKSERVER_STATE):
        forkserver.ensure_running()
        return
    for name in preload:
        try:
            importlib.import_module(name)
        except ImportError:
            pass  # as the server's own preload does: the module child imports it, and says what fails
    # Forking is safe while this process has one thread (an import that started one: the spawned server).
    if not one_thread():
        forkserver.ensure_running()
        return
    serve_forks(server)


FORKSERVER_STATE = ("_forkserver_address", "_forkserver_alive_fd", "_forkserver_pid")


def serve_forks(server):
    """multiprocessing's ForkServer.ensure_running, with the server forked from this process instead of
    spawned: the same listening socket and "alive" pipe, the same state recorded for the clients."""
    import socket
    from multiprocessing import connection, forkserver, resource_tracker, util

    # Without the server's lock (this process has one thread until it runs the dashboard): a fork made
    # holding it would pass it held to the server and every module forked from it.
    resource_tracker.ensure_running()
    if server._forkserver_pid is not None:
        return
    with socket.socket(socket.AF_UNIX) as listener:
        address = connection.arbitrary_address("AF_UNIX")
        listener.bind(address)
        if not util.is_abstract_socket_namespace(address):
            os.chmod(address, 0o600)
        listener.listen()
        alive_r, alive_w = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(alive_r)
            os.close(alive_w)
            raise
        if pid == 0:  # the server: it leaves by SystemExit once every client is gone
            os.close(alive_w)
            exit_after(forkserver.main, listener.fileno(), alive_r, [])
        os.close(alive_r)
    server._forkserver_address, server._forkserver_alive_fd, server._forkserver_pid = address, alive_w, pid


def start(head_spec, agent_spec):
    for cli in CLI_MODULES:
        sys.modules[cli] = None  # ray.scripts.scripts imports each in try/except
    import ray
    import ray._private.node as node
    import ray._private.ray_constants as constants
    import ray._private.services as services
    import ray._private.utils as utils
    from ray.dashboard.consts import DASHBOARD_AGENT_ADDR_NODE_ID_PREFIX as AGENT_KEY

    # Before anything here starts a thread: the zygotes import beside `ray start` from now on. What they
    # do relies on what Ray 2.60 reads at import and hands its agents (ZYGOTES): another Ray starts
    # those processes itself.
    def role(name, spec, folders=()):
        modules = [*ZYGOTES[name], *(item.split(":", 1)[0] for item in spec.split(",") if item)]
        return [HERE, "handoff", name] if own_worker and fork_zygote(name, modules, folders) else [HERE]

    own_worker = ray.__version__ == WORKER_RAY
    env_agent = os.path.join(services.RAY_PATH, *ENV_AGENT)
    env_folder = os.path.dirname(env_agent)
    dashboard_role, agent_role = role("dashboard", head_spec), role("agent", agent_spec)
    env_agent_role = role("runtime_env_agent", "", (env_folder, os.path.join(env_folder, "thirdparty_files")))

    # Every name used below, read now: a Ray without one starts whole, not half narrowed.
    dashboard, raylet = constants.PROCESS_TYPE_DASHBOARD, constants.PROCESS_TYPE_RAYLET
    head_key, jobs, dash = constants.KV_HEAD_NODE_ID_KEY, constants.KV_NAMESPACE_JOB, constants.KV_NAMESPACE_DASHBOARD
    address_key = constants.DASHBOARD_ADDRESS.encode()
    launch, publish, pids, nodes = services.start_ray_process, utils.write_ray_address, [], []
    made, check_dependencies = node.Node.__init__, utils.get_dashboard_dependency_error
    # The worker role stands in for Ray's setup_worker.py, whose arguments and context it reads as
    # Ray 2.60.0 writes them: another Ray keeps its own script (own_worker, above).

    def init(self, *args, **kwargs):
        nodes.append(self)
        made(self, *args, **kwargs)
        # What the dashboard's NodeHead would write once it saw the node (job_head.py reads it to find
        # the agent that runs a job): written as soon as the node is up, that process need not run
        # (JobHead asks again every 0.5 s until it is there).
        self.get_gcs_client().internal_kv_put(head_key, self.node_id.encode(), True, jobs)
    agent = " " + os.path.join(services.RAY_PATH, "dashboard", "agent.py") + " "
    setup = " " + os.path.join(services.RAY_PATH, "_private", "workers", "setup_worker.py") + " "
    head_names = ",".join(item.split(":", 1)[1] for item in head_spec.split(","))

    def start_ray_process(command, process_type, *args, **kwargs):
        if process_type == dashboard:
            i = next((i for i, c in enumerate(command) if os.path.basename(c) == "dashboard.py"), None)
            if i is None:
                end_zygote("dashboard")
            else:
                command = [*command[:i], *dashboard_role, "dashboard", head_spec, *command[i:],
                           "--modules-to-load=" + head_names]
            info = launch(command, process_type, *args, **kwargs)
            pids.append(info.process.pid)
            # Ray waits for the dashboard to write its address before it starts the raylet
            # (services.start_api_server); that address is the host and port given to it (the head
            # is on loopback), so it is written here and the raylet starts while the dashboard imports.
            # If the dashboard then fails, its exit ends the head (WATCH) before the head is ready.
            given = dict(c[2:].split("=", 1) for c in command if c.startswith(("--host=", "--port=")))
            nodes[0].get_gcs_client().internal_kv_put(address_key, f"{given['host']}:{given['port']}".encode(),
                                                      True, dash)
            return info
        elif process_type == raylet:
            # A zygote whose process Ray would start from a command line not as read here: ended.
            for name, flag, script in (("agent", "--dashboard_agent_command=", agent),
                                       ("runtime_env_agent", "--runtime_env_agent_command=", f" {env_agent} ")):
                if not any(c.startswith(flag) and script in c for c in command):
                    end_zygote(name)
            command = [c.replace(agent, f" {' '.join(agent_role)} agent {agent_spec}{agent}", 1)
                       if c.startswith("--dashboard_agent_command=") else
                       c.replace(f" {env_agent} ", f" {' '.join(env_agent_role)} script {env_agent} ", 1)
                       if c.startswith("--runtime_env_agent_command=") and len(env_agent_role) > 1 else
                       c.replace(setup, f" {HERE} worker{setup}", 1)
                       if c.startswith("--python_worker_command=") and own_worker else c for c in command]
        info = launch(command, process_type, *args, **kwargs)
        pids.append(info.process.pid)
        return info

    def write_ray_address(*args, **kwargs):
        # `ray start` says where the head is, then (--block) loops polling its processes.
        publish(*args, **kwargs)
        # Started = a job submitted now goes straight through: JobHead finds the agent's address,
        # which the agent writes once it is up (agent.py), and does not wait 0.5 s to ask again.
        import time

        key, deadline = (AGENT_KEY + nodes[0].node_id).encode(), time.monotonic() + 60
        while not nodes[0].get_gcs_client().internal_kv_get(key, dash) and time.monotonic() < deadline:
            time.sleep(0.05)
        started(node_table(nodes[0].get_gcs_client()))
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(sys.executable, [sys.executable, "-I", "-S", "-c", WATCH, *map(str, pids)])

    from ray.core.generated.gcs_pb2 import GcsNodeInfo

    get_node, alive = services.get_node, GcsNodeInfo.GcsNodeState.ALIVE

    def wait_for_node(gcs_address, node_id):
        # `ray start` waits for the raylet to register in Ray's get_node, which asks the GCS once a
        # second (GlobalStateAccessor::GetNode sleeps 1 s between asks): the head came up 0-1 s after
        # its raylet did. Asked every 20 ms here; Ray's own call then answers at once.
        import time

        want, deadline = bytes.fromhex(node_id), time.monotonic() + 30
        while True:
            try:
                up = any(info.node_id == want and info.state == alive
                         for info in nodes[0].get_gcs_client().get_all_node_info(timeout=10).values())
            except Exception:  # noqa: BLE001 - Ray's own wait below says what is wrong
                break
            if up:
                break
            if time.monotonic() > deadline:
                # Ray's loop (node.py) takes this as "not yet" and, its own 30 s gone, fails at
                # once: not 30 s more inside Ray's get_node before the same message.
                raise RuntimeError(f"the raylet of node {node_id} did not register with the GCS in 30 s")
            time.sleep(0.02)
        return get_node(gcs_address, node_id)

    services.start_ray_process = start_ray_process
    utils.write_ray_address = write_ray_address
    services.get_node = wait_for_node
    # Ray checks that the dashboard's packages import by importing them here, in `ray start`, before it
    # starts the dashboard and the raylet (~0.15 s of CPU on the head's path to ready); the dashboard
    # and its agent import them anyway. Finding them is enough where all are installed; where one is
    # missing (ray without [default]), Ray's own check runs and refuses at once, saying what to install,
    # instead of a dashboard that dies on import and a raylet that never registers.
    def dependency_error():
        import importlib.util

        try:
            if all(importlib.util.find_spec(name) is not None for name in DASHBOARD_PACKAGES):
                return None
        except (ImportError, ValueError):
            pass  # a finder that refuses one: Ray's import says what
        return check_dependencies()

    utils.get_dashboard_dependency_error = dependency_error
    node.Node.__init__ = init
    node.Node.start_ray_client_server = lambda self: None


# Ray registers serializers for Arrow's types in every process that connects to it (its
# serialization_addons), importing pyarrow, and numpy with it: ~0.1 s of CPU in the agent at the first
# submission (its job manager connects then) and in each job's supervisor, before the job starts. Neither
# passes Arrow data; Ray skips the registration when pyarrow does not import.
NOT_IMPORTED = ("pyarrow",)
# The packages ray/dashboard/optional_deps.py imports (Ray 2.60), by their top-level names.
DASHBOARD_PACKAGES = ("aiohttp", "aiohttp_cors", "grpc", "opencensus", "opentelemetry", "prometheus_client",
                      "pydantic")
# The Ray whose setup_worker.py the worker role was read from.
WORKER_RAY = "2.60.0"
# What a worker's runtime env may set that an interpreter reads only as it starts.
STARTUP_ONLY = ("PYTHON", "LD_", "MALLOC_", "GLIBC_TUNABLES")
CONTEXT_KEYS = {"command_prefix", "env_vars", "py_executable", "override_worker_entrypoint", "java_jars"}


def worker(setup, args):
    """Ray's setup_worker.py for a worker whose runtime env is environment variables alone (a job's
    supervisor: the only Ray worker of a dry run), in this process. Ray's imports all of Ray to read
    its arguments, sets the variables and execs a second interpreter, which imports Ray again to run
    default_worker.py: ~0.5 s of CPU between a job's submission and its start. Anything else -- a
    command prefix (conda, a container), another interpreter, a variable read at start-up -- goes
    through Ray's own setup_worker.py, as it would without this program."""
    import argparse
    import json
    import re

    parser = argparse.ArgumentParser()  # setup_worker.py's own two options
    parser.add_argument("--serialized-runtime-env-context", type=str)
    parser.add_argument("--language", type=str)
    known, rest = parser.parse_known_args(args)
    try:
        context = json.loads(known.serialized_runtime_env_context or "{}")
    except ValueError:
        context = None
    env = context.get("env_vars") or {} if isinstance(context, dict) else None
    plain = (isinstance(env, dict) and known.language == "PYTHON" and set(context) <= CONTEXT_KEYS
             and not any(context.get(k) for k in ("command_prefix", "override_worker_entrypoint", "java_jars"))
             and context.get("py_executable") in (None, sys.executable)
             and not any(str(name).startswith(STARTUP_ONLY) for name in env)
             and rest[:1] and os.path.basename(rest[0]) == "default_worker.py")
    if not plain:
        run_as_main([setup, *args])
        return
    for name, value in env.items():  # ray._private.utils.update_envs
        os.environ[name] = re.sub(r"\$\{[A-Z0-9_]+\}", "", os.path.expandvars(value))
    for name in NOT_IMPORTED:
        sys.modules.setdefault(name, None)
    run_as_main(rest)


# Ray's runtime-env agent, under ray/ (services.py starts it as `python -u <it> ARGS`); its folder is
# on its path (it imports runtime_env_agent and runtime_env_consts from there).
ENV_AGENT = ("_private", "runtime_env", "agent", "main.py")


def wait_on(pid, what, mask):
    """A stand-in's life: end when process ``pid`` (a zygote's, not this one's child) ends; and when
    the stand-in is told to end, end it too, and then end."""
    import select
    import signal

    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        fd = None

    def ended(timeout=None):
        if fd is not None:
            return bool(select.select([fd], [], [], timeout)[0])
        # No pidfd (Linux < 5.3): a zombie is ended too (its parent, the head's waiter, reaps it).
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                return fh.read().rsplit(b")", 1)[1].split()[0] == b"Z"
        except (OSError, IndexError):
            return True
        finally:
            if timeout:
                select.select([], [], [], min(timeout, 0.5))

    def forward(signum, _frame):
        try:
            os.kill(pid, signum)
            for _ in range(20):
                if ended(0.5):
                    break
            else:  # what Ray's SIGKILL would have done to the process it started
                os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os._exit(0)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, forward)
    # Told to end between the zygote's answer and here: the handlers above run now.
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    while not ended(None if fd is not None else 0.5):
        pass
    print(f"tutorrl: {what} ({pid}) ended", file=sys.stderr, flush=True)
    os._exit(1)


# Zygotes: forks of `ray start` made once it has imported Ray (start), each of which imports what one
# Ray process needs while the head starts, and becomes that process when its stand-in -- the process
# Ray started for it, `lean_ray.py handoff NAME ROLE ARGS` -- hands over its arguments, Ray's variables
# and its standard streams on the socket NAME.sock. The dashboard, its agent and the runtime-env agent
# each spent ~0.5 s of CPU importing Ray and up to ~1 s more their packages after the GCS was up, the
# agent the last part of the head to come up.
ZYGOTES = {
    # What ray/dashboard/dashboard.py, ray/dashboard/agent.py and the runtime-env agent's main.py
    # import (Ray 2.60), at their tops and as they start; the dashboard modules each of the first two
    # loads are added from its spec.
    "dashboard": ("ray.dashboard.dashboard", "ray.dashboard.head", "ray.dashboard.http_server_head",
                  "ray.dashboard.subprocesses.handle", "ray.dashboard.subprocesses.module", "grpc.aio",
                  "aiohttp.web"),
    "agent": ("ray.dashboard.agent", "ray.dashboard.http_server_agent", "ray._common.tls_utils",
              "ray._private.authentication.authentication_utils",
              "ray._private.authentication.grpc_authentication_server_interceptor", "grpc.aio", "aiohttp.web"),
    # (its main.py puts its folder's thirdparty_files, Ray's own aiohttp, and then the folder first
    # on the path: the zygote imports with the same path)
    "runtime_env_agent": ("ray._private.authentication.http_token_authentication", "ray._private.process_watcher",
                          "aiohttp.web", "runtime_env_agent", "runtime_env_consts"),
}
CLI_MODULES = ("ray.serve.scripts", "ray.dashboard.modules.job.cli", "ray.util.state.state_cli")
# An agent forked from `ray start` is not the raylet's child: it must watch its raylet through the pipe on
# its standard input (Ray's default for agents), not by its parent's pid. With that switched off, the
# stand-in runs the agent itself.
PIPE_CHECK = "RAY_enable_pipe_based_agent_to_parent_health_check"


# name -> pid of each zygote forked, to end the ones no process will be asked of.
FORKED = {}


def end_zygote(name):
    """End zygote ``name``, whose role will not be asked for (Ray starts that process itself)."""
    import signal

    pid = FORKED.pop(name, None)
    if pid:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass


def fork_zygote(name, imports, folders=()):
    """Fork the zygote ``name`` from this process (`ray start`, Ray imported, one thread); returns
    whether it runs (else its stand-in runs the role itself). ``folders`` go first on the path of its
    imports, in this order (a Ray script's own path)."""
    import socket

    if not one_thread():
        return False
    path = os.path.join(os.path.dirname(HERE), name + ".sock")
    listener = socket.socket(socket.AF_UNIX)
    try:
        listener.bind(path)
        os.chmod(path, 0o600)
        listener.listen(1)
        sys.stdout.flush()
        sys.stderr.flush()
        parent = os.getpid()
        pid = os.fork()
    except OSError:
        listener.close()
        try:
            os.unlink(path)
        except OSError:
            pass
        return False
    if pid:
        listener.close()
        FORKED[name] = pid
        return True
    exit_after(zygote, parent, imports, folders, listener, path)


def zygote(parent, imports, folders, listener, path):
    import ctypes
    import importlib
    import io
    import json
    import signal
    import socket

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG: end with the head
    if os.getppid() != parent:
        return  # the head died between the fork and the prctl
    for name in CLI_MODULES:  # `ray start`'s leaving-out, not the role's
        if name in sys.modules and sys.modules[name] is None:
            del sys.modules[name]
    path_before = list(sys.path)
    sys.path[:0] = folders
    for name in imports:
        try:
            importlib.import_module(name)
        except ImportError:
            pass  # the role imports it again, and says what fails
    sys.path[:] = path_before
    safe = one_thread()  # what the roles fork in turn (the dashboard's forkserver) needs
    listener.settimeout(120)
    try:
        conn, _ = listener.accept()
    except OSError:
        return  # nobody asked: the head did not come up
    finally:
        listener.close()
        os.unlink(path)
    with conn:
        conn.settimeout(30)
        _, fds, _, _ = socket.recv_fds(conn, 1, 3)
        chunks = []
        while chunk := conn.recv(1 << 16):
            chunks.append(chunk)
        try:
            given = json.loads(b"".join(chunks))
            argv, env, unbuffered = list(given["argv"]), dict(given["env"]), bool(given["unbuffered"])
        except (ValueError, TypeError, KeyError):
            given = None
        by_pipe = given is not None and env.get(PIPE_CHECK, os.environ.get(PIPE_CHECK, "")).lower() in ("1", "true")
        if not safe or len(fds) != 3 or given is None or (argv[:1] != ["dashboard"] and not by_pipe):
            conn.sendall(b"0")  # the stand-in runs the role itself
            return
        sys.stdout.flush()
        sys.stderr.flush()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        # The stand-in's streams, set up as this interpreter set up its own (encoding and errors: the
        # same locale and variables), unbuffered as `python -u` where the stand-in's command says so.
        streams = {n: (getattr(sys, n).encoding, getattr(sys, n).errors) for n in ("stdin", "stdout", "stderr")}
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), *streams["stdin"])
        for fd, n in ((1, "stdout"), (2, "stderr")):
            raw = io.FileIO(fd, "w", closefd=False)
            setattr(sys, n, io.TextIOWrapper(raw, *streams[n], write_through=True) if unbuffered else
                    io.TextIOWrapper(io.BufferedWriter(raw), *streams[n], line_buffering=n == "stderr"))
        os.environ.update(env)
        # Of what the roles import, ray/dashboard/consts.py alone reads at import a variable the raylet
        # sets for its agents (PIPE_CHECK): read again, with them.
        if "ray.dashboard.consts" in sys.modules:
            importlib.reload(sys.modules["ray.dashboard.consts"])
        try:
            import ray._raylet

            # What `ps` shows: the stand-in's command, not `ray start`'s.
            ray._raylet.setproctitle(" ".join([sys.executable, HERE, *argv]))
        except (ImportError, AttributeError):
            pass
        conn.sendall(str(os.getpid()).encode())
    sys.argv = [HERE, *argv]
    main()


def handoff(name, argv):
    """A stand-in, the process Ray started: hand the role to zygote ``name`` and wait on it; without a
    zygote, run the role itself, with the interpreter and flags Ray started the stand-in with."""
    import io
    import json
    import signal
    import socket

    # Held until wait_on can pass them on: ending this process alone would leave its fork running.
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    path, pid = os.path.join(os.path.dirname(HERE), name + ".sock"), 0
    ray_vars = {k: v for k, v in os.environ.items() if k.startswith("RAY_") and "TOKEN" not in k}
    try:
        message = json.dumps({"argv": argv, "env": ray_vars,
                              "unbuffered": isinstance(getattr(sys.stdout, "buffer", None), io.FileIO)})
        with socket.socket(socket.AF_UNIX) as conn:
            conn.settimeout(120)
            conn.connect(path)
            socket.send_fds(conn, [b"x"], [0, 1, 2])
            conn.sendall(message.encode())
            conn.shutdown(socket.SHUT_WR)
            pid = int(conn.recv(64) or b"0")
    except (OSError, ValueError, TypeError):
        pid = 0
    if not pid:
        with open("/proc/self/cmdline", "rb") as fh:
            given = [arg.decode() for arg in fh.read().split(b"\0")[:-1]]
        prefix = given[:given.index(HERE)] if HERE in given else [sys.executable]
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # the mask Ray started the process with
        os.execv(prefix[0], [*prefix, HERE, *argv])
    wait_on(pid, f"the {name}", mask)


def main():
    role = sys.argv.pop(1)
    if role == "script":  # a Ray script of its own, as `python SCRIPT ARGS` runs it
        run_as_main(sys.argv[1:])
        return
    if role == "handoff":
        handoff(sys.argv[1], sys.argv[2:])
        return
    if role == "worker":
        setup = sys.argv.pop(1)
        worker(setup, sys.argv[1:])
        return
    if role in ("agent", "dashboard"):
        spec, script = sys.argv.pop(1), sys.argv.pop(1)
        if role == "dashboard":
            try:
                warm_forkserver(spec)
            except (ImportError, AttributeError, ValueError, OSError):
                pass  # Ray starts it when the first module starts
        if role == "agent":
            for name in NOT_IMPORTED:
                sys.modules.setdefault(name, None)
        try:
            narrow(spec)
        except (ImportError, AttributeError) as exc:
            print(f"tutorrl: every dashboard module loads ({exc!r})", file=sys.stderr)
        run_as_main([script, *sys.argv[1:]])
    else:
        head_spec, agent_spec = sys.argv.pop(1), sys.argv.pop(1)
        try:
            start(head_spec, agent_spec)
        except (ImportError, AttributeError) as exc:
            print(f"tutorrl: the full Ray head starts ({exc!r})", file=sys.stderr)
            for name in list(FORKED):
                end_zygote(name)
            started()  # nothing narrowed: ready when the node is ALIVE, as for `ray start` alone
        from ray.scripts.scripts import main as ray_main

        sys.argv[0] = "ray"
        sys.exit(ray_main())


# Run as a script only: not when imported under another name (a forked process's __mp_main__, a test).
if __name__ == "__main__":
    main()
'''


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
        # Only what one dry-run job needs (LEAN_MODULES and the comment above them).
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
                lean.write_text(_LEAN_RAY)
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
