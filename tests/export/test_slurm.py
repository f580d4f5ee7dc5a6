"""`tutorrl export --to slurm`: verl's Ray-on-Slurm recipe as a batch script,
run with real bash; srun and scontrol are stand-ins that record each step
(conftest.py), so the test reads which node got which `ray start` and where
launch.sh ran."""

from __future__ import annotations

import subprocess

import support
from export_helpers import copy_bundle, export
from export_helpers import BUNDLES, bundle_named as _bundle_named


def _script(bundle: str, cwd=support.REPO, *args: str) -> str:
    result = export(f"bundles/{bundle}", "--to", "slurm", *args, cwd=cwd)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_every_committed_bundle_exports_a_script_bash_accepts():
    for bundle in BUNDLES:
        text = _script(bundle)
        assert subprocess.run(["bash", "-n"], input=text, text=True).returncode == 0, bundle
        assert text.startswith("#!/usr/bin/env bash\n#SBATCH --job-name=tutorrl-")


def test_sbatch_header_maps_nodes_and_gpus():
    text = _script(_bundle_named("chess-tutor-megatron-tp4"), support.REPO, "--partition", "gpu", "--time", "04:00:00")
    sbatch = [line for line in text.splitlines() if line.startswith("#SBATCH")]
    assert "#SBATCH --nodes=2" in sbatch and "#SBATCH --gpus-per-node=8" in sbatch
    assert "#SBATCH --partition=gpu" in sbatch and "#SBATCH --time=04:00:00" in sbatch
    text = _script(_bundle_named("chess-tutor-lora"))  # 1 x (6 + 2 reward GPUs)
    assert "#SBATCH --nodes=1" in text and "#SBATCH --gpus-per-node=8" in text


def _submit(cluster, tmp_path, bundle: str, **env):
    copy_bundle(bundle, tmp_path)
    script = tmp_path / "job.sbatch"
    script.write_text(_script(bundle, tmp_path))
    return cluster.run(script, cwd=tmp_path / "bundles", SLURM_SUBMIT_DIR=str(tmp_path), SLURM_JOB_ID="77",
                       SLURM_JOB_NODELIST="gpu[1-2]", STANDIN_NODES="gpu1,gpu2", SLURM_CPUS_PER_TASK="32",
                       **env)


def test_job_starts_ray_head_and_workers_then_launch_on_the_head(cluster, tmp_path):
    bundle = _bundle_named("chess-tutor-megatron-tp4")
    result = _submit(cluster, tmp_path, bundle)
    assert result.returncode == 0, result.stderr
    steps = [c["argv"] for c in cluster.calls("srun")]
    assert steps[0][-2:] == ["hostname", "--ip-address"]
    # The `ray start` steps run in the background, in no fixed order; the job step is the one that runs bash.
    (head,) = [s for s in steps if "--head" in s]
    (worker,) = [s for s in steps if "ray" in s and "--head" not in s]
    (job,) = [s for s in steps if "bash" in s]
    assert len(steps) == 4
    assert head[head.index("-w") + 1] == "gpu1" and head[head.index("ray"):] == [
        "ray", "start", "--head", "--node-ip-address=127.0.0.1", "--port=6379", "--num-cpus=32", "--num-gpus=8",
        "--block"]
    assert worker[worker.index("-w") + 1] == "gpu2" and worker[worker.index("ray"):] == [
        "ray", "start", "--address=127.0.0.1:6379", "--num-cpus=32", "--num-gpus=8", "--block"]
    assert "--overlap" in job and job[job.index("-w") + 1] == "gpu1" and job[-2:] == ["bash", f"bundles/{bundle}/launch.sh"]
    (wait,) = cluster.calls("wait-nodes")
    assert wait["argv"][-2:] == ["127.0.0.1:6379", "2"]
    (train,) = cluster.calls("python")
    assert train["argv"][:2] == ["-m", "verl.trainer.main_ppo"]
    # Relative spec paths mean the folder sbatch ran in; the evidence callback finds the real bundle.
    assert train["cwd"] == str(tmp_path) and train["env"]["RAY_ADDRESS"] == "127.0.0.1:6379"
    assert train["env"]["TUTORRL_BUNDLE_DIR"] == str(tmp_path / "bundles" / bundle)
    assert train["env"]["TUTORRL_RUN_ID"] == "slurm-77"
    # `ray start` inherited the bundle's environment, so Ray's workers do.
    ray_env = cluster.calls("ray")[0]["env"]
    assert ray_env["TUTORRL_BUNDLE_DIR"] == str(tmp_path / "bundles" / bundle)


def test_job_needs_secrets_by_name_and_never_writes_them(cluster, tmp_path):
    bundle = _bundle_named("chess-tutor-grpo-wandb")
    result = _submit(cluster, tmp_path, bundle)
    assert result.returncode == 2 and "not set in the submitting environment: WANDB_API_KEY" in result.stderr
    assert cluster.calls("srun") == []
    result = _submit(cluster, tmp_path / "again", bundle, WANDB_API_KEY="k-123456")
    assert result.returncode == 0, result.stderr
    assert cluster.calls("python")[0]["env"]["WANDB_API_KEY"] == "k-123456"
    assert "k-123456" not in (tmp_path / "again" / "job.sbatch").read_text()


def test_job_refuses_a_bundle_changed_on_the_shared_file_system(cluster, tmp_path):
    bundle = _bundle_named("chess-tutor-grpo")
    copy_bundle(bundle, tmp_path)
    script = tmp_path / "job.sbatch"
    script.write_text(_script(bundle, tmp_path))
    spec = tmp_path / "bundles" / bundle / "spec.toml"
    spec.write_text(spec.read_text() + "# edited on the cluster\n")
    result = cluster.run(script, cwd=tmp_path, SLURM_SUBMIT_DIR=str(tmp_path), SLURM_JOB_NODELIST="gpu1",
                         STANDIN_NODES="gpu1")
    assert result.returncode == 3 and "spec.toml: FAILED" in result.stderr
    assert cluster.calls("srun") == [] and cluster.calls("python") == []
