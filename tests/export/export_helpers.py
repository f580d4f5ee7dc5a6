"""Helpers for the export tests (a module of its own: see tests/runtime/runtime_helpers.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import support


def copy_bundle(name: str, into: Path) -> Path:
    """A committed bundle copied into ``into/bundles/<id>``, as a user's project holds it."""
    dest = into / "bundles" / name
    shutil.copytree(support.BUNDLES / name, dest)
    return dest


def export(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return support.cli("export", *args, cwd=cwd)
