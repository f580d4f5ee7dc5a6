"""`tutorrl verify` refuses any edited, missing, extra or renamed bundle file."""

from __future__ import annotations

import re
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


@pytest.mark.parametrize("name", [".hidden", "...", ".0000000000000000"])
def test_a_hidden_folder_name_is_checked_like_any_other(bundle, tmp_path, name):
    moved = tmp_path / name
    shutil.copytree(bundle, moved)
    with pytest.raises(BundleError, match=f"the folder is named {re.escape(name)}, but the digest says"):
        verify_bundle(moved)


def test_verify_dot_inside_the_bundle_checks_the_folders_real_name(bundle, tmp_path):
    ok = support.cli("verify", ".", cwd=bundle)
    assert ok.returncode == 0, ok.stderr
    assert support.cli("verify", f"../{bundle.name}/.", cwd=bundle).returncode == 0
    moved = tmp_path / "renamed"
    shutil.copytree(bundle, moved)
    bad = support.cli("verify", ".", cwd=moved)
    assert bad.returncode == 2 and "the folder is named renamed" in bad.stderr


def test_cli_exit_codes(bundle):
    ok = support.cli("verify", str(bundle))
    assert ok.returncode == 0 and "ok:" in ok.stdout
    (bundle / "spec.toml").write_text((bundle / "spec.toml").read_text() + "\n")
    bad = support.cli("verify", str(bundle))
    assert bad.returncode == 2 and "spec.toml was modified" in bad.stderr and "Traceback" not in bad.stderr
    missing = support.cli("verify", str(bundle.parent / "nope"))
    assert missing.returncode == 2 and "no such bundle folder" in missing.stderr


@pytest.mark.parametrize("make", ["folder", "fifo", "link to /dev/zero"])
def test_a_manifest_that_is_not_a_file_is_named_never_read_without_end(bundle, make):
    import os

    manifest = bundle / "manifest.json"
    manifest.unlink()
    if make == "folder":
        manifest.mkdir()
    elif make == "fifo":
        os.mkfifo(manifest)  # no writer: a blocking open would wait for ever
    else:
        manifest.symlink_to("/dev/zero")
    with pytest.raises(BundleError, match="manifest.json: is"):
        verify_bundle(bundle)
    result = support.cli("verify", str(bundle))
    assert result.returncode == 2 and "manifest.json: is" in result.stderr and "Traceback" not in result.stderr


def _reseal_job(bundle, data: bytes) -> None:
    """ray-job.json replaced and its sha256 put in the manifest: only the structure can catch it."""
    import json

    from tutorrl.compiler.bundle.manifest import canonical_json, sha256

    (bundle / "ray-job.json").write_bytes(data)
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["files"]["ray-job.json"] = sha256(data)
    (bundle / "manifest.json").write_bytes(canonical_json(manifest))


@pytest.mark.parametrize("data,words", [
    (b'{"a":' * 50_000 + b"1" + b"}" * 50_000, "nested deeper than"),
    (b'{"a": ' + b"9" * 5000 + b"}", "ray-job.json"),
    (b"[1, 2]", "not a JSON object"),
    (b'{"metadata": []}', "names another bundle digest"),
])
def test_a_hostile_ray_job_json_is_a_failed_verification(bundle, data, words):
    _reseal_job(bundle, data)
    with pytest.raises(BundleError, match=words):
        verify_bundle(bundle)
    result = support.cli("verify", str(bundle))
    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_the_manifests_compiler_claim_reaches_the_terminal_escaped(bundle, tmp_path):
    """A bundle claiming another compiler is still re-derived (the claim decides nothing), and the
    note quoting the claim cannot move the cursor or reorder the line: whoever sealed it wrote it."""
    from tutorrl.compiler.bundle.manifest import seal
    from tutorrl.contract import CONTENT_FILES

    loaded = verify_bundle(bundle)
    m = loaded.manifest
    files = {n: (bundle / n).read_bytes() for n in CONTENT_FILES if n != "ray-job.json"}
    forged = seal(files, loaded.job, experiment=m.experiment, verl=m.verl, variant=m.variant,
                   keymap_digest=m.keymap_digest, reward_plugin=m.reward_plugin,
                   compiler="tutorrl 0.0.9\x1b[2K\x1b[1A\rok: all good\u202e")
    path = write_bundle(forged, tmp_path / "forged").path
    for argv in (["verify", str(path)], ["export", str(path), "--to", "slurm"]):
        result = support.cli(*argv)
        assert "re-derives the same launch" in result.stderr  # proven by re-derivation, whatever it claims
        assert "\x1b" not in result.stderr and "\r" not in result.stderr and "\u202e" not in result.stderr
        assert "\\x1b[2K" in result.stderr
