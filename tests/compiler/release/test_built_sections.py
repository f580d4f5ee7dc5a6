"""The sections verl builds into dataclasses (compiler/release/built/) are what the wheels say.

The committed files are re-derived from every supported release's wheel; the
fields read from the source agree with the real installed verl 0.9.1's
dataclasses; and verl 0.9.1's own conversion refuses a field its class does not
declare while a dict field takes any key.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
from pathlib import Path

import pytest

from tutorrl.compiler.release import built as built_mod, keyset_import as ki, load_built
from tutorrl.compiler.release.keymap import supported_releases
from tutorrl.compiler.release.built_import import WheelSource, _config_path, derive

RELEASES = supported_releases()


@pytest.mark.wheels
@pytest.mark.parametrize("release", RELEASES)
def test_committed_built_sections_are_rederived_from_the_wheel(release):
    try:
        wheel = ki.fetch_wheel(release)
    except ki.KeysetImportError as exc:
        pytest.fail(f"verl {release} wheel unavailable (needs the package index or a cached wheel): {exc}")
    for name, data in derive(release, wheel).items():
        path = Path(built_mod._DIR) / name
        if b'"sections": {\n  }' in data:
            assert not path.exists(), f"{name}: the wheel builds no section, yet the file exists"
        else:
            assert path.read_bytes() == data, f"{name} is not what the wheel says (run tools/built_sections.py)"


def test_from_060_the_worker_tables_are_built_and_before_only_the_profiler():
    early = load_built("0.5.0", "fsdp").sections
    assert set(early) == {"actor_rollout_ref.profiler", "critic.profiler", "reward_model.profiler"}
    late = load_built("0.6.0", "fsdp").sections
    assert late["actor_rollout_ref.actor"].name == "FSDPActorConfig"
    assert late["actor_rollout_ref.rollout"].name == "RolloutConfig"
    assert late["critic"].name == "FSDPCriticConfig"
    assert late["actor_rollout_ref.actor.policy_loss"].within == "actor_rollout_ref.actor"
    assert load_built("0.6.0", "megatron").sections["actor_rollout_ref.actor"].name == "McoreActorConfig"
    assert load_built("0.3.0.post1", "fsdp").sections == {}


def _installed_verl():
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        pytest.fail("verl is not installed in this environment (the dev environment has verl 0.9.1)")
    import verl

    if getattr(verl, "__version__", "") != "0.9.1":
        pytest.fail(f"the dev environment's verl is {verl.__version__}, expected 0.9.1")
    return Path(next(iter(spec.submodule_search_locations)))


@pytest.mark.needs_verl
@pytest.mark.parametrize("variant", ["fsdp", "megatron"])
def test_fields_read_from_the_source_are_the_real_dataclass_fields(variant):
    _installed_verl()
    sections = load_built("0.9.1", variant).sections
    assert len(sections) > 40
    for section, info in sections.items():
        module, _, name = info.cls.rpartition(".")
        cls = getattr(importlib.import_module(module), name)
        real = sorted(f.name for f in dataclasses.fields(cls) if f.init)
        assert list(info.fields) == real, section


def _compose_091(*overrides: str):
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    config_dir = _installed_verl() / "trainer" / "config"
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir), version_base=None):
            # What the classes' own checks need on top of the defaults (a micro batch, an engine).
            return compose(config_name="ppo_trainer",
                           overrides=["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
                                      "actor_rollout_ref.rollout.name=vllm", *overrides])
    finally:
        GlobalHydra.instance().clear()


@pytest.mark.needs_verl
def test_real_verl_refuses_a_field_its_dataclass_does_not_declare():
    from verl.utils.config import omega_conf_to_dataclass

    assert omega_conf_to_dataclass(_compose_091().actor_rollout_ref.actor).clip_ratio == 0.2
    # Hydra composes the appended key; verl stops when it builds the actor's config.
    cfg = _compose_091("+actor_rollout_ref.actor.clip_ratio_typo=0.3")
    assert cfg.actor_rollout_ref.actor.clip_ratio_typo == 0.3
    with pytest.raises(Exception) as info:
        omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)
    assert "clip_ratio_typo" in str(info.value)
    assert load_built("0.9.1", "fsdp").refusal("actor_rollout_ref.actor.clip_ratio_typo")[1].name == "FSDPActorConfig"


@pytest.mark.needs_verl
def test_real_verl_takes_any_key_under_a_dict_field():
    from verl.utils.config import omega_conf_to_dataclass

    cfg = _compose_091("+actor_rollout_ref.rollout.engine_kwargs.vllm.swap_space=4")
    rollout = omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)
    assert rollout.engine_kwargs["vllm"]["swap_space"] == 4
    assert load_built("0.9.1", "fsdp").refusal("actor_rollout_ref.rollout.engine_kwargs.vllm.swap_space") is None


def test_a_build_call_names_the_section_it_builds():
    import ast

    def path(text):
        return _config_path(ast.parse(text, mode="eval").body)

    assert path("self.config.actor.fsdp_config") == "actor.fsdp_config"
    assert path("config.get('profiler', {})") == "profiler"
    assert path("config.actor.get('profiler')") == "actor.profiler"
    assert path("omega_profiler_config") is None
    source = WheelSource({"verl/workers/fsdp_workers.py": (
        "class ActorRolloutRefWorker:\n"
        "    def build(self):\n"
        "        omega_conf_to_dataclass(self.config.rollout)\n"
        "def validate_config(config):\n"
        "    omega_conf_to_dataclass(config.critic)\n")})
    calls = {c[0] for c in source.build_calls("fsdp")}
    assert calls == {"actor_rollout_ref.rollout", "critic"}
    assert source.build_calls("megatron") == []
