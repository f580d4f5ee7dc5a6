"""Stand-ins for what only a cluster has (Slurm's srun and scontrol, the `ray`
command, the job's Python with verl), so the exported scripts run under real
bash on this machine. Each records what it was asked, to a JSON-lines log, in
the terms of the documented contract it stands in for; nothing here decides
whether an export is right -- the tests do, from the log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


_PYTHON = '''#!{python}
"""The job's Python: verl {verl} installed, tutorrl installed (the real one), training recorded."""
import json, os, subprocess, sys
log = os.environ["STANDIN_LOG"]
def record(kind):
    token = os.environ.get("RAY_AUTH_TOKEN_PATH")  # what Ray would read, at the moment it would read it
    token = open(token).read() if token and os.path.isfile(token) else None
    with open(log, "a", encoding="utf-8") as f:
        f.write(json.dumps({{"kind": kind, "argv": sys.argv[1:], "cwd": os.getcwd(), "env": dict(os.environ),
                             "token": token}}) + "\\n")
args = sys.argv[1:]
if args[:1] == ["-c"] and "m.version(\\"verl\\")" in args[1]:
    print("{verl}")
elif args[:1] == ["-c"] and "ray.init" in args[1]:
    record("wait-nodes")  # Ray's GCS answering with every node alive
elif args[:1] == ["-c"] or args[:2] == ["-m", "tutorrl"]:
    # tutorrl's own checks run for real, with the real interpreter.
    raise SystemExit(subprocess.run([{python!r}, *args]).returncode)
else:
    record("python")
'''

_RECORDER = '''#!{python}
"""{what}: records its argv."""
import json, os, subprocess, sys
args = sys.argv[1:]
with open(os.environ["STANDIN_LOG"], "a", encoding="utf-8") as f:
    f.write(json.dumps({{"kind": "{name}", "argv": args, "cwd": os.getcwd(),
                         "env": {{k: v for k, v in os.environ.items() if k.startswith(("TUTORRL_", "WANDB", "RAY_"))}}}}) + "\\n")
{body}
'''

# srun: options up to the command, then the step on the named node. `hostname`
# answers the node's address; `bash` (the job step) runs here for real.
_SRUN_BODY = '''
i = 0
while i < len(args) and args[i].startswith("-"):
    i += 2 if args[i] == "-w" else 1
cmd = args[i:]
if cmd[:1] == ["hostname"]:
    print("127.0.0.1")
elif cmd[:1] == ["bash"]:
    raise SystemExit(subprocess.run(cmd).returncode)
elif cmd[:1] == ["ray"]:
    raise SystemExit(subprocess.run(cmd).returncode)
'''
_SCONTROL_BODY = '''
if args[:2] == ["show", "hostnames"]:
    print("\\n".join(os.environ["STANDIN_NODES"].split(",")))
'''


class Cluster:
    """A folder of stand-ins and the log they write."""

    def __init__(self, folder: Path, verl: str = "0.9.1"):
        self.bin = folder / "bin"
        self.bin.mkdir()
        self.log = folder / "calls.jsonl"
        self._write("python", _PYTHON.format(python=sys.executable, verl=verl))
        self._write("srun", _RECORDER.format(python=sys.executable, what="Slurm's srun", name="srun",
                                             body=_SRUN_BODY))
        self._write("scontrol", _RECORDER.format(python=sys.executable, what="Slurm's scontrol",
                                                 name="scontrol", body=_SCONTROL_BODY))
        self._write("ray", _RECORDER.format(python=sys.executable, what="Ray's `ray start`", name="ray", body=""))

    def _write(self, name: str, text: str, folder: Path | None = None) -> None:
        path = (folder or self.bin) / name
        path.write_text(text)
        path.chmod(0o755)

    def sky_template(self, home: Path) -> None:
        """SkyPilot's Ray template, ~/sky_templates/ray/start_cluster, on a node whose HOME is ``home``:
        records the environment it is steered by (RAY_HEAD_PORT, RAY_DASHBOARD_AGENT_LISTEN_PORT, ...)."""
        folder = home / "sky_templates" / "ray"
        folder.mkdir(parents=True, exist_ok=True)
        self._write("start_cluster", _RECORDER.format(python=sys.executable, what="SkyPilot's Ray template",
                                                      name="start_cluster", body=""), folder)

    def env(self, **extra: str) -> dict:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("TUTORRL_", "SLURM_", "SKYPILOT_", "RAY_", "WANDB"))}
        env.update(PATH=f"{self.bin}{os.pathsep}{env['PATH']}", STANDIN_LOG=str(self.log), **extra)
        return env

    def run(self, script: str | Path, cwd: Path, *args: str, **extra: str) -> subprocess.CompletedProcess:
        if self.log.exists():
            self.log.unlink()
        return subprocess.run(["bash", str(script), *args], cwd=cwd, env=self.env(**extra), capture_output=True,
                              text=True, timeout=120)

    def calls(self, kind: str | None = None) -> list[dict]:
        if not self.log.exists():
            return []
        rows = [json.loads(line) for line in self.log.read_text().splitlines()]
        return [r for r in rows if kind is None or r["kind"] == kind]


@pytest.fixture
def cluster(tmp_path) -> Cluster:
    return Cluster(tmp_path)


