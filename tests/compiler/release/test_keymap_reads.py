"""Keys the key map writes are keys verl reads, on the release's default code path.

A key a release declares and never reads takes any value and does nothing: a
spec setting written there would be a silent no-op. Where verl moved the read
(FSDP gradient clipping to ``optim.clip_grad`` when 0.8.0 removed the legacy
workers) the setting follows it; where nothing reads the setting's key at all
(0.2/0.3's ``val_batch_size`` and ``warmup_style``) the value is still written
-- verl takes it, and it is what the user said -- and the compiler warns.
"""

from __future__ import annotations

import re
import tomllib
import zipfile

import pytest

import support
from tutorrl.compiler import compile_bytes
from tutorrl.compiler.pipeline.compile import resolve_bytes
from tutorrl.compiler.release import keyset_import as ki
from tutorrl.compiler.release.keymap import load_lock, supported_releases
from tutorrl.errors import SpecError

# Only the settings under test (a base of its own, not support.MINIMAL_SPEC: verl 0.2 loads no reward
# function from the command line, so the minimal spec's reward module would be refused there).
SPEC = {
    "experiment": {"verl": "0.9.1"},
    "data": {"train_batch_size": 16, "val_batch_size": 8},
    "actor": {"ppo_mini_batch_size": 8, "grad_clip": 0.5, "warmup_style": "cosine"},
    "critic": {"grad_clip": 0.25, "model_path": "critic"},
}


def _spec(release: str = "0.9.1", **tables) -> str:
    return support.spec_toml(support.spec_doc(SPEC, experiment={"verl": release}), **tables)


def _overrides(release: str) -> dict[str, str]:
    _, _, resolved, warnings = resolve_bytes(_spec(release).encode(), "spec.toml")
    return {o.key: o.text for o in resolved.overrides}, {w.key: w.message for w in warnings}


@pytest.mark.parametrize("release, actor, critic", [
    ("0.7.1", "actor_rollout_ref.actor.grad_clip", "critic.grad_clip"),
    ("0.8.0", "actor_rollout_ref.actor.optim.clip_grad", "critic.optim.clip_grad"),
    ("0.9.1", "actor_rollout_ref.actor.optim.clip_grad", "critic.optim.clip_grad"),
])
def test_gradient_clipping_is_written_where_the_release_reads_it(release, actor, critic):
    overrides, _ = _overrides(release)
    assert overrides[actor] == f"{actor}=0.5" and overrides[critic] == f"{critic}=0.25"
    moved = {"actor_rollout_ref.actor.grad_clip", "actor_rollout_ref.actor.optim.clip_grad",
             "critic.grad_clip", "critic.optim.clip_grad"} - {actor, critic}
    assert not moved & set(overrides)


def test_the_unread_key_is_refused_as_a_raw_override_with_the_key_that_is_read():
    text = _spec(verl={"extra_overrides": ["actor_rollout_ref.actor.grad_clip=0.1"]})
    with pytest.raises(SpecError) as info:
        compile_bytes(text.encode(), "spec.toml")
    (problem,) = info.value.problems
    assert problem.key == "verl.extra_overrides.0" and "accepted and ignored" in problem.message
    assert "actor_rollout_ref.actor.optim.clip_grad" in (problem.message + " " + (problem.hint or ""))


@pytest.mark.parametrize("release", ["0.2.0.post2", "0.3.0.post0", "0.3.0.post1"])
def test_settings_nothing_reads_are_written_as_said_and_warned(release):
    overrides, warnings = _overrides(release)
    # Written: verl takes them, and the launch is what the spec says.
    assert overrides["data.val_batch_size"] == "data.val_batch_size=8"
    assert overrides["actor_rollout_ref.actor.optim.warmup_style"] == 'actor_rollout_ref.actor.optim.warmup_style="cosine"'
    assert "has no effect" in warnings["data.val_batch_size"] and "whole set" in warnings["data.val_batch_size"]
    assert "constant" in warnings["actor.warmup_style"]


def test_settings_the_release_reads_are_not_warned():
    _, warnings = _overrides("0.4.0")
    assert "data.val_batch_size" not in warnings and "actor.warmup_style" not in warnings


# -- against the wheels ---------------------------------------------------------------------------------------------


def _read_names(release: str) -> set[str]:
    """Every name the release's code reads as ``.name``, ``["name"]``/``get("name")`` or passes as ``name=``."""
    names: set[str] = set()
    pattern = re.compile(r"\.([A-Za-z_]\w*)|[\"']([A-Za-z_]\w*)[\"']|\b([A-Za-z_]\w*)\s*=(?!=)")
    with zipfile.ZipFile(ki.fetch_wheel(release)) as zf:
        for member in zf.namelist():
            if member.startswith("verl/") and member.endswith(".py"):
                for groups in pattern.findall(zf.read(member).decode(errors="replace")):
                    names.update(g for g in groups if g)
    return names


@pytest.mark.slow
@pytest.mark.wheels
@pytest.mark.parametrize("release", supported_releases())
def test_every_written_key_is_read_in_its_release(release):
    """Each key a lock writes has its last name read somewhere in that release's code,
    or the map says nothing reads it.

    A coarse check -- it cannot see which of two readers runs (0.8.0's
    ``grad_clip`` survives in the optimizer's deprecated alias) -- that
    catches a map entry pointing at a key verl only declares, as 0.2's
    ``val_batch_size``.
    """
    names = _read_names(release)
    for variant in ("fsdp", "megatron"):
        lock = load_lock(release, variant)
        for name, target in lock.targets.items():
            if target.kind != "table":
                leaf = target.key.rsplit(".", 1)[-1]
                assert leaf in names or target.unread, f"verl {release} ({variant}): nothing reads {target.key} ({name})"


def test_what_verl_091s_v1_trainer_never_reads_is_warned():
    # Each found by tracing the key from the yaml to its readers in verl 0.9.1
    # (docs/notes/verl-releases.md, "Keys declared but never read").
    text = _spec(critic={"use_dynamic_bsz": True}, trainer={"balance_batch": False},
                 rollout={"multi_turn": {"enable": True}}, data={"truncation": "left"},
                 actor={"clip_ratio": 0.3, "use_torch_compile": False})
    _, _, resolved, warnings = resolve_bytes(text.encode(), "spec.toml")
    said = {w.key: w.message for w in warnings}
    for setting, words in [("data.truncation", "left-truncates"), ("trainer.balance_batch", "always balances"),
                           ("rollout.multi_turn.enable", "default_agent_loop"), ("actor.clip_ratio", "clip_ratio_low"),
                           ("actor.use_torch_compile", "fsdp_config.use_torch_compile"),
                           ("critic.use_dynamic_bsz", "token count")]:
        assert "has no effect" in said[setting] and words in said[setting], setting
    # Still written: the launch is what the spec says.
    keys = {o.key for o in resolved.overrides}
    assert {"data.truncation", "trainer.balance_batch", "actor_rollout_ref.actor.clip_ratio"} <= keys
    # What it does read is not warned.
    assert "data.val_batch_size" not in said and "actor.grad_clip" not in said


@pytest.mark.parametrize("release, engine, setting, line, warned", [
    ("0.9.1", "sglang", "rollout.enable_chunked_prefill", "enable_chunked_prefill = true", True),
    ("0.9.1", "vllm", "rollout.enable_chunked_prefill", "enable_chunked_prefill = true", False),
    ("0.4.1", "sglang", "rollout.max_num_batched_tokens", "max_num_batched_tokens = 8192", True),
    ("0.9.1", "vllm", "rollout.do_sample", "do_sample = false", True),
    ("0.7.0", "sglang", "rollout.do_sample", "do_sample = false", True),
    ("0.6.1", "sglang", "rollout.do_sample", "do_sample = false", False),
])
def test_rollout_settings_the_chosen_engine_never_reads_are_warned(release, engine, setting, line, warned):
    text = _spec(release, rollout={"engine": engine, **tomllib.loads(line)})
    _, _, resolved, warnings = resolve_bytes(text.encode(), "spec.toml")
    said = {w.key: w.message for w in warnings}
    assert (setting in said) is warned and (not warned or engine in said[setting])
    assert any(o.key.endswith(setting.rsplit(".", 1)[1]) for o in resolved.overrides)  # still written


@pytest.mark.parametrize("release, variant, setting, warned", [
    # The v1 trainer (default from 0.9.0) balances always; 0.8.0's trainer reads the switch.
    ("0.8.0", "fsdp", "trainer.balance_batch", False),
    ("0.9.0", "fsdp", "trainer.balance_batch", True),
    # The engines (from 0.8.0) never read the actor's use_torch_compile; 0.7.1's legacy workers did.
    ("0.7.1", "fsdp", "actor.use_torch_compile", False),
    ("0.8.0", "fsdp", "actor.use_torch_compile", True),
    # Megatron's grad_offload is stored and never read from 0.8.0 (0.9.1 dropped the key).
    ("0.8.0", "megatron", "actor.grad_offload", True),
    ("0.9.0", "megatron", "actor.grad_offload", True),
])
def test_each_release_is_warned_for_what_it_does_not_use(release, variant, setting, warned):
    section, field = setting.split(".")
    value = {"balance_batch": False, "use_torch_compile": False, "grad_offload": True}[field]
    tables = support.nested({setting: value, **({"actor.strategy": "megatron"} if variant == "megatron" else {})})
    text = support.spec_toml({"experiment": {"verl": release}}, **tables)
    _, lock, _, warnings = resolve_bytes(text.encode(), "spec.toml")
    assert lock.variant == variant
    said = {w.key: w.message for w in warnings}
    assert (setting in said and "has no effect" in said[setting]) is warned, said.get(setting)


def test_a_global_micro_batch_alone_is_said_to_fail_from_080():
    text = _spec(actor={"ppo_micro_batch_size": 8})
    _, _, _, warnings = resolve_bytes(text.encode(), "spec.toml")
    said = {w.key: w.message for w in warnings}
    assert "fails at start" in said["actor.ppo_micro_batch_size"] and "ppo_micro_batch_size_per_gpu" in said[
        "actor.ppo_micro_batch_size"]
    _, _, _, warnings = resolve_bytes(_spec("0.7.1", actor={"ppo_micro_batch_size": 8}).encode(), "spec.toml")
    assert "actor.ppo_micro_batch_size" not in {w.key for w in warnings}
