"""Spec validation: every error located (file:line:column, dotted key), all reported at once."""

from __future__ import annotations

import textwrap

import pytest

import support
from tutorrl.compiler import compile_bytes
from tutorrl.compiler.load import parse_spec
from tutorrl.errors import SpecError

BASE = textwrap.dedent("""\
    [experiment]
    name = "t"
    verl = "0.9.1"

    [data]
    train = "train.parquet"
    val = "val.parquet"
    train_batch_size = 16

    [model]
    path = "m"

    [actor]
    ppo_mini_batch_size = 8
    ppo_micro_batch_size_per_gpu = 2

    [rollout]
    engine = "sglang"
    n = 2

    [trainer]
    total_steps = 10

    [resources]
    trainer_gpus_per_node = 2

    [reward]
    kind = "custom"
    module = "rewards.mine"

    [reward.custom]
    kwargs = { a = 1 }
    """)


def problems(text: str) -> list:
    with pytest.raises(SpecError) as info:
        compile_bytes(text.encode(), "spec.toml")
    return info.value.problems


def edit(old: str, new: str, base: str = BASE) -> str:
    assert old in base, old
    return base.replace(old, new, 1)


def test_base_spec_is_valid():
    spec, _ = parse_spec(BASE.encode(), "spec.toml")
    assert spec.reward.kind == "custom"


def test_syntax_error_has_line_and_column():
    (p,) = problems(edit('total_steps = 10', 'total_steps = = 10'))
    assert (p.file, p.line) == ("spec.toml", 22)
    assert p.column is not None and "syntax" in p.message


def test_unknown_key_suggests_the_near_name():
    (p,) = problems(edit("n = 2", "n = 2\ntemprature = 0.7"))
    assert p.key == "rollout.temprature"
    assert (p.line, p.column) == (20, 1)
    assert "unknown key" in p.message and "did you mean 'temperature'" in p.hint


def test_unknown_section_suggests_the_near_name():
    (p,) = problems(BASE + "\n[rolout]\nn = 3\n")
    assert p.key == "rolout" and "did you mean 'rollout'" in p.hint


def test_wrong_type_names_expected_and_got():
    (p,) = problems(edit("total_steps = 10", 'total_steps = "ten"'))
    assert p.key == "trainer.total_steps" and p.line == 22 and p.column == 1
    assert "expected an integer" in p.message and "string" in p.message


def test_out_of_range():
    (p,) = problems(edit("n = 2", "n = 0"))
    assert p.key == "rollout.n" and ">= 1" in p.message


def test_bad_enum_suggests():
    (p,) = problems(edit('engine = "sglang"', 'engine = "sglng"'))
    assert p.key == "rollout.engine" and "did you mean 'sglang'" in p.hint


def test_missing_required_points_at_its_table():
    (p,) = problems(edit('path = "m"\n', ""))
    assert p.key == "model.path" and "missing required key" in p.message
    assert p.line == 10  # the [model] header


def test_missing_required_section():
    (p,) = problems(edit('[rollout]\nengine = "sglang"\nn = 2\n', ""))
    assert p.key == "rollout" and "missing required table" in p.message


def test_all_errors_reported_at_once_in_file_order():
    text = edit("n = 2", "n = 0")
    text = edit("total_steps = 10", "total_steps = -3", text)
    text = edit('name = "t"', 'name = "t"\nnme = 1', text)
    found = problems(text)
    assert [p.key for p in found] == ["experiment.nme", "rollout.n", "trainer.total_steps"]
    assert [p.line for p in found] == sorted(p.line for p in found)


def test_list_element_is_located():
    text = BASE + '\n[env]\npassthrough = ["OK_NAME", "bad-name"]\n'
    (p,) = problems(text)
    assert p.key == "env.passthrough.1" and "environment variable name" in p.message


def test_inline_table_key_is_located():
    (p,) = problems(edit("kwargs = { a = 1 }", "kwargs = { a = 1, b = { c = 2 } }"))
    assert p.key.startswith("reward.custom.kwargs.b")
    assert (p.line, p.column) == (32, 19)


def test_control_characters_are_refused():
    (p,) = problems(edit('val = "val.parquet"', 'val = "val\\nparquet"'))
    assert p.key == "data.val" and "control characters" in p.message


@pytest.mark.parametrize("old,new,key,words", [
    ("ppo_mini_batch_size = 8", "ppo_mini_batch_size = 6", "actor.ppo_mini_batch_size", "does not divide data.train_batch_size"),
    ("ppo_micro_batch_size_per_gpu = 2", "ppo_micro_batch_size_per_gpu = 3", "actor.ppo_micro_batch_size_per_gpu",
     "does not divide the 8 sequences"),
    ("trainer_gpus_per_node = 2", "trainer_gpus_per_node = 3", "actor.ppo_mini_batch_size", "split evenly over 3"),
    ("n = 2", "n = 1", "rollout.n", "needs n >= 2"),
    ('engine = "sglang"', 'engine = "sglang"\ntensor_parallel = 4', "rollout.tensor_parallel", "does not divide the 2"),
    ("[resources]", "[actor.megatron]\ntensor_parallel = 2\n\n[resources]", "actor.megatron", "needs actor.strategy"),
    ('module = "rewards.mine"', 'module = "rewards.mine"\ntable = "t.json"', "reward.table", "simulator and prompted kinds only"),
    ('kind = "custom"', 'kind = "simulator"', "reward.simulator", "needs a [reward.simulator] table"),
    ("total_steps = 10", "total_steps = 10\nsave_freq = 0", "trainer.save_freq", "ambiguous"),
])
def test_cross_field_rules(old, new, key, words):
    found = problems(edit(old, new))
    assert any(p.key == key and words in p.message for p in found), [p.render() for p in found]
    assert all(p.line is not None and p.file == "spec.toml" for p in found)


def test_megatron_layout_must_divide_gpus():
    text = edit("[actor]", '[actor]\nstrategy = "megatron"')
    text = edit("[resources]", "[actor.megatron]\ntensor_parallel = 4\n\n[resources]", text)
    found = problems(text)
    assert any(p.key == "actor.megatron" and "does not divide the 2 trainer GPUs" in p.message for p in found)


def test_simulator_on_gpu_needs_a_reserved_gpu():
    text = edit('kind = "custom"\nmodule = "rewards.mine"', 'kind = "simulator"\ntable = "t.json"')
    text = edit("[reward.custom]\nkwargs = { a = 1 }", '[reward.simulator]\nadapter = "a"\nheads_checkpoint = "h"\nheads_metrics = "m"', text)
    (p,) = problems(text)
    assert p.key == "resources.reward_gpus" and "no GPU is set aside" in p.message


def test_passthrough_name_cannot_have_a_value():
    found = problems(BASE + '\n[env]\nset = { HF_HOME = "/x" }\npassthrough = ["HF_HOME"]\n')
    assert any(p.key == "env.set.HF_HOME" and "must not also have a literal value" in p.message for p in found)


@pytest.mark.parametrize("name", ["WANDB_API_KEY", "HF_TOKEN", "MY_SECRET_THING", "DB_PASSWORD"])
def test_secret_looking_literal_is_refused_with_advice(name):
    (p,) = problems(BASE + f'\n[env]\nset = {{ {name} = "hunter2" }}\n')
    assert p.key == f"env.set.{name}" and "looks like a secret" in p.message
    assert "passthrough" in p.hint
    assert "hunter2" not in p.render()


def test_unsupported_release_names_the_supported_ones():
    (p,) = problems(edit('verl = "0.9.1"', 'verl = "0.1.0"'))
    assert p.key == "experiment.verl" and p.line == 3 and "0.9.1" in p.hint


@pytest.mark.parametrize("override,words", [
    ("trainer.total_training_steps=5", "set by the spec's trainer.total_steps"),
    ("actor_rollout_ref.rollout.max_num_batched_tokns=1", "did you mean 'actor_rollout_ref.rollout.max_num_batched_tokens'"),
    ("actor_rollout_ref.model.override_config.attn_implementation=sdpa", "append it"),
    ("+trainer.total_epochs=4", "already exists"),
    ("+trainer.some_new_knob=1", "never read it"),
    ("custom_reward_function.path=x.py", "accepted and ignored"),
    ("no equals sign", "not a Hydra override"),
])
def test_extra_overrides_are_checked_against_the_release(override, words):
    found = problems(BASE + f'\n[verl]\nextra_overrides = ["ok.nothing=1", {override!r}]\n'.replace("'", '"'))
    assert any(p.key == "verl.extra_overrides.1" and words in (p.message + " " + (p.hint or "")) for p in found), \
        [p.render() for p in found]


def test_cli_reports_every_problem_exit_2_no_traceback_nothing_written(tmp_path):
    spec = tmp_path / "bad.toml"
    spec.write_text(edit("n = 2", "n = 0\ntemprature = 1.0"))
    out = tmp_path / "bundles"
    result = support.cli("compile", str(spec), "--out", str(out))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 2
    assert f"{spec}:19:1: rollout.n:" in result.stderr
    assert "did you mean 'temperature'" in result.stderr
    assert not out.exists()


def test_cli_missing_file(tmp_path):
    result = support.cli("compile", str(tmp_path / "nope.toml"))
    assert result.returncode == 2 and "no such file" in result.stderr and "Traceback" not in result.stderr
