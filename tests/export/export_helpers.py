"""Helpers for the export tests (a module of its own: see tests/runtime/runtime_helpers.py)."""

from __future__ import annotations

import json
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


# The committed example bundles, by folder name.
BUNDLES = sorted(p.name for p in support.BUNDLES.iterdir() if (p / "manifest.json").is_file())


def bundle_named(experiment: str) -> str:
    """The committed bundle whose manifest names this experiment."""
    for name in BUNDLES:
        if json.loads((support.BUNDLES / name / "manifest.json").read_text())["experiment"] == experiment:
            return name
    raise AssertionError(experiment)
