"""Shared fixtures. Helpers used across test folders live in ``support.py``."""

from __future__ import annotations

import atexit
import importlib.util
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import support  # noqa: E402
from hypothesis import settings  # noqa: E402

pytest_plugins = ["pytester"]  # tests/cli/test_markers.py runs the marker hooks below in a pytest of their own

# No test reads the releases its user added with `tutorrl keys add` (their data folder): every run gets an empty
# one of its own, which subprocesses inherit; a test that adds a release points TUTORRL_DATA_DIR elsewhere itself.
_DATA_DIR = Path(tempfile.mkdtemp(prefix="tutorrl-test-data-"))
os.environ["TUTORRL_DATA_DIR"] = str(_DATA_DIR)
atexit.register(shutil.rmtree, _DATA_DIR, ignore_errors=True)

# No property test is a timing test: hypothesis's default 200 ms deadline per example fails a correct
# test on a loaded 2-core machine (CI's), where one example took 276 ms once and 0.02 ms the next time.
settings.register_profile("tutorrl", deadline=None)
settings.load_profile("tutorrl")


# -- the needs_* markers: what a test needs from its environment, and the run that lacks it ----------------------
#
# A test marked needs_verl, needs_ray, needs_torch or needs_train_env is deselected (never failed, never skipped) where what it
# needs is absent, and the count and the reason are reported; a core environment (`pip install -e .` plus pytest)
# then runs everything else. The full tier (`bash tools/dev.sh test`, which passes --full) deselects nothing: there a
# missing verl, Ray or training environment fails each test that needs it.

# The module each marker needs importable.
NEEDED_MODULES = {"needs_verl": "verl", "needs_ray": "ray", "needs_torch": "torch"}
# The variables `tools/dev.sh test` sets to the training environments it builds; needs_train_env(*names) names them.
TRAIN_ENV_VARS = ("TUTORRL_TRAIN_PYTHON", "TUTORRL_TRAIN091_PYTHON", "TUTORRL_SGLANG_CPU_PYTHON",
                  "TUTORRL_TRAIN_SGLANG_PYTHON", "TUTORRL_SKYPILOT_PYTHON", "TUTORRL_TINY_DIR")


def _module_missing(name: str) -> str | None:
    try:
        found = importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        found = False
    return None if found else f"{name} is not importable in this Python ({sys.executable})"


def _train_env_missing(names: tuple[str, ...]) -> str | None:
    unknown = [n for n in names if n not in TRAIN_ENV_VARS]
    if unknown or not names:
        raise pytest.UsageError(f"needs_train_env names one or more of {TRAIN_ENV_VARS}, not {names or 'none'}")
    unset = [n for n in names if not os.environ.get(n) or not os.path.exists(os.environ[n])]
    return f"{' and '.join(unset)} not set to an existing path (tools/dev.sh test builds them)" if unset else None


def missing_needs(item) -> list[tuple[str, str]]:
    """(marker, why) for each needs_* marker of ``item`` whose need this run lacks."""
    out = []
    for mark in item.iter_markers():
        if mark.name in NEEDED_MODULES:
            why = _module_missing(NEEDED_MODULES[mark.name])
        elif mark.name == "needs_train_env":
            why = _train_env_missing(tuple(mark.args))
        else:
            continue
        if why and (mark.name, why) not in out:
            out.append((mark.name, why))
    return out


_DESELECTED = pytest.StashKey[tuple]()  # (count, {(marker, why): count}) of this run's deselection


def pytest_addoption(parser):
    parser.addoption("--full", action="store_true",
                     help="the full tier: deselect nothing for a missing verl, Ray or training environment "
                          "(each test that needs one fails instead); tools/dev.sh test passes it")


@pytest.hookimpl(trylast=True)  # after -m and -k: the count is of tests this run would otherwise have run
def pytest_collection_modifyitems(config, items):
    if config.getoption("--full"):
        return
    keep, dropped = [], []
    reasons: dict[tuple[str, str], int] = {}
    for item in items:
        missing = missing_needs(item)
        if not missing:
            keep.append(item)
            continue
        dropped.append(item)
        for need in missing:
            reasons[need] = reasons.get(need, 0) + 1
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
    config.stash[_DESELECTED] = (len(dropped), reasons)


def pytest_runtest_setup(item):
    if item.config.getoption("--full"):
        missing = missing_needs(item)
        if missing:
            pytest.fail("the full tier needs what this test is marked with: "
                        + "; ".join(f"{name}: {why}" for name, why in missing), pytrace=False)


def pytest_report_collectionfinish(config, start_path, items):
    return _deselection_lines(config)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    for line in _deselection_lines(config):
        terminalreporter.write_line(line)


def _deselection_lines(config) -> list[str]:
    if config.getoption("--full"):
        return ["needs_* markers: the full tier (--full): nothing is deselected for a missing dependency"]
    count, reasons = config.stash.get(_DESELECTED, (0, {}))
    if not count:
        return []
    lines = [f"needs_* markers: {count} tests deselected, their needs absent here (bash tools/dev.sh test runs them):"]
    lines += [f"  {name}: {n} ({why})" for (name, why), n in sorted(reasons.items())]
    return lines


@pytest.fixture
def standin_python(tmp_path_factory):
    """A folder holding a stand-in ``python`` that records its argv."""
    return support.StandinPython(tmp_path_factory.mktemp("standin"))


@pytest.fixture(scope="session")
def example_specs() -> list[Path]:
    return support.example_specs()


@pytest.fixture(autouse=True)
def _environment_restored():
    """Each test ends with the environment it began with. Commands run in-process (`cli.main`)
    may set variables for the processes they start (`--trust-digests` once set TUTORRL_TRUST_DIGESTS
    for a detached supervisor); left set, one made the next test's bundle check pass or fail by order."""
    saved = dict(os.environ)
    yield
    if dict(os.environ) != saved:
        os.environ.clear()
        os.environ.update(saved)
