"""`tutorrl migrate`: golden expectations for 0.6.1 -> 0.9.1 and 0.9.1 -> 0.7.1."""

from __future__ import annotations

import json
import subprocess
import sys

import support
from compiler_helpers import CHESS, FSDP_CUSTOM, spec_at


def _migrate(tmp_path, text, *args):
    spec = tmp_path / "spec.toml"
    spec.write_text(text)
    proc = subprocess.run([sys.executable, "-m", "tutorrl", "migrate", str(spec), *args],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _by_setting(doc):
    return {c["setting"]: c for c in doc["settings"]}


def test_061_to_091_json(tmp_path):
    doc = json.loads(_migrate(tmp_path, spec_at("0.6.1", FSDP_CUSTOM), "--to", "0.9.1", "--format", "json"))
    assert (doc["from"], doc["to"], doc["variant"], doc["compiles"]) == ("0.6.1", "0.9.1", "fsdp", True)
    changed = {name: c["status"] for name, c in _by_setting(doc).items() if c["status"] != "same"}
    # Nothing is gained: a setting the spec does not say is never emitted.
    assert changed == {"reward.module": "moved", "reward.function": "moved", "reward.kwargs": "moved"}
    module = _by_setting(doc)["reward.module"]
    assert module["before"]["spelling"] == "module-file" and module["after"]["spelling"] == "pkg"
    assert module["after"]["overrides"] == ['reward.custom_reward_function.path="pkg://tutorrl_test_reward.rewards"']
    assert any("trap in verl 0.9.1" in line for line in module["changes"])
    assert _by_setting(doc)["reward.kwargs"]["after"]["overrides"] == [
        "+reward.custom_reward_function.reward_kwargs.a=1", '+reward.custom_reward_function.reward_kwargs.b="x y"',
        "+reward.custom_reward_function.reward_kwargs.c=[1,2]", "+reward.custom_reward_function.reward_kwargs.d=true"]
    assert _by_setting(doc)["reward.kwargs"]["before"]["keys"] == ["custom_reward_function.reward_kwargs"]
    assert doc["selection_before"] == doc["selection_after"] == {"config_name": "ppo_trainer", "select": []}


def test_091_to_071_megatron_text(tmp_path):
    text = support.spec_toml(CHESS, actor={"strategy": "megatron"}, model={"attn_implementation": "sdpa"})
    out = _migrate(tmp_path, text, "--to", "0.7.1")
    assert out.startswith(f"{tmp_path / 'spec.toml'}: verl 0.9.1 -> 0.7.1 (megatron)\n")
    assert ("variant selection:\n"
            "  --config-name ppo_trainer model_engine=megatron -> --config-name ppo_megatron_trainer\n") in out
    assert "  model.attn_implementation [lost]\n" in out
    assert "verl 0.7.1 has no key for it (it exists from verl 0.8.0)" in out
    assert "before this spec compiles for verl 0.7.1:\n" in out
    assert "model.attn_implementation: 'model.attn_implementation' exists from verl 0.8.0 (megatron)" in out


def test_091_to_071_fsdp_only_loses_the_evidence_hook(tmp_path):
    out = _migrate(tmp_path, support.spec_toml(CHESS, trainer={"evidence_callback": True}), "--to", "0.7.1")
    assert "variant selection" not in out
    changed = [line for line in out.splitlines() if line.startswith("  ") and not line.startswith("    ")][:1]
    assert changed == ["  trainer.evidence_callback [lost]"]
    assert "no checkpoint callback hook before verl 0.9.1" in out
    assert "before this spec compiles for verl 0.7.1:\n  trainer.evidence_callback:" in out


def test_a_spec_without_the_hook_moves_to_071_unchanged(tmp_path):
    out = _migrate(tmp_path, support.spec_toml(CHESS), "--to", "0.7.1")
    assert "settings that change" not in out
    assert out.endswith('the spec compiles for verl 0.7.1 once experiment.verl = "0.7.1".\n')


def test_compiles_is_said_only_of_what_compiles_and_otherwise_what_stops_it(tmp_path):
    """The 'file' logger has no key to move (specs/gsm8k_custom_reward.toml's case): only compiling for 0.5.0 finds it."""
    spec = support.spec_toml(FSDP_CUSTOM, trainer={"loggers": ["console", "file"]})
    out = _migrate(tmp_path, spec, "--to", "0.5.0")
    assert "the spec compiles" not in out
    assert "before this spec compiles for verl 0.5.0:\n  trainer.loggers: the 'file' logger exists from verl 0.6.0" in out
    doc = json.loads(_migrate(tmp_path, spec, "--to", "0.5.0", "--format", "json"))
    assert doc["compiles"] is False and [b["spec_field"] for b in doc["blockers"]] == ["trainer.loggers"]
    # Where it does compile, the promise stands (and each blocker is listed once).
    text = support.spec_toml(CHESS, trainer={"evidence_callback": True})
    out = _migrate(tmp_path, text, "--to", "0.7.1")
    assert out.count("  trainer.evidence_callback: ") == 1


def test_migrating_to_the_specs_own_release_says_so(tmp_path):
    out = _migrate(tmp_path, support.spec_toml(CHESS), "--to", "0.9.1")
    assert "other settings" not in out and "--to 0.9.1 is the release it migrates from: nothing moves" in out
    assert out.endswith('the spec compiles for verl 0.9.1 (experiment.verl = "0.9.1").\n')
