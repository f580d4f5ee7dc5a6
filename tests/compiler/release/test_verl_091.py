"""The verl 0.9.1 key map against the real verl 0.9.1 package installed in the test environment."""

from __future__ import annotations

from pathlib import Path

import pytest

import support
from tutorrl.compiler import compile_bytes, write_bundle
from tutorrl.compiler.pipeline.resolve import resolve
from tutorrl.compiler.release.entries import find_entry
from tutorrl.compiler.release.keymap import load_lock
from tutorrl.compiler.spec.flat import variant_of
from tutorrl.compiler.spec.load import parse_spec
from tutorrl.compiler.spec.normal_form import normalize

pytestmark = pytest.mark.needs_verl

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


def test_every_locked_key_is_in_the_real_config_or_appended_where_verl_reads_it(composed):
    """The lock against the real installed verl 0.9.1 (not only its extracted key set)."""
    from omegaconf import DictConfig, OmegaConf

    variant, config = composed
    lock = load_lock("0.9.1", variant)
    assert len(lock.targets) > 150, "the map is nearly empty"
    for setting, target in lock.targets.items():
        if target.kind == "table":
            node = OmegaConf.select(config, target.key)
            if target.passthrough and node is None:
                from tutorrl.compiler.release.keymap import load_keymap

                entry = load_keymap().setting[setting].at("0.9.1", variant)
                assert target.key in UNDECLARED_BUT_READ or target.key in lock.undeclared or entry.undeclared, setting
            else:
                assert isinstance(node, DictConfig), (setting, target.key)
                declared = {k for k in target.declared}
                real = {k for k, _ in _leaves(OmegaConf.to_container(node), "")}
                assert declared <= real, (setting, declared - real)
            continue
        parent, _, leaf = target.key.rpartition(".")
        node = OmegaConf.select(config, parent)
        if target.plus:
            # `+` is right only where verl declares nothing: an empty dict
            # (override_config) or an undeclared table.
            assert node is None or leaf not in list(node.keys()), f"{target.key} exists: '+' would fail"
        else:
            # (`in` on a DictConfig is False for mandatory "???" values.)
            assert isinstance(node, DictConfig) and leaf in list(node.keys()), \
                f"{setting} -> {target.key} is not a verl 0.9.1 key"


def _leaves(value, prefix):
    if isinstance(value, dict) and value:
        for k, v in value.items():
            yield from _leaves(v, f"{prefix}{k}.")
    else:
        yield prefix[:-1], value


def test_seed_trap_attn_implementation_needs_append():
    """The team's launcher documents override_config.attn_implementation without '+'; 0.9.1 rejects that."""
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException, match="To append to your config use"):
        support.compose_verl("ppo_trainer", ["actor_rollout_ref.model.override_config.attn_implementation=sdpa"])
    assert load_lock("0.9.1", "fsdp").targets["model.attn_implementation"].plus


# The examples written for 0.9.1 (the CPU training specs target 0.5.0: test_releases composes them
# with 0.5.0's own config, and tests/e2e/test_real_training.py runs them).
FOR_091 = [p for p in support.example_specs() if 'verl = "0.9.1"' in p.read_text()]


@pytest.mark.parametrize("spec_path", FOR_091, ids=lambda p: p.stem)
def test_example_composes_with_the_intended_values(spec_path, tmp_path, standin_python):
    raw = spec_path.read_bytes()
    bundle = write_bundle(compile_bytes(raw, spec_path.name), tmp_path).path
    argv = standin_python.argv(bundle, env={"WANDB_API_KEY": "x"})
    spec = normalize(parse_spec(raw, spec_path.name)[0])
    entry = find_entry(spec.experiment.entry)
    assert argv[:3] == ["-m", entry.module, "--config-name"]
    if entry.default:
        config = support.compose_verl(argv[3], argv[4:])
    else:
        # The entry's own config folder in the installed verl; its search path (pkg://verl.trainer.config,
        # the first override) names the same trainer config folder compose_verl reads.
        site = Path(support.verl_config_dir()).parents[2]
        assert argv[4] == "hydra.searchpath=[pkg://verl.trainer.config]"
        config = support.compose_verl(argv[3], [f"hydra.searchpath=[file://{support.verl_config_dir()}]", *argv[5:]],
                                      config_dir=str(site / entry.config_dir))

    rmap = load_lock("0.9.1", variant_of(spec), spec.experiment.entry)
    resolved, _ = resolve(spec, rmap, None if not spec.verl.extra_overrides else __import__(
        "tutorrl.compiler.release.keysets", fromlist=["load_keyset"]).load_keyset("0.9.1", rmap.variant, rmap.entry))
    checked = 0
    for override in resolved.overrides:
        if override.raw is not None:
            continue
        assert support.lookup(config, override.key) == support.as_launched(spec, override.value), override.key
        checked += 1
    assert checked >= 15
    assert support.lookup(config, "model_engine") == ("megatron" if rmap.variant == "megatron" else "dp")
