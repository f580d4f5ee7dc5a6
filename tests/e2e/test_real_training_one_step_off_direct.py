"""verl 0.9.1's one-step-off entry point trains on the CPU, started directly (no bundle).

The proof that the entry point itself trains here, independent of how tutorrl
launches it: a Ray head this test starts (support.RayNodes: `ray start --head`
from the 0.9.1 training environment, its own temp folder and ports, loopback,
token auth, two declared GPUs -- one per resource pool -- and the CPU plug-in
on its PYTHONPATH), and `python -m verl.experimental.one_step_off_policy.main_ppo`
as the driver, with the overrides specs/tiny_cpu_one_step_off.toml compiles to.
The spec's environment and its entry-specific overrides are read from the spec
itself; the rest is written out below as its launch.sh writes them, plus the
Hydra search path the entry's config needs outside a verl source checkout.

test_real_training_one_step_off.py runs the same through `tutorrl compile` and
`tutorrl run` (`[experiment] entry`), with the evidence records.
"""

from __future__ import annotations

import math
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

import support
from training_helpers import ANSI, metrics, training_env

pytestmark = [pytest.mark.slow, pytest.mark.needs_ray,
              pytest.mark.needs_train_env("TUTORRL_TRAIN091_PYTHON", "TUTORRL_TINY_DIR")]

PLUGIN = support.REPO / "tools" / "cpu_training" / "verl091"
SPEC = support.SPECS / "tiny_cpu_one_step_off.toml"
MODULE = "verl.experimental.one_step_off_policy.main_ppo"
MARKER = "TUTORRL_ONE_STEP_OFF_DIRECT"


def _num(text: str) -> float:
    """A value of verl's console line: this trainer prints numpy scalars as `np.float64(0.5)`."""
    match = re.fullmatch(r"(?:np\.\w+\()?([^()]*)\)?", text.strip())
    return float(match.group(1))


# The gloo checkpoint engine's line in the rollout's CheckpointEngineWorker, once per weight sync.
SYNC_LINE = re.compile(r"gloo checkpoint engine: rank 1 received (\d+) tensors, (\d+) bytes, for step (\d+)$", re.M)


def assert_every_sync_arrived(log: str) -> None:
    """verl syncs the actor's weights into the rollout before generating anything (step 0: vLLM starts from
    dummy weights in this entry) and again at each step; each sync carries the whole model (27 tensors of the
    tiny Qwen2, 115,264 float32 parameters). That the bytes are exact is test_cpu_checkpoint_engine.py's."""
    syncs = {int(step): (int(count), int(size)) for count, size, step in SYNC_LINE.findall(log)}
    assert sorted(syncs) == [0, 1, 2], log[-3000:]
    assert set(syncs.values()) == {(27, 115_264 * 4)}, syncs


def overrides(tiny: Path, ckpt: Path) -> list[str]:
    """What the spec's launch.sh passes verl, the roots filled in."""
    spec = tomllib.loads(SPEC.read_text())
    return [
        # The entry's config names verl's trainer config as file://verl/trainer/config, which only
        # resolves from a verl source checkout; the installed package has it as a Python package.
        "hydra.searchpath=[pkg://verl.trainer.config]",
        "trainer.experiment_name=tiny-cpu-one-step-off", "trainer.project_name=tiny-cpu",
        f"data.train_files={tiny}/data/train.parquet", f"data.val_files={tiny}/data/val.parquet",
        "data.train_batch_size=4", "data.max_prompt_length=64", "data.max_response_length=16",
        "data.dataloader_num_workers=0",
        f"actor_rollout_ref.model.path={tiny}/tiny-qwen2-hd32", "actor_rollout_ref.model.use_remove_padding=false",
        '+actor_rollout_ref.model.override_config.attn_implementation="sdpa"',
        "algorithm.adv_estimator=grpo", "algorithm.use_kl_in_reward=false",
        "actor_rollout_ref.actor.strategy=fsdp2", "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4", "actor_rollout_ref.actor.use_kl_loss=false",
        "actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.rollout.n=2",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.05", "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4",
        "actor_rollout_ref.rollout.max_num_batched_tokens=256", "actor_rollout_ref.rollout.max_num_seqs=8",
        "actor_rollout_ref.rollout.max_model_len=128", "actor_rollout_ref.rollout.enforce_eager=true",
        "actor_rollout_ref.rollout.agent.num_workers=1",
        "trainer.total_training_steps=2", "trainer.save_freq=1", "trainer.test_freq=-1",
        "trainer.val_before_train=false", f"trainer.default_local_dir={ckpt}", 'trainer.logger=["console"]',
        "trainer.resume_mode=disable", "trainer.nnodes=1", "trainer.n_gpus_per_node=1",
        f"reward.custom_reward_function.path={tiny}/reward.py", "reward.custom_reward_function.name=compute_score",
        "reward.num_workers=1",
        *spec["verl"]["extra_overrides"],
    ]


class Direct:
    def __init__(self, root: Path, nodes: support.RayNodes, python: str, tiny: Path):
        self.root, self.ckpt = root, root / "ckpt"
        # CPUs: the OneStepTaskRunner asks 10 (`@ray.remote(num_cpus=10)`), the rest is the workers'.
        nodes.start_head("--num-gpus=2", "--num-cpus=16", "--object-store-memory=300000000")
        env = {**nodes.env, "RAY_ADDRESS": f"{nodes.address(0)}:{nodes.gcs}", "RAY_AUTH_TOKEN": nodes.token}
        self.run = subprocess.run([python, "-m", MODULE, *overrides(tiny, self.ckpt)], cwd=root, env=env,
                                  capture_output=True, text=True, timeout=1200)
        self.log = ANSI.sub("", self.run.stdout + self.run.stderr)


@pytest.fixture(scope="module")
def direct(tmp_path_factory):
    python, tiny = training_env("TUTORRL_TRAIN091_PYTHON", "tiny-qwen2-hd32/model.safetensors",
                                "the verl 0.9.1 CPU training environment")
    spec = tomllib.loads(SPEC.read_text())
    nodes = support.RayNodes(str(Path(python).parent / "ray"), MARKER, env={
        "PYTHONPATH": str(PLUGIN), **spec["env"]["set"]})
    try:
        yield Direct(tmp_path_factory.mktemp("one-step-off-direct"), nodes, python, tiny)
    finally:
        nodes.stop()
        assert support.procs_with_env(MARKER, str(nodes.root)) == [], "processes of the test's Ray are left"


def test_the_one_step_off_entry_point_trains_two_steps(direct):
    assert direct.run.returncode == 0, direct.log[-4000:]
    assert re.search(r"^\(OneStepTaskRunner pid=\d+\) ", direct.log, re.M), direct.log[-3000:]
    assert re.search(r"^\(CheckpointEngineWorker pid=\d+\) ", direct.log, re.M)
    assert_every_sync_arrived(direct.log)
    steps = metrics(direct.log)
    assert sorted(steps) == [1, 2], direct.log[-3000:]
    for step, values in steps.items():
        loss, grad = _num(values["actor/pg_loss"]), _num(values["actor/grad_norm"])
        assert math.isfinite(loss) and math.isfinite(grad) and grad > 0, (step, values)


def test_it_wrote_both_checkpoints(direct):
    step_dir = direct.ckpt
    assert (step_dir / "latest_checkpointed_iteration.txt").read_text().strip() == "2"
    for step in (1, 2):
        actor = step_dir / f"global_step_{step}" / "actor"
        for name in ("model_world_size_1_rank_0.pt", "optim_world_size_1_rank_0.pt",
                     "extra_state_world_size_1_rank_0.pt", "huggingface/config.json"):
            assert (actor / name).is_file(), actor / name
