"""Helpers for the runtime tests: run the real `tutorrl` command, watch processes.

A module of its own, not conftest.py: several test folders have a conftest,
and `from conftest import` would get whichever was imported first.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

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


def procs_with_env(name: str, value: str) -> list[int]:
    """PIDs whose environment has name=value (leak check for a run's Ray processes)."""
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


def wait_for(predicate, timeout: float, what: str, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)
