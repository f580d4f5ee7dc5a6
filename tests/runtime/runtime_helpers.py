"""Helpers for the runtime tests: run the real `tutorrl` command, watch processes.

A module of its own, not conftest.py: several test folders have a conftest,
and `from conftest import` would get whichever was imported first.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

# procs_with_env lives in support.py (the export tests use it too); the run tests import it from here.
from support import procs_with_env, wait_until  # noqa: F401

TUTORRL = [sys.executable, "-m", "tutorrl"]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")}
    # These runs start stand-in launch scripts or dry runs, not verl's trainer,
    # in a CPU environment without a rollout engine: the stack check would refuse
    # every real run. test_stack.py runs it, through the CLI too.
    env["TUTORRL_STACK_CHECK"] = "skip"
    # make_bundle reseals bundles around stand-in launch scripts: they cannot be
    # re-derived from their spec, and `tutorrl run` accepts them only so.
    env["TUTORRL_TRUST_DIGESTS"] = "1"
    env.update(extra)
    return env


def run_tutorrl(args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 240):
    return subprocess.run([*TUTORRL, *args], cwd=cwd, env=env or clean_env(), capture_output=True, text=True,
                          timeout=timeout)


def wait_for(predicate, timeout: float, what: str, interval: float = 0.2):
    return wait_until(predicate, timeout, what, interval=interval)


# Shared by the run tests: a launch.sh that prints what the job and its workers see.
SECRET = "pw-4f1c9e$weird"

ECHO_LAUNCH = """#!/usr/bin/env bash
set -euo pipefail
echo "driver A=[$A]"
echo "driver secret=[$MY_SECRET]"
python - <<'PY'
import os, ray
ray.init()
print("worker A=[%s]" % ray.get(ray.remote(lambda: os.environ["A"]).remote()))
# verl's TaskRunner reads data and writes checkpoints from a Ray worker.
print("worker cwd=[%s]" % ray.get(ray.remote(lambda: os.getcwd()).remote()))
# What verl's checkpoint callback (in a Ray actor) needs to find the bundle.
print("worker evidence=[%s|%s]" % ray.get(ray.remote(
    lambda: (os.environ.get("TUTORRL_BUNDLE_DIR", ""), os.environ.get("TUTORRL_RUN_ID", ""))).remote()))
# Secrets reach workers (wandb logs from verl's TaskRunner) ...
print("worker secret same=[%s]" % (ray.get(ray.remote(lambda: os.environ.get("MY_SECRET")).remote())
                                   == os.environ.get("MY_SECRET")))
# ... but not through the runtime_env Ray keeps for the job (what its Jobs API returns).
import json
print("job runtime_env=[%s]" % json.dumps(ray.get_runtime_context().runtime_env, sort_keys=True))
PY
"""


def records_of(bundle: Path) -> list[dict]:
    """Every run.json under a bundle's runs/, as plain data."""
    return [json.loads(p.read_text()) for p in sorted(bundle.glob("runs/*/run.json"))]


# Above the kernel's pid_max: never a live process.
DEAD_PID = 2**22 + 12345


def crafted_record(**changes) -> dict:
    """A run.json as plain data, for records written by hand (not sealed by tutorrl)."""
    base = dict(schema=1, run_id="tutorrl-abcd-1", bundle="sha256:" + "0" * 64, submission_id="tutorrl-abcd-1",
                attempt=1, address_kind="embedded", address="embedded", dry_run=False,
                versions={"tutorrl": "0", "ray": "2.60.0", "python": "3.11"}, started="2026-01-01T00:00:00.000Z",
                status="running", submitted=True,
                owner={"host": socket.gethostname(), "pid": DEAD_PID, "start": 1})
    base.update(changes)
    return base
