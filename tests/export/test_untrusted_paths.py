"""A bundle's folder path is the user's text and lands in every export (the
Slurm script says where to submit from, the SkyPilot task mounts it): a folder
named with a newline and shell or YAML payloads must stay one quoted value or
one comment line. The Slurm script runs under real bash with the recording
stand-ins (conftest.py); the YAML is read back with PyYAML."""

from __future__ import annotations

import pytest
import shutil

import yaml

import support
from export_helpers import export
from export_helpers import bundle_named as _bundle_named

# Each line a payload of its own: a shell command, a YAML key, command
# substitutions, a quote that would close shlex's quoting, and YAML 1.1's
# other line breaks.
FOLDER = ("proj\ntouch PWNED_LINE\nsetup: touch PWNED_SETUP\n$(touch PWNED_SUBST) `touch PWNED_TICK`"
          "'; touch PWNED_QUOTE; '\u2028run: touch PWNED_LS\x85x")


def _copied(tmp_path):
    bundle = _bundle_named("chess-tutor-grpo")
    shutil.copytree(support.BUNDLES / bundle, tmp_path / FOLDER / "bundles" / bundle)
    return bundle, f"{FOLDER}/bundles/{bundle}"


def _pwned(tmp_path) -> list[str]:
    return sorted(p.name for p in tmp_path.rglob("PWNED*"))


@pytest.mark.needs_verl
def test_slurm_script_of_a_bundle_in_a_folder_named_with_payloads_runs_none_of_them(cluster, tmp_path):
    bundle, shown = _copied(tmp_path)
    result = export(shown, "--to", "slurm", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    script = tmp_path / "job.sbatch"
    script.write_text(result.stdout)
    run = cluster.run(script, cwd=tmp_path, SLURM_SUBMIT_DIR=str(tmp_path), SLURM_JOB_ID="5",
                      SLURM_JOB_NODELIST="gpu1", STANDIN_NODES="gpu1")
    assert _pwned(tmp_path) == []
    # Every line before the code is a comment: the newline of the folder name was escaped.
    header = result.stdout.split("set -euo pipefail\n")[0].splitlines()
    assert all(line.startswith("#") for line in header), header
    # And the job still found its bundle under that name, and ran.
    assert run.returncode == 0, run.stderr
    (train,) = cluster.calls("python")
    assert train["env"]["TUTORRL_BUNDLE_DIR"] == str(tmp_path / FOLDER / "bundles" / bundle)


def test_skypilot_task_of_a_bundle_in_a_folder_named_with_payloads_has_no_extra_keys(tmp_path):
    bundle, shown = _copied(tmp_path)
    result = export(shown, "--to", "skypilot", "--accelerator", "H100", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    task = yaml.safe_load(result.stdout)
    assert sorted(task) == ["file_mounts", "name", "num_nodes", "resources", "run", "secrets"]
    assert task["secrets"] == {"RAY_AUTH_TOKEN": None}
    assert task["file_mounts"] == {f"~/tutorrl-bundles/{bundle}": shown}
    assert "touch" not in task["run"]
    # Every line before the task is one comment line.
    head = result.stdout.split("\nname: ")[0].splitlines()
    assert all(line.startswith("#") for line in head), head


def test_kuberay_documents_of_a_bundle_in_a_folder_named_with_payloads_are_only_the_two(tmp_path):
    _, shown = _copied(tmp_path)
    result = export(shown, "--to", "kuberay", "--image", "example.org/verl:0.9.1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    docs = list(yaml.safe_load_all(result.stdout))
    assert [d["kind"] for d in docs] == ["ConfigMap", "RayJob"]
    assert "touch" not in result.stdout


def _resealed(tmp_path, passthrough: str):
    """The wandb bundle with ray-job.json's secret names replaced and every digest
    recomputed: what --trust-digests accepts (with a warning), as nothing re-derives it."""
    import json

    from tutorrl.contract import CONTENT_FILES, DIGEST_FIELD
    from tutorrl.compiler.bundle.manifest import bundle_id, compute_digest, sha256

    work = tmp_path / "work"
    shutil.copytree(support.BUNDLES / _bundle_named("chess-tutor-grpo-wandb"), work)
    job = json.loads((work / "ray-job.json").read_text())
    job["metadata"]["tutorrl_passthrough"] = passthrough
    digest = compute_digest({n: (work / n).read_bytes() for n in CONTENT_FILES}, job)
    job["metadata"][DIGEST_FIELD] = digest
    (work / "ray-job.json").write_text(json.dumps(job))
    manifest = json.loads((work / "manifest.json").read_text())
    manifest["digest"] = digest
    manifest["compiler"] = "tutorrl 0.0.1"  # another release: only then does --trust-digests accept it
    manifest["files"]["ray-job.json"] = sha256((work / "ray-job.json").read_bytes())
    (work / "manifest.json").write_text(json.dumps(manifest))
    return work.rename(tmp_path / bundle_id(digest))


def test_a_bundle_accepted_on_its_digests_cannot_bring_a_command_in_as_a_secret_name(tmp_path):
    bundle = _resealed(tmp_path, "WANDB_API_KEY,X; touch PWNED_NAME; :")
    for target in (["slurm"], ["skypilot", "--accelerator", "H100"], ["kuberay", "--image", "i"]):
        result = export(str(bundle), "--to", *target, "--trust-digests", "-o", str(tmp_path / "job"), cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        assert "ray-job.json names the environment variable 'X; touch PWNED_NAME; :', which is not a name" \
            in result.stderr and "Traceback" not in result.stderr
        assert not (tmp_path / "job").exists()
