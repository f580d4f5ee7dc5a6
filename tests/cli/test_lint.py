"""Lint and type checks, run as tests (their configuration is pyproject.toml's [tool.ruff] and [tool.mypy]).

ruff checks the package and its tests. mypy checks the package as it installs
(``tutorrl.compiler`` is ``compiler/``...: the folders are not import names, so
the check runs over a tree of links laid out as the installed namespace, under
build/) -- strict on the public API and its structs, mypy's default elsewhere
-- and ``typing_api_uses.py``, the public API as a user's typed code calls it,
with ``--strict`` (as msgspec checks its stubs).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
USES = Path(__file__).with_name("typing_api_uses.py")
RUFF_PATHS = ("tutorrl", "compiler", "runtime", "evidence", "review", "importer", "export", "plugins", "templates",
              "tests")


def _tool(name: str) -> list[str]:
    done = subprocess.run([sys.executable, "-m", name, "--version"], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"{name} is not installed in this environment: it is in tutorrl's [test] extra "
                    f"(pip install -e '.[test]')")
    return [sys.executable, "-m", name]


def test_ruff_passes_on_the_package_and_its_tests():
    done = subprocess.run([*_tool("ruff"), "check", "--no-cache", *RUFF_PATHS], cwd=REPO, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def _namespace(root: Path) -> Path:
    """``root/tutorrl``: links laid out as the installed package (pyproject's package-dir)."""
    package_dir = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["package-dir"]
    tree = root / "tutorrl"
    tree.mkdir(parents=True, exist_ok=True)
    wanted = {entry.name: entry for entry in (REPO / "tutorrl").iterdir() if entry.name != "__pycache__"}
    for name, folder in package_dir.items():
        parts = name.split(".")
        if len(parts) == 2:  # tutorrl.compiler = "compiler": the nested ones come with their folder
            wanted[parts[1]] = REPO / folder
    for name in {p.name for p in tree.iterdir()} - set(wanted):
        (tree / name).unlink()
    for name, target in wanted.items():
        link = tree / name
        if not (link.is_symlink() and os.readlink(link) == str(target)):
            if link.is_symlink():
                link.unlink()
            link.symlink_to(target)
    return root


@pytest.mark.slow
def test_mypy_passes_on_the_package_and_on_typed_uses_of_its_api():
    # Under build/ (ignored), kept between runs: mypy's cache makes the next check incremental.
    root = _namespace(REPO / "build" / "typecheck")
    mypy = _tool("mypy")
    common = ["--config-file", str(REPO / "pyproject.toml"), "--python-executable", sys.executable]
    env = {**os.environ, "MYPYPATH": str(root)}
    done = subprocess.run([*mypy, *common, "--cache-dir", str(root / ".mypy_cache"), "-p", "tutorrl"], cwd=root,
                          env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    # A cache of its own: the package's cache holds it checked with other options.
    done = subprocess.run([*mypy, *common, "--cache-dir", str(root / ".mypy_cache_uses"), "--strict", "--no-warn-unused-configs",
                           "--follow-imports", "silent", str(USES)], cwd=root, env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
