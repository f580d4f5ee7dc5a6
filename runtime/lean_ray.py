"""tutorrl's lean Ray head: ``ray start --head``, narrowed to what one job needs.

A standalone program, run by the job's Python (which may have Ray and no
tutorrl): it imports nothing of tutorrl, and nothing at module level but
``os`` and ``sys``. ``runtime/head.py`` copies this file into the head's folder
and starts it by that path: its ``started`` file and the zygotes' sockets live
beside it, and the raylet starts the agent and its workers from command lines
that name it. A Ray other than :data:`WORKER_RAY` lacks the private names it
reaches for: it then starts the full head, as ``ray start --block`` alone
would. Roles::

    lean_ray.py start HEAD_MODULES AGENT_MODULES start --head ...   `ray start`, narrowed
    lean_ray.py agent MODULES SCRIPT ARGS...                        the dashboard agent, narrowed
    lean_ray.py handoff NAME ROLE ARGS...                           ROLE, run by the zygote NAME (ZYGOTES)
    lean_ray.py script SCRIPT ARGS...                               a Ray script (the runtime-env agent)
    lean_ray.py dashboard MODULES SCRIPT ARGS...                    the dashboard head, narrowed
    lean_ray.py worker SETUP_WORKER ARGS...                         a Ray worker, set up in-process
    lean_ray.py watch PID...                                        the head once up: waits on its Ray processes

What a dry run's head leaves out. A dry run is one Ray job whose entrypoint
(launch.sh --cfg all) composes verl's config and exits without ray.init, so
the head needs what the Jobs API needs and nothing more (read from Ray 2.60's
sources; what each item costs is in docs/architecture.md, "Measured"):

* dashboard modules: JobHead alone (submit, status, logs, stop, and
  /api/version; it finds the node's agent in the GCS's key-value store,
  job_head.py _fetch_agent_info); not the State, Node, Metrics, Report, Train,
  Data, Serve and Event heads, one process each. What tutorrl read of the
  State API (/api/v0/nodes: the node ALIVE, its resources for the cluster
  check) this program reads from the GCS itself once the agent is up, and
  writes, in the State API's shape, into the ``started`` file readiness waits
  for (EmbeddedHead.resources);
* the forkserver Ray forks dashboard modules from is a fork of the
  dashboard's own process, made before it starts a thread: Ray's spawns a
  second interpreter that imports Ray and JobHead's packages again, and starts
  it only once the dashboard has imported its own;
* the dashboard and its agent import only the modules they load: Ray's
  get_all_modules imports every package of ray.dashboard.modules (Serve's,
  Train's, Data's) to pick its classes from them. The agent loads JobAgent
  alone -- the agent end of every job call -- not the Reporter, Event, Log and
  Healthz agents, which no call of a dry run reaches; metrics collection is
  off, so no Ray process waits on an exporter that is not there;
* `ray start` imports its CLI without the Serve, Jobs and State API commands
  (pandas and fastapi; Ray itself imports them in try/except and only `ray
  start` runs here), and once the head is up the process becomes (exec, same
  pid, same process group) the ``watch`` role, which waits on the Ray
  processes it started, where ``--block``'s loop keeps all of Ray resident to
  poll them;
* no autoscaler monitor: one fixed node scales nothing;
* no Ray Client server: tutorrl speaks HTTP to the Jobs API and verl's driver
  connects to the GCS, never through Ray Client;
* no log monitor: it streams Ray workers' output to their driver, and a dry
  run starts no worker (a real run keeps it: verl's TaskRunner prints its
  metrics through it);
* no prestarted workers: the raylet starts idle Python workers for the first
  driver -- the dashboard's job manager here -- and a dry run's only worker,
  the job's supervisor, is started for it anyway.

And what lies between `ray start` and a job that runs:

* `ray start` waits for its raylet to register in Ray's get_node, which asks
  the GCS once a second: this program asks every 20 ms;
* `ray start` imports the dashboard's packages to check that they import
  before it starts the dashboard; the dashboard imports them anyway, so this
  program only finds them (Ray's check runs where one is missing);
* a Ray worker starts as Ray's setup_worker.py, which imports all of Ray to
  set the runtime env's variables and then execs a second interpreter that
  imports it again: for a worker whose runtime env is variables alone (the
  job's supervisor) the ``worker`` role sets them and runs default_worker.py in
  the same process; anything else goes through Ray's own setup_worker.py;
* the agent (at its first job, when its job manager connects to Ray) and the
  supervisor import pyarrow and numpy only to register Ray's serializers for
  Arrow's types; neither passes Arrow data (NOT_IMPORTED);
* each Python process of the head imported all of Ray for itself, and the
  dashboard and its agent then their own packages, all after the GCS was up:
  the agent was the last part of the head up. Here the dashboard, the agent
  and the runtime-env agent are forks of `ray start`, made right after it
  imported Ray ("zygotes", which import their packages while `ray start`
  starts the GCS). Ray starts each of them from a command line and watches
  the process it started, so what it starts is a stand-in that hands its
  arguments, Ray's variables and its standard streams to the fork (the
  raylet's pipe on an agent's standard input is how the agent knows its
  raylet is alive: an agent whose check is by its parent's pid is not forked)
  and lives exactly as long as the fork; where a fork is not safe (a thread
  already runs), the stand-in runs the process itself.
"""
import os
import sys

# The Ray this program was read from: its setup_worker.py (the worker role), the
# zygotes' import lists and every private name below are Ray 2.60.0's. Another Ray
# keeps its own processes (``start`` checks ray.__version__ against this pin).
WORKER_RAY = "2.60.0"
# The dashboard modules a dry run's head loads, and its agent's (by class name;
# runtime/head.py passes them as the start role's two specs).
LEAN_MODULES = {"JobHead": "ray.dashboard.modules.job.job_head"}
LEAN_AGENT_MODULES = {"JobAgent": "ray.dashboard.modules.job.job_agent"}

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


def watch(pids):
    """The head once it is up (`ray start` execs this role, same pid and process group, run with -I -S):
    wait on its Ray processes, none of Ray loaded; end the head when one of them ends or when told to."""
    import signal

    pids = {int(p) for p in pids}

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
    directly: the State API's head (StateHead, a process of its own) is not started."""
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
    (on the head's path to ready). The dashboard's later call to set the list finds the
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
            # If the dashboard then fails, its exit ends the head (watch) before the head is ready.
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
        os.execv(sys.executable, [sys.executable, "-I", "-S", HERE, "watch", *map(str, pids)])

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
    # starts the dashboard and the raylet (on the head's path to ready); the dashboard
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
# serialization_addons), importing pyarrow, and numpy with it: in the agent at the first
# submission (its job manager connects then) and in each job's supervisor, before the job starts. Neither
# passes Arrow data; Ray skips the registration when pyarrow does not import.
NOT_IMPORTED = ("pyarrow",)
# The packages ray/dashboard/optional_deps.py imports (Ray 2.60), by their top-level names.
DASHBOARD_PACKAGES = ("aiohttp", "aiohttp_cors", "grpc", "opencensus", "opentelemetry", "prometheus_client",
                      "pydantic")
# What a worker's runtime env may set that an interpreter reads only as it starts.
STARTUP_ONLY = ("PYTHON", "LD_", "MALLOC_", "GLIBC_TUNABLES")
CONTEXT_KEYS = {"command_prefix", "env_vars", "py_executable", "override_worker_entrypoint", "java_jars"}


def worker(setup, args):
    """Ray's setup_worker.py for a worker whose runtime env is environment variables alone (a job's
    supervisor: the only Ray worker of a dry run), in this process. Ray's imports all of Ray to read
    its arguments, sets the variables and execs a second interpreter, which imports Ray again to run
    default_worker.py, between a job's submission and its start. Anything else -- a
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
# each imported Ray and then their packages after the GCS was up, the agent the last part of the head
# to come up.
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
    if role == "watch":
        watch(sys.argv[1:])
        return
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
