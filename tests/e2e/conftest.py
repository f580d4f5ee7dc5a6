
import pytest


@pytest.fixture(autouse=True)
def _private_state_dir(tmp_path_factory, monkeypatch):
    """The index of runs (``$XDG_STATE_HOME/tutorrl/runs``) of this test, not the user's: tests
    compile the same bundle in many folders, which would make run ids ambiguous across tests."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))
