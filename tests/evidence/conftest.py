import pytest

import tutorrl.evidence.bundle as bundle_mod


@pytest.fixture(autouse=True)
def _bundles_without_compiler(monkeypatch):
    # Test bundles are hand-made (manifest.json + spec.toml); the compiler's
    # full verification is the compiler's tests' business.
    monkeypatch.setattr(bundle_mod, "_compiler_verify", lambda: None)
