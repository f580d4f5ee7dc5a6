"""Evidence tests never see the developer's own signing key: each test gets an
empty config folder and no TUTORRL_EVIDENCE_KEY, so a record is signed only
where the test makes a key."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_ambient_signing_key(monkeypatch, tmp_path_factory):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg-config")))
    monkeypatch.delenv("TUTORRL_EVIDENCE_KEY", raising=False)
