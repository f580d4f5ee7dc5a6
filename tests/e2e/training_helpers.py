"""Shared by the real-training tests (verl 0.5.0 and 0.9.1 on the CPU): the environment they need,
the `tutorrl` command they run, and verl's console lines they read. A module of its own: tests
import no other test module."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

# verl's console logger, after Ray's "(TaskRunner pid=N) " prefix (coloured: the escapes are removed first).
STEP_LINE = re.compile(r"(?:^|\) )step:(\d+) - (.*)$", re.M)
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def training_env(python_var: str, ready: str, what: str) -> tuple[str, Path]:
    """(the training Python, the tiny assets folder), or a failure naming how to set them up.

    ``ready`` is a file under the assets folder that exists once they are complete."""
    python, tiny = os.environ.get(python_var), os.environ.get("TUTORRL_TINY_DIR")
    if not python or not tiny or not os.path.isfile(python) or not os.path.isfile(os.path.join(tiny, ready)):
        pytest.fail(f"{what} is not set up: `bash tools/dev.sh test` builds it and sets {python_var} and "
                    "TUTORRL_TINY_DIR (tools/cpu_training/)")
    return python, Path(tiny)


def tutorrl(*args: str, cwd: Path, env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    """The real `tutorrl` command, without the Ray variables of the shell that runs the tests."""
    full = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "TUTORRL_EMBEDDED"))}
    outer = full.get("PYTHONPATH")
    full.update(env or {})
    if outer and env and "PYTHONPATH" in env:
        # A test's own entries first, then the shell's: a worktree's tutorrl put first on the path
        # (tests/README.md) stays the one every command runs.
        full["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], outer])
    return subprocess.run([sys.executable, "-m", "tutorrl", *args], cwd=cwd, env=full, capture_output=True,
                          text=True, timeout=timeout)


def metrics(log: str) -> dict[int, dict[str, str]]:
    """verl's logged metrics by step, from its console lines in a job's log."""
    out = {}
    for step, rest in STEP_LINE.findall(ANSI.sub("", log)):
        out[int(step)] = dict(part.split(":", 1) for part in rest.strip().split(" - ") if ":" in part)
    return out
