"""`tutorrl model` (runtime/model.py): its refusals, and the LoRA path.

verl's real merger runs on a checkpoint verl trained in
tests/e2e/test_real_training.py. No LoRA run fits this CPU machine, so the
LoRA path is tested against the layouts verl documents, with a stand-in for
the merger alone (MERGER_STANDIN below): it writes what verl's merger writes
for a LoRA checkpoint -- the base weights, and the adapter in lora_adapter/
with lora_alpha 0 (verl 0.5.0's merger always; 0.9's without the metadata)
-- made with peft from the tiny Qwen2. Everything after it is the real code:
the alpha taken from the checkpoint's lora_train_meta.json (verl 0.9's), peft
merging the adapter in the job's Python, the folder renamed into place, the
record.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest
import support
from evidence_helpers import make_bundle, make_fsdp_step

from tutorrl import api
from tutorrl.evidence import record_run_checkpoints
from tutorrl.runtime.model import fix_lora_alpha, lora_expected


def _recorded(tmp_path: Path, *, lora_meta: dict | None = None) -> tuple[Path, Path]:
    ckpt = tmp_path / "ckpt"
    bundle = make_bundle(tmp_path / "b", output_dir=str(ckpt))
    step = make_fsdp_step(ckpt, 1, world=1)
    if lora_meta is not None:
        (step / "actor" / "lora_train_meta.json").write_text(json.dumps(lora_meta))
    record_run_checkpoints(bundle, "run-a", True)
    return ckpt, bundle


def _nothing_left(out: Path) -> bool:
    return not out.exists() and not [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")]


def test_a_lora_checkpoint_is_told_by_the_files_verl_saves_with_it():
    assert lora_expected(["actor/lora_adapter/adapter_config.json", "actor/model_world_size_1_rank_0.pt"])  # 0.5.0
    assert lora_expected(["actor/lora_train_meta.json"])  # 0.9
    assert not lora_expected(["actor/model_world_size_1_rank_0.pt", "actor/huggingface/config.json"])


@pytest.mark.parametrize("source", ["actor/lora_adapter/adapter_config.json", "actor/lora_train_meta.json"])
def test_an_alpha_of_0_from_the_merger_takes_the_trained_value_the_checkpoint_keeps(tmp_path, source):
    merged, checkpoint = tmp_path / "merged", tmp_path / "global_step_1"
    (merged / "lora_adapter").mkdir(parents=True)
    (merged / "lora_adapter" / "adapter_config.json").write_text(json.dumps({"r": 4, "lora_alpha": 0}))
    assert fix_lora_alpha(merged, checkpoint) is None  # nothing to take it from: left as the merger wrote it
    (checkpoint / source).parent.mkdir(parents=True)
    (checkpoint / source).write_text(json.dumps({"r": 4, "lora_alpha": 16}))
    assert fix_lora_alpha(merged, checkpoint) == source
    assert json.loads((merged / "lora_adapter" / "adapter_config.json").read_text())["lora_alpha"] == 16


def test_an_out_folder_that_exists_is_refused_before_anything_runs(tmp_path):
    _ckpt, bundle = _recorded(tmp_path)
    (tmp_path / "taken").mkdir()
    proc = support.cli("model", str(bundle), "--out", str(tmp_path / "taken"))
    assert proc.returncode == 2 and "already exists" in proc.stderr and "Traceback" not in proc.stderr


def test_merge_lora_on_a_run_without_lora_is_refused(tmp_path):
    _ckpt, bundle = _recorded(tmp_path)
    out = tmp_path / "model"
    proc = support.cli("model", str(bundle), "--out", str(out), "--merge-lora")
    assert proc.returncode == 2 and "is not a LoRA one" in proc.stderr
    assert _nothing_left(out)


def test_a_python_without_verl_or_that_is_not_there_is_refused(tmp_path):
    _ckpt, bundle = _recorded(tmp_path)
    out = tmp_path / "model"
    missing = support.cli("model", str(bundle), "--out", str(out), "--python", str(tmp_path / "no-python"))
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    bare = tmp_path / "bare"
    os.symlink("/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable, bare)
    env = {"PYTHONNOUSERSITE": "1"}
    found = support.cli("model", str(bundle), "--out", str(out), "--python", str(bare), env=env)
    if "verl is not installed" not in found.stderr:  # a system Python with verl: it is not the run's release
        assert "but the bundle's run used verl" in found.stderr or "no `verl.model_merger`" in found.stderr
    assert found.returncode == 2 and _nothing_left(out)


def test_a_record_that_does_not_verify_writes_nothing(tmp_path):
    ckpt, bundle = _recorded(tmp_path)
    shard = ckpt / "global_step_1" / "actor" / "model_world_size_1_rank_0.pt"
    shard.write_bytes(b"changed")
    out = tmp_path / "model"
    proc = support.cli("model", str(bundle), "--out", str(out))
    assert proc.returncode == 2 and f"{shard}: content changed" in proc.stderr
    assert "000001.json (step 1)" in proc.stderr and str(shard) in proc.stderr
    assert _nothing_left(out)


# A stand-in for `python -m verl.model_merger merge ...` only (see the module's docstring).
MERGER_STANDIN = r'''
import argparse, json, sys, torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, AutoTokenizer
p = argparse.ArgumentParser(); p.add_argument("op"); p.add_argument("--backend"); p.add_argument("--local_dir")
p.add_argument("--target_dir")
a = p.parse_args()
tiny = sys.argv[0].rsplit("/", 1)[0] + "/tiny"
torch.manual_seed(0)
peft_model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny),
                            LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
for name, param in peft_model.named_parameters():
    if "lora_B" in name:
        param.data.normal_()
peft_model.save_pretrained(a.target_dir + "/lora_adapter")
config = json.load(open(a.target_dir + "/lora_adapter/adapter_config.json"))
config["lora_alpha"] = 0
json.dump(config, open(a.target_dir + "/lora_adapter/adapter_config.json", "w"))
AutoModelForCausalLM.from_pretrained(tiny).save_pretrained(a.target_dir)
AutoTokenizer.from_pretrained(tiny).save_pretrained(a.target_dir)
'''

# The interpreter `tutorrl model --python` is given: the test environment's Python, with the merger
# module's run handed to the stand-in.
WRAPPER = """#!/bin/sh
if [ "$1" = "-m" ] && [ "$2" = "verl.model_merger" ]; then shift 2; exec "{python}" "{standin}" "$@"; fi
exec "{python}" "$@"
"""


def _lora_python(tmp_path: Path) -> Path:
    tiny = os.environ.get("TUTORRL_TINY_DIR")
    if not tiny or not os.path.isdir(os.path.join(tiny, "tiny-qwen2")):
        pytest.fail("the tiny model is not set up: `bash tools/dev.sh test` makes it (TUTORRL_TINY_DIR)")
    folder = tmp_path / "standin"
    folder.mkdir()
    os.symlink(os.path.join(tiny, "tiny-qwen2"), folder / "tiny")
    (folder / "merger.py").write_text(MERGER_STANDIN)
    wrapper = folder / "python"
    wrapper.write_text(WRAPPER.format(python=sys.executable, standin=folder / "merger.py"))
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return wrapper


WEIGHTS = r'''
import json, sys, torch
from safetensors.torch import load_file
merged = load_file(sys.argv[1] + "/model.safetensors")
base = load_file(sys.argv[2] + "/model.safetensors")
adapter = load_file(sys.argv[1] + "/lora_adapter/adapter_model.safetensors")
config = json.load(open(sys.argv[1] + "/lora_adapter/adapter_config.json"))
name = "model.layers.0.self_attn.q_proj.weight"
a = adapter["base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"]
b = adapter["base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight"]
expected = base[name] + (config["lora_alpha"] / config["r"]) * (b @ a)
print(json.dumps({"changed": not torch.equal(merged[name], base[name]),
                  "as_lora": bool(torch.allclose(merged[name], expected, atol=1e-5))}))
'''


@pytest.mark.slow
@pytest.mark.needs_torch
@pytest.mark.needs_train_env("TUTORRL_TINY_DIR")
def test_a_lora_checkpoint_gives_the_adapter_and_with_merge_lora_merged_weights(tmp_path):
    import subprocess

    _ckpt, bundle = _recorded(tmp_path, lora_meta={"r": 4, "lora_alpha": 8, "task_type": "CAUSAL_LM"})
    python = _lora_python(tmp_path)
    adapter_only, merged = tmp_path / "adapter-only", tmp_path / "merged"
    first = support.cli("model", str(bundle), "--out", str(adapter_only), "--python", str(python), timeout=600)
    assert first.returncode == 0, first.stderr
    config = json.loads((adapter_only / "lora_adapter" / "adapter_config.json").read_text())
    assert config["lora_alpha"] == 8  # the trained value, from the checkpoint's lora_train_meta.json
    second = support.cli("model", str(bundle), "--out", str(merged), "--python", str(python), "--merge-lora",
                         timeout=600)
    assert second.returncode == 0, second.stderr
    assert (merged / "lora_adapter" / "adapter_model.safetensors").is_file()
    check = subprocess.run([sys.executable, "-c", WEIGHTS, str(merged), str(adapter_only)], capture_output=True,
                           text=True, timeout=300)
    assert check.returncode == 0, check.stderr[-2000:]
    assert json.loads(check.stdout) == {"changed": True, "as_lora": True}
    from tutorrl.evidence.record import read_records

    models = [s.predicate.model for _, s in read_records(bundle) if s.predicate.model is not None]
    assert [(m.lora_adapter, m.lora_merged, m.lora_alpha_from) for m in models] == [
        (True, False, "actor/lora_train_meta.json"), (True, True, "actor/lora_train_meta.json")]
    assert api.verify(bundle, rehash=True).ok
