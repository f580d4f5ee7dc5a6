"""The SkyPilot export's `run:` with SkyPilot's own Ray template, for real: the
template (``sky_templates/ray/start_cluster``) is taken from the skypilot
0.14.1 wheel (downloaded with pip, not installed; skipped with pip's reason
where no index answers) and put where SkyPilot puts it on a node,
``~/sky_templates/ray/``. The node is this machine, rank 0 of one
(``SKYPILOT_*`` as SkyPilot sets them), its HOME holding a stale
``~/.ray/auth_token``; Ray is this venv's.

What stands in: ``uv`` (the template pins Ray with ``uv pip install``; the
node's image already has it), and verl's trainer, replaced by a driver that
connects to the cluster from launch.sh's environment as verl's ``ray.init()``
does and prints what it sees. Run twice, as ``sky exec`` would: the second
time the template finds the user's Ray running and starts nothing, and the
job still runs. Every Ray process the template started carries a marker in
its environment and is ended by id, on failure too. About 100 s on the
2-core development machine (two Ray starts' worth of clients, and the
template's own 5 s pause).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest
import yaml

import support
from export_helpers import bundle_named, export

pytestmark = [pytest.mark.slow, pytest.mark.wheels]

SKYPILOT = "skypilot==0.14.1"
TEMPLATE = "sky_templates/ray/start_cluster"
MARKER = "TUTORRL_TEST_SKY_TEMPLATE"
# The node's address: loopback, but not 127.0.0.1, which `ray start` replaces by the machine's
# routable address (support.RayNodes says why).
NODE_IP = "127.0.0.2"

# verl's trainer's place: connect as its ray.init() does (RAY_ADDRESS, the token from the environment).
DRIVER = ("import os, ray; ray.init(logging_level='ERROR'); alive = [n for n in ray.nodes() if n['Alive']]; "
          "print('driver: %s, %d node(s), %g GPU' % (os.environ['RAY_ADDRESS'], len(alive), "
          "ray.cluster_resources().get('GPU', 0)))")
PYTHON = f"""#!/bin/sh
# The job's Python: this venv's, but verl's trainer is a driver that connects and reports.
if [ "$1" = "-m" ] && [ "$2" = "verl.trainer.main_ppo" ]; then
  exec {sys.executable} -c "{DRIVER}"
fi
exec {sys.executable} "$@"
"""


@pytest.fixture
def node():
    root = Path(tempfile.mkdtemp(prefix="tsk-", dir="/tmp"))  # short: Ray's AF_UNIX paths live below it
    try:
        wheels = root / "wheels"
        got = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                              "--no-deps", "-d", str(wheels), SKYPILOT], capture_output=True, text=True, timeout=300)
        if got.returncode != 0:
            pytest.skip(f"pip could not download {SKYPILOT} (exit {got.returncode}): {got.stderr[-400:]}")
        (wheel,) = wheels.glob("skypilot-*.whl")
        home = root / "home"
        (home / "sky_templates" / "ray").mkdir(parents=True)
        with zipfile.ZipFile(wheel) as zf:
            (home / TEMPLATE).write_bytes(zf.read(TEMPLATE))
        (home / TEMPLATE).chmod(0o755)
        yield root
    finally:
        for pid in support.procs_with_env(MARKER, str(root)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(root, ignore_errors=True)


def test_the_task_starts_ray_with_skypilots_template_and_can_run_again(node):
    home, bin_dir = node / "home", node / "bin"
    bin_dir.mkdir()
    (home / ".ray").mkdir()
    (home / ".ray" / "auth_token").write_text("left-by-an-earlier-ray-init")
    bundle = bundle_named("chess-tutor-grpo")
    shutil.copytree(support.BUNDLES / bundle, home / "tutorrl-bundles" / bundle)  # what file_mounts does
    result = export(f"bundles/{bundle}", "--to", "skypilot", "--accelerator", "H100", cwd=support.REPO)
    assert result.returncode == 0, result.stderr
    task = yaml.safe_load(result.stdout)
    (node / "run.sh").write_text(task["run"])
    (bin_dir / "uv").write_text("#!/bin/sh\necho \"uv (the node image has Ray): $*\"\n")
    (bin_dir / "python").write_text(PYTHON)
    for name in ("uv", "python"):
        (bin_dir / name).chmod(0o755)
    head, dashboard, agent = support.free_ports(3)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "SKYPILOT_", "TUTORRL_"))}
    env.update(PATH=f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env['PATH']}",
               HOME=str(home), TMPDIR=str(node), TUTORRL_PYTHON=str(bin_dir / "python"),
               SKYPILOT_NODE_RANK="0", SKYPILOT_NODE_IPS=NODE_IP, SKYPILOT_NUM_NODES="1",
               SKYPILOT_NUM_GPUS_PER_NODE=task["resources"]["accelerators"].split(":")[1],
               RAY_AUTH_TOKEN=secrets.token_hex(32),  # the task's secret
               RAY_HEAD_PORT=str(head), RAY_DASHBOARD_PORT=str(dashboard),
               RAY_DASHBOARD_AGENT_LISTEN_PORT=str(agent), RAY_HEAD_IP_ADDRESS=NODE_IP,  # loopback only
               RAY_USAGE_STATS_ENABLED="0", **{MARKER: str(node)})

    def run():
        return subprocess.run(["bash", str(node / "run.sh")], cwd=home, env=env, capture_output=True, text=True,
                              timeout=300)

    first = run()
    out = first.stdout + first.stderr
    assert first.returncode == 0, out[-4000:]
    assert "Starting Ray head node..." in out and "Head node started successfully." in out
    assert f"driver: {NODE_IP}:{head}, 1 node(s), 8 GPU" in first.stdout

    again = run()
    out = again.stdout + again.stderr
    assert again.returncode == 0, out[-4000:]
    assert "Ray cluster is already running." in out and "Starting Ray head node..." not in out
    assert f"driver: {NODE_IP}:{head}, 1 node(s), 8 GPU" in again.stdout
    assert (home / ".ray" / "auth_token").read_text() == "left-by-an-earlier-ray-init"
