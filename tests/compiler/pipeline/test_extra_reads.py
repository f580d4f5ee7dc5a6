"""`[verl] extra_overrides` accepts what verl reads and says truly why it refuses the rest.

Each case was read in the release's wheel (the key map's read_by citations are
checked there by test_keysets); the cases are launches of the third-party corpus.
"""

import pytest

import support
from tutorrl.compiler import compile_bytes
from tutorrl.compiler.pipeline.resolve import check_extra
from tutorrl.compiler.release.keymap import load_lock
from tutorrl.compiler.release.keysets import load_keyset
from tutorrl.errors import SpecError


def _check(text: str, release: str, variant: str = "fsdp", emitted: dict | None = None, engine: str | None = None):
    return check_extra(text, load_lock(release, variant), load_keyset(release, variant), emitted or {}, engine)


@pytest.mark.parametrize("release", ["0.7.1", "0.8.0"])
@pytest.mark.parametrize("text", ["+reward_model.reward_kwargs.overlong_buffer_cfg.len=4096",
                                  "+reward_model.reward_kwargs.max_resp_len=8192",
                                  "+custom_reward_function.reward_kwargs.threshold=0.5"])
def test_legacy_reward_kwargs_are_read_where_main_ppo_migrates_them(release, text):
    # main_ppo.main runs migrate_legacy_reward_impl at 0.7.1 and 0.8.0, copying
    # them to reward.*; the lock said "never read" there before.
    override, problem = _check(text, release)
    assert problem is None and override.raw == text


@pytest.mark.parametrize("release", ["0.9.0", "0.9.1"])
def test_legacy_reward_kwargs_are_not_read_once_main_ppo_stops_migrating(release):
    override, (message, hint) = _check("+reward_model.reward_kwargs.max_resp_len=8192", release)
    assert override is None and "never read" in message
    assert "reward.reward_kwargs.max_resp_len" in hint


@pytest.mark.parametrize("release", ["0.2.0.post2", "0.3.0.post1", "0.4.1", "0.5.0"])
@pytest.mark.parametrize("variant", ["fsdp", "megatron"])
@pytest.mark.parametrize("name", ["repetition_penalty", "presence_penalty", "frequency_penalty", "min_p", "stop",
                                  "min_tokens"])
def test_rollout_sampling_params_are_read_by_the_vllm_rollout(release, variant, name):
    # vllm_rollout_spmd hands every rollout key that names a SamplingParams attribute to vLLM.
    override, problem = _check(f"+actor_rollout_ref.rollout.{name}=1", release, variant)
    assert problem is None and override.append


def test_a_sampling_param_newer_than_the_vllm_a_release_allows_is_not_read():
    # bad_words came with vLLM 0.8; verl 0.2.0.post2 allows vLLM up to 0.6.3.
    assert _check("+actor_rollout_ref.rollout.bad_words=[x]", "0.3.0.post1")[1] is None
    override, (message, _) = _check("+actor_rollout_ref.rollout.bad_words=[x]", "0.2.0.post2")
    assert override is None and "never read" in message


@pytest.mark.parametrize("release", ["0.3.0.post0", "0.4.1", "0.5.0"])
def test_sglang_sampling_params_are_read_by_the_sglang_rollout(release):
    # From 0.3.0 the SGLang rollout copies rollout keys naming SGLang's sampling fields the same way.
    override, problem = _check("+actor_rollout_ref.rollout.max_new_tokens=128", release)
    assert problem is None and override.append


def test_before_the_sglang_rollout_its_sampling_fields_are_not_read():
    override, (message, _) = _check("+actor_rollout_ref.rollout.max_new_tokens=128", "0.2.0.post2")
    assert override is None and "never read" in message


@pytest.mark.parametrize("release", ["0.6.0", "0.7.0", "0.9.1"])
def test_from_060_a_sampling_param_stops_the_rollout_config(release):
    override, (message, _) = _check("+actor_rollout_ref.rollout.presence_penalty=0.5", release)
    assert override is None and "builds RolloutConfig from 'actor_rollout_ref.rollout'" in message


@pytest.mark.parametrize("release", ["0.7.0", "0.9.1"])
def test_rollout_repetition_penalty_is_not_read_where_the_agent_loop_fixes_it(release):
    override, (message, _) = _check("+actor_rollout_ref.rollout.repetition_penalty=1.1", release)
    assert override is None and "never read" in message and "up to verl 0.5.0" in message


def test_validation_repetition_penalty_is_read_nowhere():
    # Validation passes only top_k, top_p and temperature to the engine.
    override, (message, _) = _check("+actor_rollout_ref.rollout.val_kwargs.repetition_penalty=1.1", "0.4.1")
    assert override is None and "never read" in message


@pytest.mark.parametrize("release", ["0.4.1", "0.7.1", "0.9.1"])
def test_a_value_in_place_of_a_table_is_refused_as_what_it_is(release):
    # RLHFlow/Minimal-RL sets actor.policy_loss=vanilla (a key of its own verl);
    # stock verl composes it and then fails on config.policy_loss.get("loss_mode").
    override, (message, hint) = _check("actor_rollout_ref.actor.policy_loss=vanilla", release)
    assert override is None
    assert message.startswith(f"'actor_rollout_ref.actor.policy_loss' is a table in verl {release} (")
    assert "has no key" not in message and "never read" not in message
    assert hint == ("set the key you mean under it, e.g. 'actor_rollout_ref.actor.policy_loss.loss_mode=vanilla' "
                    "(the spec's actor.policy_loss)")


def test_a_table_given_as_a_table_is_accepted():
    text = "actor_rollout_ref.actor.policy_loss={loss_mode:vanilla}"
    override, problem = _check(text, "0.9.1")
    assert problem is None and override.raw == text and not override.append


def test_a_table_given_whole_where_the_spec_sets_a_key_under_it_is_refused():
    emitted = {"actor_rollout_ref.actor.policy_loss.loss_mode": "actor.policy_loss"}
    override, (message, _) = _check("actor_rollout_ref.actor.policy_loss={loss_mode:vanilla}", "0.9.1",
                                    emitted=emitted)
    assert override is None and "actor.policy_loss" in message


# -- sections verl builds into dataclasses (compiler/release/built/) ------------------------------------------------


@pytest.mark.parametrize("release, variant, cls", [("0.6.0", "fsdp", "FSDPActorConfig"),
                                                   ("0.9.1", "fsdp", "FSDPActorConfig"),
                                                   ("0.9.1", "megatron", "McoreActorConfig")])
def test_a_field_the_built_dataclass_lacks_is_refused_as_stopping_verl(release, variant, cls):
    override, (message, hint) = _check("+actor_rollout_ref.actor.clip_ratio_typo=0.3", release, variant)
    assert override is None
    assert message.startswith(f"verl {release} ({variant}) builds {cls} from 'actor_rollout_ref.actor' "
                              "and refuses fields it does not declare: 'clip_ratio_typo'")
    assert "never read" not in message and hint


@pytest.mark.parametrize("release", ["0.6.0", "0.9.1"])
def test_a_nested_built_section_is_checked_against_its_own_class(release):
    override, (message, hint) = _check("+actor_rollout_ref.actor.fsdp_config.wrap_polcy=1", release)
    assert override is None and "builds FSDPEngineConfig from 'actor_rollout_ref.actor.fsdp_config'" in message
    assert hint == "did you mean 'actor_rollout_ref.actor.fsdp_config.wrap_policy'?"


@pytest.mark.parametrize("release", ["0.6.0", "0.9.1"])
@pytest.mark.parametrize("text", ["+actor_rollout_ref.rollout.engine_kwargs.vllm.swap_space=4",
                                  "+actor_rollout_ref.model.override_config.attention_dropout=0.1"])
def test_keys_under_a_dict_field_of_a_built_section_stay_accepted(release, text):
    override, problem = _check(text, release)
    assert problem is None and override.append


@pytest.mark.parametrize("release", ["0.7.1", "0.8.0"])
def test_free_form_reward_kwargs_stay_accepted_where_read(release):
    override, problem = _check("+reward_model.reward_kwargs.max_resp_len=8192", release)
    assert problem is None and override.raw.endswith("=8192")


def test_before_060_the_actor_is_a_plain_dict_and_the_key_is_only_unread():
    override, (message, _) = _check("+actor_rollout_ref.actor.clip_ratio_typo=0.3", "0.5.0")
    assert override is None and "never read" in message and "builds" not in message


def test_the_rollout_seed_is_read_up_to_050_and_stops_060s_rollout_config():
    override, problem = _check("+actor_rollout_ref.rollout.seed=7", "0.5.0")
    assert problem is None and override.append
    override, (message, _) = _check("+actor_rollout_ref.rollout.seed=7", "0.6.1")
    assert override is None and "builds RolloutConfig from 'actor_rollout_ref.rollout'" in message


def test_the_compile_names_the_key_the_class_and_the_release():
    text = support.spec_toml(verl={"extra_overrides": ["+critic.cliprange_valu=0.5"]})
    with pytest.raises(SpecError) as info:
        compile_bytes(text.encode(), "spec.toml")
    (problem,) = info.value.problems
    assert problem.key == "verl.extra_overrides.0"
    assert problem.message.startswith("verl 0.9.1 (fsdp) builds FSDPCriticConfig from 'critic' and refuses fields "
                                      "it does not declare: 'cliprange_valu'")
    assert problem.hint == "did you mean 'critic.cliprange_value'?"


# -- an engine's own sampling fields are read only with that engine ---------------------------------------------------


def test_the_tiny_cpu_spec_on_the_hf_rollout_is_refused_a_sglang_sampling_field():
    # The reviewer's case: verl 0.5.0's HF rollout copies no rollout key into sampling parameters.
    base = support.example_spec("tiny_cpu_grpo.toml")
    assert base["rollout"]["engine"] == "hf"
    text = support.spec_toml(base, verl={"extra_overrides": ["+actor_rollout_ref.rollout.max_new_tokens=1"]})
    with pytest.raises(SpecError) as info:
        compile_bytes(text.encode(), "tiny_cpu_grpo.toml")
    (problem,) = info.value.problems
    assert problem.key == "verl.extra_overrides.0"
    assert problem.message.startswith("verl 0.5.0 reads 'actor_rollout_ref.rollout.max_new_tokens' only with "
                                      "rollout.name=sglang; this spec's rollout is hf: verl would accept it and "
                                      "never read it")
    assert problem.hint == "set rollout.engine = 'sglang', or leave the key out"


@pytest.mark.parametrize("name", ["max_new_tokens", "regex", "presence_penalty", "repetition_penalty"])
def test_no_sampling_field_is_read_with_the_hf_rollout(name):
    override, (message, _) = _check(f"+actor_rollout_ref.rollout.{name}=1", "0.5.0", engine="hf")
    assert override is None and "this spec's rollout is hf" in message and "never read" in message


def test_a_vllm_field_is_read_with_vllm_and_not_with_another_engine():
    override, problem = _check("+actor_rollout_ref.rollout.presence_penalty=0.5", "0.5.0", engine="vllm")
    assert problem is None and override.append
    override, (message, _) = _check("+actor_rollout_ref.rollout.presence_penalty=0.5", "0.5.0", engine="hf")
    assert override is None and "only with rollout.name=sglang or vllm; this spec's rollout is hf" in message
    # logit_bias is vLLM's alone: not read with the SGLang rollout.
    assert _check("+actor_rollout_ref.rollout.logit_bias={}", "0.5.0", engine="vllm")[1] is None
    override, (message, hint) = _check("+actor_rollout_ref.rollout.logit_bias={}", "0.5.0", engine="sglang")
    assert override is None
    assert message.startswith("verl 0.5.0 reads 'actor_rollout_ref.rollout.logit_bias' only with "
                              "rollout.name=vllm; this spec's rollout is sglang")
    assert hint == "set rollout.engine = 'vllm', or leave the key out"


def test_a_sglang_field_is_read_with_sglang_and_not_with_vllm():
    override, problem = _check("+actor_rollout_ref.rollout.max_new_tokens=128", "0.4.1", engine="sglang")
    assert problem is None and override.append
    override, (message, hint) = _check("+actor_rollout_ref.rollout.max_new_tokens=128", "0.4.1", engine="vllm")
    assert override is None
    assert "only with rollout.name=sglang; this spec's rollout is vllm" in message
    assert hint == "set rollout.engine = 'sglang', or leave the key out"


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_field_both_engines_have_is_read_with_either(engine):
    override, problem = _check("+actor_rollout_ref.rollout.frequency_penalty=0.5", "0.4.1", engine=engine)
    assert problem is None and override.append
    override, (message, _) = _check("+actor_rollout_ref.rollout.frequency_penalty=0.5", "0.4.1", engine="hf")
    assert override is None and "only with rollout.name=sglang or vllm; this spec's rollout is hf" in message


def test_a_compile_without_rollout_engine_judges_by_the_releases_default_engine():
    # verl 0.5.0's rollout.name defaults to vllm: a vLLM-only field is read, an SGLang-only one is not.
    ok = support.spec_toml(experiment={"verl": "0.5.0"}, rollout={"engine": support.DROP},
                           verl={"extra_overrides": ["+actor_rollout_ref.rollout.logit_bias={}"]})
    launch = compile_bytes(ok.encode(), "spec.toml").files["launch.sh"].decode()
    assert "+actor_rollout_ref.rollout.logit_bias={}" in launch
    refused = support.spec_toml(experiment={"verl": "0.5.0"}, rollout={"engine": support.DROP},
                                verl={"extra_overrides": ["+actor_rollout_ref.rollout.max_new_tokens=1"]})
    with pytest.raises(SpecError) as info:
        compile_bytes(refused.encode(), "spec.toml")
    assert any("this spec's rollout is vllm" in p.message for p in info.value.problems)


def test_where_else_a_key_is_read_counts_only_releases_reading_it_with_this_engine():
    # No release reads max_new_tokens with the HF rollout; 0.3.0 to 0.5.0 read it with SGLang's.
    _, (message, _) = _check("+actor_rollout_ref.rollout.max_new_tokens=1", "0.7.0", engine="hf")
    assert "builds RolloutConfig" in message and "(it exists" not in message
    _, (message, _) = _check("+actor_rollout_ref.rollout.max_new_tokens=1", "0.2.0.post2", engine="sglang")
    assert message.endswith("never read it (it exists in verl 0.3.0.post0 to 0.5.0: verl reads it there, "
                            "though no yaml declares it)")


def test_the_lock_records_which_engines_read_an_engine_bound_key():
    lock = load_lock("0.4.1", "fsdp")
    assert lock.undeclared_engines["actor_rollout_ref.rollout.frequency_penalty"] == ("sglang", "vllm")
    assert lock.undeclared_engines["actor_rollout_ref.rollout.max_new_tokens"] == ("sglang",)
    # data.seed is read whatever the engine: not engine-bound.
    assert "data.seed" in lock.undeclared and "data.seed" not in lock.undeclared_engines
    assert lock.reads_undeclared("data.seed", "hf")
    assert not lock.reads_undeclared("actor_rollout_ref.rollout.max_new_tokens", "hf")
    assert lock.reads_undeclared("actor_rollout_ref.rollout.max_new_tokens")


def test_engines_on_a_dict_read_whole_is_a_map_error():
    import msgspec

    from tutorrl.compiler.release.keymap import LockError, build_lock, load_keymap

    keymap = load_keymap()
    bound = msgspec.structs.replace(keymap.facts.passthrough[0], engines=("vllm",))
    facts = msgspec.structs.replace(keymap.facts, passthrough=(bound,) + keymap.facts.passthrough[1:])
    with pytest.raises(LockError, match=f"{bound.key}: `engines` is for an \\[\\[undeclared\\]\\] key"):
        build_lock("0.5.0", "fsdp", msgspec.structs.replace(keymap, facts=facts))
