"""`[verl] unread_overrides`: keys the release accepts and never reads, passed as written (a fork's keys).

The list is the spec saying its verl is not the release's own, so the release's
reading is the test: what verl reads is refused here (extra_overrides checks it
as verl reads it), and so is what verl would refuse or stop on.
"""

import pytest

import support
from tutorrl.compiler import compile_bytes
from tutorrl.compiler.pipeline import resolve_bytes
from tutorrl.errors import SpecError


def _spec(unread: list[str], release: str = "0.9.1", **tables) -> bytes:
    return support.spec_toml(experiment={"verl": release}, verl={"unread_overrides": unread}, **tables).encode()


def _refused(raw: bytes) -> list[tuple[str, str, str | None]]:
    with pytest.raises(SpecError) as info:
        compile_bytes(raw, "spec.toml")
    return [(p.key, p.message, p.hint) for p in info.value.problems]


@pytest.mark.needs_verl
def test_a_forks_keys_reach_the_launch_as_written_and_compose_with_verls_own_config():
    unread = ["+data.fork_filter_accuracy=True", "+trainer.fork_decoding='greedy'"]
    bundle = compile_bytes(_spec(unread), "spec.toml")
    launch = bundle.files["launch.sh"].decode()
    assert "  +data.fork_filter_accuracy=True \\\n" in launch
    assert "+trainer.fork_decoding=" in launch  # bash-quoted, as every raw override is
    # After every key the spec writes: a reader finds them last, as in the spec.
    assert launch.index("+data.fork_filter_accuracy") > launch.index("data.train_batch_size")
    _, _, resolved, warnings = resolve_bytes(_spec(unread), "spec.toml")
    assert [w.message for w in warnings if w.key == "verl.unread_overrides"] == [
        "verl 0.9.1 never reads the 2 overrides in [verl] unread_overrides: they are passed as written, for a "
        "verl that does (a fork)"]
    # Hydra composes the launch with verl 0.9.1's real config (installed here): the keys are there, as written.
    config = support.compose_verl(resolved.config_name, [o.text for o in resolved.overrides if not o.runtime])
    assert support.lookup(config, "data.fork_filter_accuracy") is True
    assert support.lookup(config, "trainer.fork_decoding") == "greedy"


def test_the_list_changes_the_bundle_and_an_empty_one_is_no_list():
    plain = compile_bytes(support.spec_toml().encode(), "spec.toml")
    assert compile_bytes(_spec([]), "spec.toml").id == plain.id
    assert b"unread_overrides" not in plain.files["spec.toml"]
    one = compile_bytes(_spec(["+data.fork_knob=1"]), "spec.toml")
    two = compile_bytes(_spec(["+data.fork_knob=2"]), "spec.toml")
    assert len({plain.id, one.id, two.id}) == 3
    assert b'unread_overrides = [\n    "+data.fork_knob=1",\n]' in one.files["spec.toml"]


def test_a_key_verl_reads_is_sent_to_extra_overrides():
    ((key, message, hint),) = _refused(_spec(["trainer.val_before_train=False"]))
    assert key == "verl.unread_overrides.0"
    assert message == "verl 0.9.1 reads 'trainer.val_before_train'"
    assert hint.startswith("move it to [verl] extra_overrides")


def test_what_verl_would_refuse_or_stop_on_is_refused_here_too():
    problems = _refused(_spec([
        "data.fork_knob=1",  # no '+': Hydra refuses a key the config lacks
        "+actor_rollout_ref.actor.clip_ratio_typo=0.3",  # 0.9.1 builds the actor into a dataclass without it
        "data.train_batch_size=32",  # the spec's own field writes it
        "not an override",
    ]))
    by_index = {key: message for key, message, _ in problems}
    assert "has no key 'data.fork_knob'" in by_index["verl.unread_overrides.0"]
    assert "refuses fields it does not declare: 'clip_ratio_typo'" in by_index["verl.unread_overrides.1"]
    assert by_index["verl.unread_overrides.2"] == "'data.train_batch_size' is set by the spec's data.train_batch_size"
    assert by_index["verl.unread_overrides.3"] == "not a Hydra override"


def test_a_key_before_dataclasses_is_the_release_s_to_ignore():
    # verl 0.5.0 builds no dataclass from the actor's table: the same key composes and is never read.
    bundle = compile_bytes(_spec(["+actor_rollout_ref.actor.clip_ratio_typo=0.3"], "0.5.0",
                                 rollout={"engine": "vllm"}), "spec.toml")
    assert "+actor_rollout_ref.actor.clip_ratio_typo=0.3" in bundle.files["launch.sh"].decode()


def test_a_key_set_twice_across_the_two_lists_is_refused():
    problems = _refused(_spec(["+data.fork_knob=1", "+data.fork_knob=2"]))
    assert [(k, m) for k, m, _ in problems] == [
        ("verl.unread_overrides.1", "'data.fork_knob' is set by the spec's verl.unread_overrides.0")]


@pytest.mark.parametrize("text, release, engine, words", [
    # verl ignores these keys, and Hydra still refuses the launch: each is refused with Hydra's reason.
    ("custom_reward_function.typo=1", "0.9.1", "sglang", "Hydra refuses to override a key its config lacks"),
    ("+actor_rollout_ref.actor.grad_clip=2.0", "0.9.1", "sglang", "already exists in verl 0.9.1: Hydra refuses '+'"),
    ("actor_rollout_ref.rollout.best_of=2", "0.5.0", "sglang", "Hydra refuses to override a key its config lacks"),
])
def test_a_key_verl_ignores_is_still_refused_where_hydra_refuses_the_launch(text, release, engine, words):
    ((key, message, _),) = _refused(_spec([text], release, rollout={"engine": engine}))
    assert key == "verl.unread_overrides.0" and words in message


@pytest.mark.parametrize("field", ["extra_overrides", "unread_overrides"])
@pytest.mark.parametrize("text", ["+hydra.job.chdir=True", "++hydra.run.dir=/tmp/elsewhere",
                                  "+hydra.callbacks.r._target_=rewards.mine.Anything"])
def test_hydras_own_settings_are_no_raw_override(field, text):
    # Hydra reads them before verl (the job's folder, classes it instantiates): not "never read".
    raw = support.spec_toml(verl={field: [text]}).encode()
    ((key, message, _),) = _refused(raw)
    assert key == f"verl.{field}.0" and "configures Hydra itself, not verl" in message


def test_a_forks_worker_environment_is_held_to_env_sets_rules():
    problems = _refused(_spec(["+ray_kwargs.ray_init.runtime_env.env_vars.LD_PRELOAD=/tmp/x.so",
                               "+ray_kwargs.ray_init.runtime_env.env_vars.TUTORRL_X=1"], "0.5.0",
                              rollout={"engine": "vllm"}))
    by_key = {key: message for key, message, _ in problems}
    assert "changes which program or code runs there" in by_key["verl.unread_overrides.0"]
    assert "are set by tutorrl itself" in by_key["verl.unread_overrides.1"]


def test_a_key_another_value_interpolates_is_read():
    temperature = "actor_rollout_ref.rollout.temperature=${data.fork_temp}"
    # In extra_overrides it is read (through the temperature), so accepted there ...
    raw = support.spec_toml(verl={"extra_overrides": [temperature, "+data.fork_temp=0.3"]}).encode()
    assert "+data.fork_temp=0.3" in compile_bytes(raw, "spec.toml").files["launch.sh"].decode()
    # ... and not taken as one verl never reads.
    raw = support.spec_toml(verl={"extra_overrides": [temperature], "unread_overrides": ["+data.fork_temp=0.3"]})
    ((key, message, _),) = _refused(raw.encode())
    assert key == "verl.unread_overrides.0" and message == "verl 0.9.1 reads 'data.fork_temp'"


def test_migrate_takes_a_spec_with_unread_overrides_as_compiling(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_bytes(_spec(["+data.fork_knob=1"], "0.8.0"))
    proc = support.cli("migrate", str(spec), "--to", "0.9.1", "--format", "json")
    import json

    assert json.loads(proc.stdout)["compiles"] is True, proc.stdout + proc.stderr
