"""Real training, end to end: verl 0.5.0 trains a tiny model on this CPU, run by tutorrl.

No stand-in trainer: `tutorrl compile` of specs/tiny_cpu_grpo.toml, then
`tutorrl run` on the embedded head, whose job is the bundle's launch.sh
running verl's own `main_ppo` -- its TaskRunner, FSDP2 actor, HF rollout,
reward, GRPO advantage, checkpoint manager -- in the training environment
`tools/dev.sh test` builds (TUTORRL_TRAIN_PYTHON: verl 0.5.0 with the CPU
torch) on the tiny model, tokenizer and data it makes (TUTORRL_TINY_DIR).
The CPU stand-in (tools/cpu_training/shim) answers the three calls verl makes
that only a GPU machine answers; what that does and does not prove is in its
docstring. Everything asserted below is what verl wrote and printed, checked
independently of tutorrl's own code where it can be (sha256 of the files,
torch loading the shards).

Then the second user path on the same checkpoints: a spec that resumes the
same output folder trains step 3, and its first evidence record links to the
record of the checkpoint it resumed from. And `tutorrl model` on the first
run's step 2: verl's merger in the job's Python, a folder transformers loads,
and its record linked to step 2's.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import support
from training_helpers import metrics, training_env, tutorrl

pytestmark = [pytest.mark.slow, pytest.mark.needs_train_env("TUTORRL_TRAIN_PYTHON", "TUTORRL_TINY_DIR")]

SHIM = support.REPO / "tools" / "cpu_training" / "shim"




def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Trained:
    """One real training run, shared by the tests of this module (it takes ~30-60 s)."""

    def __init__(self, root: Path):
        python, tiny = training_env("TUTORRL_TRAIN_PYTHON", ".complete", "the CPU training environment")
        self.root, self.ckpt = root, root / "ckpt"
        # Module-scoped: the per-test state folder of tests/e2e/conftest.py is not set yet, so this
        # run and every command after it get their own (the runs index and the record-sealing key).
        state = root / "state"
        self.env = {"TINY_ROOT": str(tiny), "CKPT_ROOT": str(self.ckpt), "PYTHONPATH": str(SHIM),
                    "TUTORRL_PYTHON": python, "TUTORRL_TRAIN_PYTHON": python, "XDG_STATE_HOME": str(state),
                    "TUTORRL_STATE_HOME": str(state / "tutorrl")}
        compiled = tutorrl("compile", str(support.SPECS / "tiny_cpu_grpo.toml"), "--out", str(root / "bundles"),
                            cwd=root)
        assert compiled.returncode == 0, compiled.stderr
        self.bundle = root / compiled.stdout.strip()
        self.run = tutorrl("run", str(self.bundle), "--num-gpus", "1", cwd=root, env=self.env)
        runs = sorted((self.bundle / "runs").iterdir())
        assert len(runs) == 1, runs
        self.run_dir = runs[0]
        self.log = (self.run_dir / "job.log").read_text(errors="replace")
        self.step_dir = self.ckpt / "tiny-cpu-grpo"


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Trained:
    return Trained(tmp_path_factory.mktemp("train"))


def test_verl_trains_two_steps_as_a_ray_job(trained):
    assert trained.run.returncode == 0, trained.run.stdout[-3000:] + trained.run.stderr[-3000:]
    record = json.loads((trained.run_dir / "run.json").read_text())
    assert record["status"] == "succeeded" and record["exit_code"] == 0
    assert record["versions"]["verl"] == "0.5.0"  # the job's Python, not tutorrl's (0.9.1 in the test env)
    steps = metrics(trained.log)
    assert sorted(steps) == [1, 2], trained.log[-3000:]
    for step, values in steps.items():
        loss, grad = float(values["actor/pg_loss"]), float(values["actor/grad_norm"])
        # An actor update really ran: a finite loss and a gradient that is not zero.
        assert math.isfinite(loss) and math.isfinite(grad) and grad > 0, (step, values)
        assert 0.0 <= float(values["critic/score/mean"]) <= 1.0
    assert "Total training steps: 2" in trained.log
    # Hydra's record of the run is the run's, in its folder: nothing is left where `tutorrl run` started.
    assert not (trained.root / "outputs").exists()
    assert (trained.run_dir / "hydra" / ".hydra" / "overrides.yaml").is_file()


def test_verl_wrote_its_checkpoints(trained):
    assert (trained.step_dir / "latest_checkpointed_iteration.txt").read_text().strip() == "2"
    for step in (1, 2):
        actor = trained.step_dir / f"global_step_{step}" / "actor"
        for name in ("model_world_size_1_rank_0.pt", "optim_world_size_1_rank_0.pt",
                     "extra_state_world_size_1_rank_0.pt", "fsdp_config.json", "huggingface/config.json"):
            assert (actor / name).is_file(), actor / name
        assert json.loads((actor / "fsdp_config.json").read_text())["FSDP_version"] == 2


def test_one_evidence_record_per_checkpoint_confirmed_by_an_independent_hash(trained):
    records = sorted((trained.bundle / "evidence").glob("[0-9]*.json"))
    assert len(records) == 2
    for path, step in zip(records, (1, 2)):
        envelope = json.loads(path.read_text())  # DSSE: the in-toto statement is the base64 payload
        assert envelope["payloadType"] == "application/vnd.in-toto+json"
        statement = json.loads(base64.b64decode(envelope["payload"]))
        predicate = statement["predicate"]
        assert predicate["checkpoint"]["step"] == step
        assert predicate["checkpoint"]["directory"] == f"global_step_{step}"
        assert predicate["run"]["run_id"] == trained.run_dir.name
        folder = trained.step_dir / f"global_step_{step}"
        on_disk = {p.relative_to(folder).as_posix(): _sha256(p) for p in folder.rglob("*") if p.is_file()}
        assert len(on_disk) == 11  # model, optim, extra_state, fsdp_config, 6 huggingface/ files, data.pt
        recorded = {r["name"]: r["digest"] for r in predicate["checkpoint"]["files"]["resources"]}
        assert recorded == on_disk
        publication = next(c for c in predicate["verdict"]["checks"] if c["id"] == "publication.engines_answered")
        assert publication["status"] == "skipped" and "hf rollout" in publication["detail"]
        # The in-toto subject names the same files, under the step's folder.
        assert {s["name"]: s["digest"]["sha256"] for s in statement["subject"]} == {
            f"global_step_{step}/{name}": digest for name, digest in on_disk.items()}


def test_status_and_metrics_show_what_verl_logged(trained):
    points = [json.loads(line) for line in (trained.run_dir / "metrics.jsonl").read_text().splitlines()]
    logged = metrics(trained.log)
    assert [p["step"] for p in points] == [1, 2]
    for point in points:
        assert point["metrics"]["critic/score/mean"] == pytest.approx(float(logged[point["step"]]["critic/score/mean"]))
    status = tutorrl("status", trained.run_dir.name, cwd=trained.root, env=trained.env)
    assert status.returncode == 0, status.stderr
    assert "succeeded" in status.stdout and "step 2/2" in status.stdout
    last = float(logged[2]["critic/score/mean"])
    assert f"{last:.4g}" in status.stdout
    # With no id: the run that just ended is listed, as one row.
    overview = tutorrl("status", cwd=trained.root, env=trained.env)
    assert overview.returncode == 0, overview.stderr
    (row,) = [line for line in overview.stdout.splitlines() if line.startswith(trained.run_dir.name)]
    assert row.split()[1:4] == ["succeeded", "0", "2/2"]


def test_verify_rehash_passes_and_a_flipped_byte_fails_naming_the_file(trained):
    ok = tutorrl("verify", str(trained.bundle), "--rehash", cwd=trained.root, env=trained.env)
    assert ok.returncode == 0, ok.stderr
    shard = trained.step_dir / "global_step_2" / "actor" / "model_world_size_1_rank_0.pt"
    original = shard.read_bytes()
    flipped = bytearray(original)
    flipped[len(flipped) // 2] ^= 0x01
    shard.write_bytes(bytes(flipped))
    try:
        bad = tutorrl("verify", str(trained.bundle), "--rehash", cwd=trained.root, env=trained.env)
    finally:
        shard.write_bytes(original)
    assert bad.returncode != 0
    assert "model_world_size_1_rank_0.pt" in bad.stdout + bad.stderr
    assert "000002.json" in bad.stdout + bad.stderr


def test_the_checkpoint_torch_loads_is_the_one_recorded(trained):
    """verl's FSDP2 shard, loaded by torch in the training environment: 27 tensors of the tiny Qwen2."""
    python, _ = training_env("TUTORRL_TRAIN_PYTHON", ".complete", "the CPU training environment")
    shard = trained.step_dir / "global_step_2" / "actor" / "model_world_size_1_rank_0.pt"
    program = ("import sys, torch; sd = torch.load(sys.argv[1], map_location='cpu', weights_only=False); "
               "print(len(sd), sum(t.numel() for t in (v.to_local() if hasattr(v, 'to_local') else v "
               "for v in sd.values())))")
    out = subprocess.run([python, "-c", program, str(shard)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    tensors, params = map(int, out.stdout.split())
    assert tensors == 27 and params == 115_264


def _statement(path: Path) -> dict:
    return json.loads(base64.b64decode(json.loads(path.read_text())["payload"]))


@pytest.fixture(scope="module")
def model(trained):
    """`tutorrl model` on the first run's bundle: verl 0.5.0's merger, in the job's Python, on step 2."""
    out = trained.root / "model"
    started = time.monotonic()
    made = tutorrl("model", str(trained.bundle), "--out", str(out), cwd=trained.root, env=trained.env)
    seconds = time.monotonic() - started
    print(f"tutorrl model took {seconds:.1f} s")  # shown with -s; the README's figure
    return out, made


def test_tutorrl_model_writes_a_folder_transformers_loads_with_step_2s_weights(trained, model):
    out, made = model
    assert made.returncode == 0, made.stderr[-3000:]
    assert (trained.root / made.stdout.strip()).resolve() == out.resolve()
    assert "verl 0.5.0's verl.model_merger (--backend fsdp)" in made.stderr
    assert [p.name for p in trained.root.iterdir() if p.name.startswith(".model")] == []  # no temporary left
    python, _ = training_env("TUTORRL_TRAIN_PYTHON", ".complete", "the CPU training environment")
    shard = trained.step_dir / "global_step_2" / "actor" / "model_world_size_1_rank_0.pt"
    # transformers loads the folder and generates; every weight is the trained step 2's, as verl's shard holds
    # it (in bfloat16: verl's merger writes the model in bfloat16 whatever the training dtype).
    program = (
        "import sys, torch\n"
        "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
        "tok = AutoTokenizer.from_pretrained(sys.argv[1]); model = AutoModelForCausalLM.from_pretrained(sys.argv[1])\n"
        "enc = tok('What is 2 + 3?', return_tensors='pt')\n"
        "ids = model.generate(input_ids=enc.input_ids, attention_mask=enc.attention_mask, max_new_tokens=8,\n"
        "                     do_sample=False,\n"
        "                     pad_token_id=tok.pad_token_id or tok.eos_token_id)\n"
        "shard = torch.load(sys.argv[2], map_location='cpu', weights_only=False)\n"
        "shard = {k: (v.to_local() if hasattr(v, 'to_local') else v) for k, v in shard.items()}\n"
        "from safetensors.torch import load_file\n"
        "state = load_file(sys.argv[1] + '/model.safetensors')\n"
        "same = sum(torch.equal(state[k], v.to(state[k].dtype)) for k, v in shard.items() if k in state)\n"
        "print(ids.shape[1] - enc.input_ids.shape[1], sum(p.numel() for p in model.parameters()), len(shard), same)\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    loaded = subprocess.run([python, "-c", program, str(out), str(shard)], capture_output=True, text=True,
                            timeout=300, env=env)
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    generated, params, tensors, same = map(int, loaded.stdout.split()[-4:])
    assert generated >= 1 and params == 115_264
    assert tensors == 27 and same == 27


def test_the_model_record_lists_the_merged_files_links_step_2s_record_and_verifies(trained, model):
    out, made = model
    assert made.returncode == 0, made.stderr[-3000:]
    newest = sorted((trained.bundle / "evidence").glob("[0-9]*.json"))[-1]
    statement = _statement(newest)
    predicate = statement["predicate"]
    assert predicate["run"]["source"] == "model-merger" and predicate["checkpoint"]["step"] == 2
    assert predicate["model"]["backend"] == "fsdp" and predicate["model"]["verl"] == "0.5.0"
    on_disk = {p.relative_to(out).as_posix(): _sha256(p) for p in out.rglob("*") if p.is_file()}
    assert "model.safetensors" in on_disk and "config.json" in on_disk
    assert {s["name"]: s["digest"]["sha256"] for s in statement["subject"]} == {
        f"model/{name}": d for name, d in on_disk.items()}
    linked = trained.bundle / "evidence" / "000002.json"
    assert predicate["lineage"]["record"] == "000002.json"
    assert predicate["lineage"]["record_digest"] == "sha256:" + _sha256(linked)
    listed = tutorrl("evidence", str(trained.bundle), cwd=trained.root, env=trained.env)
    assert f"{newest.name}  step 2 " in listed.stdout and "[model-merger, finished]" in listed.stdout
    ok = tutorrl("verify", str(trained.bundle), "--rehash", cwd=trained.root, env=trained.env)
    assert ok.returncode == 0, ok.stderr
    assert f"{newest.name}: merged from 000002.json" in ok.stderr and "link checked" in ok.stderr
    weights = out / "model.safetensors"
    original = weights.read_bytes()
    flipped = bytearray(original)
    flipped[len(flipped) - 5] ^= 0x01
    weights.write_bytes(bytes(flipped))
    try:
        bad = tutorrl("verify", str(trained.bundle), "--rehash", cwd=trained.root, env=trained.env)
    finally:
        weights.write_bytes(original)
    assert bad.returncode == 2
    assert f"{newest.name} (model of step 2): {weights}: content changed" in bad.stderr


def test_tutorrl_model_refuses_a_changed_checkpoint_or_another_release_and_writes_nothing(trained, model):
    shard = trained.step_dir / "global_step_1" / "actor" / "model_world_size_1_rank_0.pt"
    out = trained.root / "refused"
    original = shard.read_bytes()
    flipped = bytearray(original)
    flipped[len(flipped) // 2] ^= 0x01
    shard.write_bytes(bytes(flipped))
    try:
        changed = tutorrl("model", str(trained.bundle), "--step", "1", "--out", str(out), cwd=trained.root,
                          env=trained.env)
    finally:
        shard.write_bytes(original)
    assert changed.returncode == 2, changed.stderr
    assert "000001.json (step 1)" in changed.stderr and f"{shard}: content changed" in changed.stderr
    # The test environment's verl is 0.9.1: not the run's release, whose merger reads these checkpoints.
    other = tutorrl("model", str(trained.bundle), "--step", "1", "--out", str(out), "--python", sys.executable,
                    cwd=trained.root, env=trained.env)
    assert other.returncode == 2 and "but the bundle's run used verl 0.5.0" in other.stderr
    assert "Traceback" not in changed.stderr + other.stderr
    assert not out.exists() and [p for p in trained.root.iterdir() if p.name.startswith(".refused")] == []


@pytest.fixture(scope="module")
def resumed(trained):
    """The second spec on the first run's output folder: verl resumes from global_step_2."""
    compiled = tutorrl("compile", str(support.SPECS / "tiny_cpu_grpo_resume.toml"), "--out",
                        str(trained.root / "bundles"), cwd=trained.root)
    assert compiled.returncode == 0, compiled.stderr
    bundle = trained.root / compiled.stdout.strip()
    run = tutorrl("run", str(bundle), "--num-gpus", "1", cwd=trained.root, env=trained.env)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    (run_dir,) = (bundle / "runs").iterdir()
    return bundle, run_dir, (run_dir / "job.log").read_text(errors="replace")


def test_resume_loads_step_2_and_trains_step_3_only(trained, resumed):
    _bundle, _run_dir, log = resumed
    assert f"Load from checkpoint folder: {trained.step_dir / 'global_step_2'}" in log
    assert sorted(metrics(log)) == [3]
    assert (trained.step_dir / "latest_checkpointed_iteration.txt").read_text().strip() == "3"
    assert (trained.step_dir / "global_step_3" / "actor" / "model_world_size_1_rank_0.pt").is_file()


def test_the_resumed_runs_first_record_links_the_record_it_resumed_from(trained, resumed):
    bundle, run_dir, _log = resumed
    # Only the checkpoint this run wrote: steps 1 and 2 were there before it started.
    (record,) = sorted((bundle / "evidence").glob("[0-9]*.json"))
    predicate = _statement(record)["predicate"]
    assert predicate["checkpoint"]["step"] == 3 and predicate["run"]["run_id"] == run_dir.name
    first = trained.bundle / "evidence" / "000002.json"
    first_predicate = _statement(first)["predicate"]
    lineage = predicate["lineage"]
    assert lineage["step"] == 2 and lineage["directory"] == "global_step_2"
    assert lineage["bundle"] == first_predicate["bundle"]["digest"] != predicate["bundle"]["digest"]
    assert lineage["record"] == "000002.json"
    assert lineage["record_digest"] == "sha256:" + _sha256(first)
    assert lineage["files_root"] == first_predicate["checkpoint"]["files"]["root"]
    check = next(c for c in predicate["verdict"]["checks"] if c["id"] == "lineage.resumed_from")
    assert check["status"] == "pass"

    ok = tutorrl("verify", str(bundle), cwd=trained.root, env=trained.env)
    assert ok.returncode == 0, ok.stderr
    assert "resumed from 000002.json" in ok.stderr and "link checked" in ok.stderr
    # The linked record changed afterwards: the link no longer holds, and verify says which.
    original = first.read_bytes()
    first.write_bytes(original + b" ")
    try:
        bad = tutorrl("verify", str(bundle), cwd=trained.root, env=trained.env)
    finally:
        first.write_bytes(original)
    assert bad.returncode != 0
    assert "the record it resumed from" in bad.stderr and "000002.json" in bad.stderr


def test_the_merged_model_is_recorded_tensor_by_tensor_as_torch_loads_it(trained, resumed):
    """verl's own model merger turns the last checkpoint into a Hugging Face model (where verl keeps
    its HF export, actor/huggingface/); `tutorrl evidence --add` records the checkpoint again with it,
    and each tensor's digest is what torch loads from the file."""
    python, _ = training_env("TUTORRL_TRAIN_PYTHON", ".complete", "the CPU training environment")
    bundle, _run_dir, _log = resumed
    actor = trained.step_dir / "global_step_3" / "actor"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the merger needs no CPU stand-in
    merged = subprocess.run([python, "-m", "verl.model_merger", "merge", "--backend", "fsdp", "--local_dir",
                             str(actor), "--target_dir", str(actor / "huggingface")],
                            capture_output=True, text=True, timeout=600, env=env)
    assert merged.returncode == 0, merged.stderr[-3000:]
    added = tutorrl("evidence", str(bundle), "--add", str(trained.step_dir / "global_step_3"), cwd=trained.root,
                     env=trained.env)
    assert added.returncode == 0, added.stderr
    newest = sorted((bundle / "evidence").glob("[0-9]*.json"))[-1]
    (export,) = _statement(newest)["predicate"]["checkpoint"]["safetensors"]
    assert export["file"] == "actor/huggingface/model.safetensors"
    recorded = {t["name"]: t["sha256"] for t in export["tensors"]}
    program = (
        "import hashlib, json, sys, torch\n"
        "from safetensors.torch import load_file\n"
        "tensors = load_file(sys.argv[1])\n"
        "print(json.dumps({n: hashlib.sha256(t.contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()"
        " for n, t in tensors.items()}))\n")
    loaded = subprocess.run([python, "-c", program, str(actor / "huggingface" / "model.safetensors")],
                            capture_output=True, text=True, timeout=300, env=env)
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    by_torch = json.loads(loaded.stdout)
    assert len(by_torch) == 27 and recorded == by_torch
    # The merger rewrote actor/huggingface/ after the run's own record of step 3: that record no
    # longer matches the folder, and verify says so, while the record made after the merge holds.
    rehash = tutorrl("verify", str(bundle), "--rehash", cwd=trained.root, env=trained.env)
    assert rehash.returncode != 0
    assert "000001.json (step 3): " in rehash.stderr and "huggingface/config.json" in rehash.stderr
    assert f"{newest.name} (step 3): matches" in rehash.stderr
