"""Shared fixtures. Helpers used across test folders live in ``support.py``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import support  # noqa: E402


@pytest.fixture
def standin_python(tmp_path_factory):
    """A folder holding a stand-in ``python`` that records its argv."""
    return support.StandinPython(tmp_path_factory.mktemp("standin"))


@pytest.fixture(scope="session")
def example_specs() -> list[Path]:
    return support.example_specs()
