"""The verl 0.9.1 key map against the real verl 0.9.1 package installed in the test environment."""

from __future__ import annotations

import pytest

import support
from tutorrl.compiler import compile_bytes, write_bundle
from tutorrl.compiler.keymap import load_lock
from tutorrl.compiler.load import parse_spec
from tutorrl.compiler.normalize import normalize
from tutorrl.compiler.resolve import resolve
from tutorrl.compiler.settings import variant_of

SELECT = {"fsdp": [], "megatron": ["model_engine=megatron"]}
# Tables verl reads with .get() but never declares: '+' is the only way in.
UNDECLARED_BUT_READ = {
    "reward.custom_reward_function.reward_kwargs":
        "verl/trainer/ppo/reward.py reads reward_fn_config.get('reward_kwargs', {}) and passes them to the function",
}


@pytest.fixture(scope="module", params=["fsdp", "megatron"])
def composed(request):
    """(variant, verl's composed default config) for the installed verl 0.9.1."""
    return request.param, support.compose_verl("ppo_trainer", SELECT[request.param])


def test_installed_verl_is_the_mapped_release():
    import importlib.metadata

    assert importlib.metadata.version("verl") == "0.9.1"


def test_every_mapped_key_exists_or_is_appended_under_an_open_dict(composed):
    from omegaconf import DictConfig, OmegaConf

    variant, config = composed
    rmap = load_lock("0.9.1", variant)
    assert rmap.targets, "the map is empty"
    for setting, target in rmap.targets.items():
        for key in target.keys:
            key = key.replace("*", "probe")
            parent, _, leaf = key.rpartition(".")
            node = OmegaConf.select(config, parent)
            if target.append and parent in UNDECLARED_BUT_READ:
                assert node is None, f"{parent} is declared now: revisit the '+'"
                continue
            assert isinstance(node, DictConfig), (setting, key)
            if target.append:
                # `+` is right only where verl declares nothing: an empty dict
                # (override_config) or an undeclared table (reward_kwargs).
                assert leaf not in list(node.keys()), f"{key} exists: '+' would fail"
            else:
                # (`in` on a DictConfig is False for mandatory "???" values.)
                assert leaf in list(node.keys()), f"{setting} -> {key} is not a verl 0.9.1 key"


def test_seed_trap_attn_implementation_needs_append():
    """The team's launcher documents override_config.attn_implementation without '+'; 0.9.1 rejects that."""
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException, match="To append to your config use"):
        support.compose_verl("ppo_trainer", ["actor_rollout_ref.model.override_config.attn_implementation=sdpa"])
    assert load_lock("0.9.1", "fsdp").target("model.attn_implementation").append


@pytest.mark.parametrize("spec_path", support.example_specs(), ids=lambda p: p.stem)
def test_example_composes_with_the_intended_values(spec_path, tmp_path, standin_python):
    raw = spec_path.read_bytes()
    bundle = write_bundle(compile_bytes(raw, spec_path.name), tmp_path).path
    argv = standin_python.argv(bundle, env={"WANDB_API_KEY": "x"})
    assert argv[:3] == ["-m", "verl.trainer.main_ppo", "--config-name"]
    config = support.compose_verl(argv[3], argv[4:])

    spec = normalize(parse_spec(raw, spec_path.name)[0])
    rmap = load_lock("0.9.1", variant_of(spec))
    resolved, _ = resolve(spec, rmap, None if not spec.verl.extra_overrides else __import__(
        "tutorrl.compiler.keysets", fromlist=["load_keyset"]).load_keyset("0.9.1", rmap.variant))
    checked = 0
    for override in resolved.overrides:
        if override.raw is not None:
            continue
        assert support.lookup(config, override.key) == override.value, override.key
        checked += 1
    assert checked >= 30
    assert support.lookup(config, "model_engine") == ("megatron" if rmap.variant == "megatron" else "dp")
