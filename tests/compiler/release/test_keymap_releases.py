"""Errors that teach: release ranges in words, moved keys in extra_overrides."""

from __future__ import annotations

import re

import pytest

from tutorrl.compiler.pipeline.compile import compile_bytes
from tutorrl.compiler.release.keymap import describe_releases, load_keymap
from tutorrl.errors import SpecError

import support
from compiler_helpers import CHESS, FSDP_CUSTOM, spec_at


@pytest.mark.parametrize("releases,words", [
    (["0.7.1", "0.8.0", "0.9.0", "0.9.1"], "from verl 0.7.1"),
    (["0.2.0.post2", "0.3.0.post0"], "up to verl 0.3.0.post0"),
    (["0.9.1"], "only in verl 0.9.1"),
    (["0.5.0", "0.6.0", "0.6.1"], "in verl 0.5.0 to 0.6.1"),
    (["0.4.1", "0.5.0", "0.8.0", "0.9.0", "0.9.1"], "in verl 0.4.1 to 0.5.0 and 0.8.0 to 0.9.1"),
    (load_keymap().releases, "in every supported verl release"),
])
def test_release_ranges_read_as_words(releases, words):
    assert describe_releases(releases) == words


def _refusal(text: str) -> str:
    with pytest.raises(SpecError) as err:
        compile_bytes(text.encode(), "t.toml")
    return err.value.render()


def _with_extra(release: str, override: str) -> str:
    return spec_at(release, FSDP_CUSTOM, verl={"extra_overrides": [override]})


@pytest.mark.parametrize("release,override,says", [
    # The key moved: name it as this release spells it.
    ("0.6.1", "reward.custom_reward_function.name=x", "verl 0.6.1 calls it 'custom_reward_function.name'"),
    ("0.6.1", "+reward.custom_reward_function.reward_kwargs.z=1",
     "verl 0.6.1 calls it '+custom_reward_function.reward_kwargs.z'"),
    # No home in this release: say where it exists.
    ("0.6.1", "reward.num_workers=2", "'reward.workers' setting, which exists from verl 0.7.1"),
    # Accepted and ignored: refused, with the key that is read.
    ("0.9.1", "custom_reward_function.name=x", "use 'reward.custom_reward_function.name'"),
    ("0.9.0", "reward_model.num_workers=2", "use 'reward.num_workers'"),
    # Not in the map at all: the nearest key of the release.
    ("0.9.1", "trainer.val_before_trian=false", "did you mean 'trainer.val_before_train'?"),
])
def test_extra_overrides_teach_the_release_spelling(release, override, says):
    assert says in _refusal(_with_extra(release, override))


def test_legacy_reward_keys_still_read_in_071_and_080():
    # main_ppo migrates the top-level block there, so verl reads them.
    for release in ("0.7.1", "0.8.0"):
        text = spec_at(release, CHESS, verl={"extra_overrides": ["reward_model.num_workers=2"]})
        assert compile_bytes(text.encode(), "t.toml")


def test_megatron_selection_per_release():
    megatron = support.spec_doc(CHESS, actor={"strategy": "megatron"})
    for release, line in (("0.7.1", "--config-name ppo_megatron_trainer"), ("0.8.0", "--config-name ppo_trainer")):
        launch = compile_bytes(spec_at(release, megatron).encode(), "t.toml").files["launch.sh"].decode()
        assert line in launch
        assert ("model_engine=megatron" in launch) == (release == "0.8.0")


def test_data_seed_needs_plus_up_to_060():
    # Read with data.get("seed", 1) but declared by no yaml up to 0.6.0.
    for release, plus in (("0.2.0.post2", True), ("0.6.0", True), ("0.6.1", False)):
        text = f'[experiment]\nverl = "{release}"\n[data]\nseed = 1\n'
        launch = compile_bytes(text.encode(), "t.toml").files["launch.sh"].decode()
        assert bool(re.search(r"^  \+data\.seed=1$", launch, re.M)) == plus
