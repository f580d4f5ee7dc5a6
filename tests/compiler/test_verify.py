"""`tutorrl verify` refuses any edited, missing, extra or renamed bundle file."""

from __future__ import annotations

import shutil

import pytest

import support
from tutorrl.compiler import compile_bytes, verify_bundle, write_bundle
from tutorrl.errors import BundleError

SPEC = support.SPECS / "chess_tutor_wandb.toml"


@pytest.fixture
def bundle(tmp_path):
    return write_bundle(compile_bytes(SPEC.read_bytes(), "w.toml"), tmp_path).path


def test_intact_bundle_verifies(bundle):
    loaded = verify_bundle(bundle)
    assert loaded.spec.experiment.name == "chess-tutor-grpo-wandb"
    assert loaded.job["metadata"]["tutorrl_bundle"] == loaded.digest
    (bundle / "runs").mkdir()
    (bundle / "evidence").mkdir()
    verify_bundle(bundle)  # appended folders are outside the digest


@pytest.mark.parametrize("name", ["launch.sh", "bundle.env", "ray-job.json", "spec.toml"])
def test_every_single_byte_edit_is_caught(bundle, name):
    path = bundle / name
    data = path.read_bytes()
    for offset in range(0, len(data), max(1, len(data) // 40)):
        edited = bytearray(data)
        edited[offset] ^= 0x01
        path.write_bytes(bytes(edited))
        with pytest.raises(BundleError, match=name):
            verify_bundle(bundle)
    path.write_bytes(data)
    verify_bundle(bundle)


def test_edit_with_a_matching_manifest_is_still_caught(bundle):
    """Re-hashing the edited file into the manifest does not make it the bundle its digest names."""
    import hashlib
    import json

    launch = bundle / "launch.sh"
    launch.write_text(launch.read_text().replace("trainer.save_freq=20", "trainer.save_freq=1"))
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["files"]["launch.sh"] = hashlib.sha256(launch.read_bytes()).hexdigest()
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match="do not hash to the manifest's digest"):
        verify_bundle(bundle)


def test_missing_extra_and_renamed(bundle, tmp_path):
    (bundle / "notes.txt").write_text("hi")
    with pytest.raises(BundleError, match="unexpected file notes.txt"):
        verify_bundle(bundle)
    (bundle / "notes.txt").unlink()
    moved = tmp_path / "0000000000000000"
    shutil.copytree(bundle, moved)
    with pytest.raises(BundleError, match="folder is named"):
        verify_bundle(moved)
    (bundle / "bundle.env").unlink()
    with pytest.raises(BundleError, match="bundle.env is missing"):
        verify_bundle(bundle)
    (bundle / "manifest.json").unlink()
    with pytest.raises(BundleError, match="not a tutorrl bundle"):
        verify_bundle(bundle)


def test_cli_exit_codes(bundle):
    ok = support.cli("verify", str(bundle))
    assert ok.returncode == 0 and "ok:" in ok.stdout
    (bundle / "spec.toml").write_text((bundle / "spec.toml").read_text() + "\n")
    bad = support.cli("verify", str(bundle))
    assert bad.returncode == 2 and "spec.toml was modified" in bad.stderr and "Traceback" not in bad.stderr
    missing = support.cli("verify", str(bundle.parent / "nope"))
    assert missing.returncode == 2 and "no such bundle folder" in missing.stderr
