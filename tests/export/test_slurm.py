"""`tutorrl export --to slurm`: verl's Ray-on-Slurm recipe as a batch script,
run with real bash; srun and scontrol are stand-ins that record each step
(conftest.py), so the test reads which node got which `ray start` and where
launch.sh ran."""

from __future__ import annotations

import pytest
import subprocess
from pathlib import Path

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


def test_a_split_pool_entry_asks_for_the_rollouts_gpus_too():
    # one_step_off_example: trainer 1 x 6 + its rollout pool 1 x 2 (rollout.nnodes, rollout.n_gpus_per_node);
    # fully_async_example: 1 x 4 + 1 x 4. Counting the trainer's alone would start a job verl cannot place.
    for experiment, gpus, rollout in (("gsm8k-one-step-off", 8, 2), ("gsm8k-fully-async", 8, 4)):
        text = _script(_bundle_named(experiment))
        assert "#SBATCH --nodes=1" in text and f"#SBATCH --gpus-per-node={gpus}" in text, experiment
        assert f"+ {rollout} rollout GPU(s)" in text


def test_sbatch_header_asks_verl_recipes_cpus_and_memory_unless_told():
    bundle = _bundle_named("chess-tutor-grpo")
    sbatch = [line for line in _script(bundle).splitlines() if line.startswith("#SBATCH")]
    assert "#SBATCH --cpus-per-task=64" in sbatch and "#SBATCH --mem=200G" in sbatch
    assert not [line for line in sbatch if line.startswith(("#SBATCH --account", "#SBATCH --partition"))]
    sbatch = [line for line in _script(bundle, support.REPO, "--cpus-per-task", "8", "--mem", "64G", "--account",
                                       "rl-lab").splitlines() if line.startswith("#SBATCH")]
    assert "#SBATCH --cpus-per-task=8" in sbatch and "#SBATCH --mem=64G" in sbatch
    assert "#SBATCH --account=rl-lab" in sbatch and "#SBATCH --cpus-per-task=64" not in sbatch


def test_slurm_sizes_are_checked_before_the_bundle_is_read():
    bundle = f"bundles/{_bundle_named('chess-tutor-grpo')}"
    for args, said in ((["--mem", "200GB"], "--mem '200GB' is not a Slurm memory size"),
                       (["--cpus-per-task", "0"], "--cpus-per-task 0: at least 1")):
        result = export(bundle, "--to", "slurm", *args, cwd=support.REPO)
        assert result.returncode == 2 and said in result.stderr and result.stdout == "", result.stderr
    result = export(bundle, "--to", "kuberay", "--image", "i", "--cpus-per-task", "8", cwd=support.REPO)
    assert result.returncode == 2 and "--cpus-per-task is for --to slurm, not --to kuberay" in result.stderr


def _submit(cluster, tmp_path, bundle: str, *args: str, **env):
    copy_bundle(bundle, tmp_path)
    script = tmp_path / "job.sbatch"
    script.write_text(_script(bundle, tmp_path))
    return cluster.run(script, tmp_path / "bundles", *args, SLURM_SUBMIT_DIR=str(tmp_path), SLURM_JOB_ID="77",
                       SLURM_JOB_NODELIST="gpu[1-2]", STANDIN_NODES="gpu1,gpu2", SLURM_CPUS_PER_TASK="32",
                       **env)


@pytest.mark.needs_verl
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
        "ray", "start", "--head", "--disable-usage-stats", "--node-ip-address=127.0.0.1", "--port=6379",
        "--num-cpus=32", "--num-gpus=8", "--block"]
    assert worker[worker.index("-w") + 1] == "gpu2" and worker[worker.index("ray"):] == [
        "ray", "start", "--address=127.0.0.1:6379", "--disable-usage-stats", "--num-cpus=32", "--num-gpus=8",
        "--block"]
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


@pytest.mark.needs_verl
def test_a_head_address_from_the_environment_replaces_the_head_nodes_own(cluster, tmp_path):
    """TUTORRL_RAY_HEAD_IP (a network of several, or a loopback address on one machine, which
    `ray start` keeps where it would replace 127.0.0.1): no node is asked its address, every
    `ray start`, the wait and the trainer use the given one."""
    bundle = _bundle_named("chess-tutor-megatron-tp4")
    result = _submit(cluster, tmp_path, bundle, TUTORRL_RAY_HEAD_IP="127.0.0.2")
    assert result.returncode == 0, result.stderr
    steps = [c["argv"] for c in cluster.calls("srun")]
    assert not [s for s in steps if "hostname" in s] and len(steps) == 3
    (head,) = [s for s in steps if "--head" in s]
    (worker,) = [s for s in steps if "ray" in s and "--head" not in s]
    assert "--node-ip-address=127.0.0.2" in head and "--address=127.0.0.2:6379" in worker
    assert cluster.calls("wait-nodes")[0]["argv"][-2:] == ["127.0.0.2:6379", "2"]
    assert cluster.calls("python")[0]["env"]["RAY_ADDRESS"] == "127.0.0.2:6379"


@pytest.mark.needs_verl
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


@pytest.mark.needs_verl
def test_ray_auth_is_the_jobs_own_token_for_every_ray_command_and_probe(cluster, tmp_path):
    """Ray 2.60 turns token auth on at `ray start --head` when ~/.ray/auth_token exists; a
    probe without the token then hangs the job. The job makes its own token, outside ~/.ray,
    and every `ray start`, the readiness probe and verl's driver are pointed at it."""
    home = tmp_path / "home"
    (home / ".ray").mkdir(parents=True)
    (home / ".ray" / "auth_token").write_text("left-by-an-earlier-ray-init")
    bundle = _bundle_named("chess-tutor-megatron-tp4")
    result = _submit(cluster, tmp_path, bundle, "--cfg", "job", HOME=str(home), RAY_AUTH_TOKEN="from-the-submitter")
    assert result.returncode == 0, result.stderr
    (wait,), (train,), rays = cluster.calls("wait-nodes"), cluster.calls("python"), cluster.calls("ray")
    assert len(rays) == 2  # the head's and the worker's `ray start`
    for call in (wait, train, *rays):
        env = call["env"]
        assert env["RAY_AUTH_MODE"] == "token" and "RAY_AUTH_TOKEN" not in env
        assert env["RAY_AUTH_TOKEN_PATH"] == wait["env"]["RAY_AUTH_TOKEN_PATH"]
    path = Path(wait["env"]["RAY_AUTH_TOKEN_PATH"])
    # A folder of the job's own in the submit folder (shared by the nodes), gone when the job ends.
    assert path.parent.parent == tmp_path and path.parent.name.startswith(".tutorrl-slurm-77.")
    assert not path.parent.exists()
    assert wait["token"] == train["token"] and len(wait["token"]) == 64 and int(wait["token"], 16) >= 0
    assert (home / ".ray" / "auth_token").read_text() == "left-by-an-earlier-ray-init"
    # Arguments after the script are verl's (a dry run: `sbatch THIS_FILE --cfg job`).
    assert train["argv"][:2] == ["-m", "verl.trainer.main_ppo"] and "--cfg" in train["argv"]
    assert train["argv"][train["argv"].index("--cfg") + 1] == "job"
    again = _submit(cluster, tmp_path / "again", bundle)
    assert again.returncode == 0 and cluster.calls("wait-nodes")[0]["token"] != wait["token"]  # per job
