"""`tutorrl export` as a user runs it: golden outputs, verification first,
options checked per target, and nothing half-written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import support
from export_helpers import copy_bundle, export
from export_helpers import bundle_named as _bundle_named

GOLDEN = Path(__file__).parent / "golden"
CASES = {
    "kuberay": ["--image", "example.org/verl:0.9.1"],
    "skypilot": ["--accelerator", "H100"],
    "slurm": ["--partition", "gpu"],
}
EXPERIMENTS = ("chess-tutor-grpo-wandb", "chess-tutor-megatron-tp4")


@pytest.mark.parametrize("target", sorted(CASES))
@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_output_matches_the_golden_file(target, experiment, tmp_path):
    """Same bundle, same text, from any folder's copy; TUTORRL_UPDATE_GOLDEN=1 rewrites them."""
    bundle = _bundle_named(experiment)
    result = export(f"bundles/{bundle}", "--to", target, *CASES[target], cwd=support.REPO)
    assert result.returncode == 0, result.stderr
    golden = GOLDEN / f"{experiment}.{target}{'.sh' if target == 'slurm' else '.yaml'}"
    if os.environ.get("TUTORRL_UPDATE_GOLDEN") == "1":
        golden.write_text(result.stdout)
    assert result.stdout == golden.read_text(), f"{golden.name} is stale: rerun with TUTORRL_UPDATE_GOLDEN=1"
    copy_bundle(bundle, tmp_path)
    again = support.cli("export", f"bundles/{bundle}", "--to", target, *CASES[target], cwd=tmp_path,
                        env={"TZ": "Pacific/Chatham", "LC_ALL": "C", "PYTHONHASHSEED": "7"})
    assert again.returncode == 0 and again.stdout == result.stdout


def test_an_edited_bundle_is_refused_before_anything_is_written(tmp_path):
    bundle = _bundle_named("chess-tutor-grpo")
    copy_bundle(bundle, tmp_path)
    launch = tmp_path / "bundles" / bundle / "launch.sh"
    launch.write_text(launch.read_text() + "# edited by hand\n")
    out = tmp_path / "job.sbatch"
    result = export(f"bundles/{bundle}", "--to", "slurm", "-o", str(out), cwd=tmp_path)
    assert result.returncode == 2 and "launch.sh was modified" in result.stderr
    assert "Traceback" not in result.stderr and not out.exists() and result.stdout == ""


def test_output_file_is_written_whole_and_said(tmp_path):
    bundle = _bundle_named("chess-tutor-grpo")
    out = tmp_path / "task.yaml"
    result = export(f"bundles/{bundle}", "--to", "skypilot", "--accelerator", "A100", "-o", str(out),
                    cwd=support.REPO)
    assert result.returncode == 0 and result.stdout == ""
    assert out.read_text().startswith("# tutorrl export --to skypilot") and "A100:" in out.read_text()
    assert f"wrote {out}" in result.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["task.yaml"]  # no temporary file left beside it
    result = export(f"bundles/{bundle}", "--to", "slurm", "-o", str(tmp_path), cwd=support.REPO)
    assert result.returncode == 2 and "is a folder" in result.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--to", "kuberay"], "--to kuberay needs --image"),
    (["--to", "skypilot"], "--to skypilot needs --accelerator"),
    (["--to", "slurm", "--image", "x"], "--image is for --to kuberay or skypilot, not --to slurm"),
    (["--to", "skypilot", "--accelerator", "H100", "--secret", "s"], "--secret is for --to kuberay"),
    (["--to", "kuberay", "--image", "x", "--secret", "Not_A_Name"], "is not a Kubernetes Secret name"),
    (["--to", "slurm", "--partition", "gpu; rm -rf /"], "--partition 'gpu; rm -rf /'"),
])
def test_options_are_checked_per_target(args, message):
    result = export(f"bundles/{_bundle_named('chess-tutor-grpo')}", *args, cwd=support.REPO)
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == ""


def test_a_spec_given_for_a_bundle_is_named_with_the_command_to_run():
    result = export("specs/chess_tutor_grpo.toml", "--to", "slurm", cwd=support.REPO)
    assert result.returncode == 2 and "is a spec file, not a bundle folder" in result.stderr
    assert "tutorrl compile specs/chess_tutor_grpo.toml" in result.stderr
