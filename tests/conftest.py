"""Shared fixtures. Helpers used across test folders live in ``support.py``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import support  # noqa: E402
from hypothesis import settings  # noqa: E402

# No property test is a timing test: hypothesis's default 200 ms deadline per example fails a correct
# test on a loaded 2-core machine (CI's), where one example took 276 ms once and 0.02 ms the next time.
settings.register_profile("tutorrl", deadline=None)
settings.load_profile("tutorrl")


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
    may set variables for the processes they start (`--trust-digests` sets TUTORRL_TRUST_DIGESTS
    for a detached supervisor); left set, one made the next test's bundle check pass or fail by order."""
    saved = dict(os.environ)
    yield
    if dict(os.environ) != saved:
        os.environ.clear()
        os.environ.update(saved)
