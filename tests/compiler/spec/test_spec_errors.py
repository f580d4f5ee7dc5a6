"""Spec validation: every error located (file:line:column, dotted key), all reported at once."""

from __future__ import annotations

import json
import textwrap

import pytest

import support
from tutorrl.compiler import compile_bytes
from tutorrl.compiler.spec.load import parse_spec
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
    loggers = ["console", "file"]

    [resources]
    trainer_gpus_per_node = 2

    [reward]
    module = "rewards.mine"
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
    assert spec.reward.module == "rewards.mine"
    assert compile_bytes(BASE.encode(), "spec.toml").warnings == ()


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
    (p,) = problems(edit('verl = "0.9.1"\n', ""))
    assert p.key == "experiment.verl" and "missing required key" in p.message
    assert p.line == 1  # the [experiment] header


def test_missing_required_section():
    (p,) = problems(edit('[experiment]\nname = "t"\nverl = "0.9.1"\n', ""))
    assert p.key == "experiment" and "missing required table" in p.message


def test_only_the_release_is_required():
    spec, _ = parse_spec(b'[experiment]\nverl = "0.9.1"\n', "spec.toml")
    launch = compile_bytes(b'[experiment]\nverl = "0.9.1"\n', "spec.toml").files["launch.sh"].decode()
    # Nothing said, nothing emitted: verl's own defaults throughout.
    assert launch.rstrip().endswith("--config-name ppo_trainer \"$@\"")


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
    (p,) = problems(BASE + '\n[env]\nset = { A = "x", B = 2 }\n')
    assert p.key == "env.set.B"
    assert (p.line, p.column) == (33, 18)


def test_control_characters_are_refused():
    (p,) = problems(edit('val = "val.parquet"', 'val = "val\\nparquet"'))
    assert p.key == "data.val" and "control characters" in p.message


@pytest.mark.parametrize("old,new,key,words", [
    # verl/workers/config/actor.py ActorConfig.validate
    ("ppo_mini_batch_size = 8", "ppo_mini_batch_size = 32", "actor.ppo_mini_batch_size", "more than data.train_batch_size"),
    # verl/utils/config.py validate_config
    ("trainer_gpus_per_node = 2", "trainer_gpus_per_node = 3", "data.train_batch_size", "do not split over the 3 GPUs"),
    ("ppo_micro_batch_size_per_gpu = 2", "ppo_micro_batch_size_per_gpu = 2\nppo_micro_batch_size = 4",
     "actor.ppo_micro_batch_size", "are both set"),
    ("[resources]", "[actor.megatron]\ntensor_parallel = 2\n\n[resources]", "actor.megatron", "needs actor.strategy"),
    ('module = "rewards.mine"', 'module = "rewards.mine"\npath = "r.py"', "reward.path", "both name"),
    ('module = "rewards.mine"', 'module = "rewards.mine"\noptions = { a = 1 }', "reward.options", "plug-in"),
    # verl/utils/tracking.py asserts each logger is supported by the release
    ('verl = "0.9.1"\n', 'verl = "0.5.0"\n', "trainer.loggers", "the 'file' logger exists from verl 0.6.0"),
])
def test_cross_field_rules(old, new, key, words):
    found = problems(edit(old, new))
    assert any(p.key == key and words in p.message for p in found), [p.render() for p in found]
    assert all(p.line is not None and p.file == "spec.toml" for p in found)


@pytest.mark.parametrize("old,new,key,words", [
    # Rules verl itself does not enforce: compiled, with a located warning.
    ("ppo_mini_batch_size = 8", "ppo_mini_batch_size = 6", "actor.ppo_mini_batch_size", "does not divide data.train_batch_size"),
    ("ppo_micro_batch_size_per_gpu = 2", "ppo_micro_batch_size_per_gpu = 3", "actor.ppo_micro_batch_size_per_gpu",
     "does not divide the 8 sequences"),
    ("n = 2", 'n = 1\n[algorithm]\nadv_estimator = "grpo"', "rollout.n", "takes its raw score as the advantage (no group baseline)"),
    ("total_steps = 10", "total_steps = 10\nsave_freq = 0", "trainer.save_freq", "0 means never"),
])
def test_rules_verl_does_not_enforce_are_warnings(old, new, key, words):
    compiled = compile_bytes(edit(old, new).encode(), "spec.toml")
    assert any(w.key == key and words in w.message and w.line for w in compiled.warnings), compiled.warnings


def _megatron(layout: str, gpus: int = 96, nodes: int = 12) -> str:
    text = edit("[actor]", '[actor]\nstrategy = "megatron"')
    text = edit("ppo_micro_batch_size_per_gpu = 2\n", "", text)
    text = edit("train_batch_size = 16", "train_batch_size = 512", text)
    text = edit("trainer_gpus_per_node = 2", f"trainer_gpus_per_node = {gpus // nodes}\nnodes = {nodes}", text)
    return edit("[resources]", f"[actor.megatron]\n{layout}\n\n[resources]", text)


def test_megatron_layout_must_divide_gpus():
    found = problems(_megatron("tensor_parallel = 4", gpus=2, nodes=1))
    assert any(p.key == "actor.megatron" and "does not divide the 2 trainer GPUs" in p.message
               and "parallel_state" in p.hint for p in found)


def test_expert_parallel_divides_by_expert_tensor_parallelism_as_megatron_does():
    # verl's DeepSeek-V3 671B recipe: TP 8, PP 12, EP 8, ETP 1 on 96 GPUs.
    layout = "tensor_parallel = 8\npipeline_parallel = 12\nexpert_parallel = 8"
    assert compile_bytes(_megatron(layout + "\nexpert_tensor_parallel = 1").encode(), "spec.toml")
    # Without ETP Megatron uses TP inside the experts: 8 x 8 x 12 does not divide 96.
    found = problems(_megatron(layout))
    assert any(p.key == "actor.megatron.expert_parallel" and "= 768 does not divide the 96" in p.message for p in found)


def test_rollout_engines_may_span_nodes():
    # verl's 70B recipe: rollout TP 16 on 4 nodes of 8 GPUs.
    text = edit("trainer_gpus_per_node = 2", "trainer_gpus_per_node = 8\nnodes = 4")
    text = edit('engine = "sglang"', 'engine = "sglang"\ntensor_parallel = 16', text)
    text = edit("train_batch_size = 16", "train_batch_size = 32", text)
    compiled = compile_bytes(text.encode(), "spec.toml")
    assert not [w for w in compiled.warnings if w.key == "rollout.tensor_parallel"]


SIMULATOR = """
[reward]
plugin = "chess-simulator"
options = { table = "t.json", adapter = "a", heads_checkpoint = "h", heads_metrics = "m" }
"""


def test_simulator_on_gpu_needs_a_reserved_gpu():
    text = edit('[reward]\nmodule = "rewards.mine"\nkwargs = { a = 1 }\n', SIMULATOR)
    (p,) = problems(text)
    assert p.key == "resources.reward_gpus" and "no GPU is set aside" in p.message


def test_plugin_options_are_located_like_the_core_spec():
    text = edit('[reward]\nmodule = "rewards.mine"\nkwargs = { a = 1 }\n',
                SIMULATOR.replace('table = "t.json", ', 'tabel = "t.json", '))
    found = problems(text + "\n[resources]\nreward_gpus = 1\n" if False else text)
    keys = {p.key for p in found}
    assert "reward.options.tabel" in keys and "reward.options.table" in keys
    assert any("did you mean 'table'" in (p.hint or "") for p in found)


def test_unknown_plugin_is_named():
    text = edit('module = "rewards.mine"', 'plugin = "chess-simulater"')
    (p,) = problems(text)
    assert p.key == "reward.plugin" and "did you mean 'chess-simulator'" in p.hint


def test_passthrough_name_cannot_have_a_value():
    found = problems(BASE + '\n[env]\nset = { HF_HOME = "/x" }\npassthrough = ["HF_HOME"]\n')
    assert any(p.key == "env.set.HF_HOME" and "must not also have a literal value" in p.message for p in found)


@pytest.mark.parametrize("name", ["WANDB_API_KEY", "HF_TOKEN", "MY_SECRET_THING", "DB_PASSWORD", "OPENAI_APIKEY",
                                  "GITHUB_PAT", "DB_PASS", "aws_credentials",
                                  # camelCase words, words run together, trailing digits, pass phrases
                                  "MyCredential", "githubToken", "clientSecret", "privateKey", "DBPASSWORD",
                                  "PGPASSWORD", "OAUTHTOKEN", "CLIENTSECRET", "AUTH_TOKEN2", "TOKEN1",
                                  "SSH_PASSPHRASE", "MYSQL_PWD",
                                  # run together with a key, auth at the end, bearer tokens, cookies
                                  "OPENAIKEY", "SSHKEY2", "NPM_AUTH", "NPM_CONFIG__AUTH", "BEARER", "SESSION_COOKIE"])
def test_secret_looking_literal_is_refused_with_advice(name):
    (p,) = problems(BASE + f'\n[env]\nset = {{ {name} = "hunter2" }}\n')
    assert p.key == f"env.set.{name}" and "looks like a secret" in p.message
    assert "passthrough" in p.hint
    assert "hunter2" not in p.render()


@pytest.mark.parametrize("name", ["TOKENIZERS_PARALLELISM", "MAX_TOKENS", "KEYBOARD_LAYOUT", "MONKEY", "PATTERN",
                                  "RAY_AUTH_MODE", "PASSES", "OLDPWD", "HOCKEY", "AUTHOR", "COOKIECUTTER_CONFIG"])
def test_names_that_only_contain_a_secret_word_are_not_refused(name):
    compile_bytes((BASE + f'\n[env]\nset = {{ {name} = "1" }}\n').encode(), "spec.toml")


def test_unsupported_release_names_the_supported_ones():
    (p,) = problems(edit('verl = "0.9.1"', 'verl = "0.1.0"'))
    assert p.key == "experiment.verl" and p.line == 3 and "0.9.1" in p.hint


def test_an_unsupported_release_is_reported_with_the_other_problems():
    text = edit('verl = "0.9.1"', 'verl = "0.9.2"')
    text = edit("train_batch_size = 16", "train_batch_sise = 16", text)
    found = problems(text)
    assert [(p.key, p.line) for p in found] == [("experiment.verl", 3), ("data.train_batch_sise", 8)]
    assert "verl 0.9.2 is not supported" in found[0].message and "0.9.1" in found[0].hint
    # Megatron's locks are asked for a Megatron spec; a supported release adds nothing.
    text = edit("[actor]\n", '[actor]\nstrategy = "megatron"\n', edit("train_batch_size = 16", "train_batch_sise = 16"))
    assert [p.key for p in problems(text)] == ["data.train_batch_sise"]


@pytest.mark.parametrize("override,words", [
    ("trainer.total_training_steps=5", "set by the spec's trainer.total_steps"),
    ("actor_rollout_ref.rollout.max_num_batched_tokns=1", "did you mean 'actor_rollout_ref.rollout.max_num_batched_tokens'"),
    ("data.apply_chat_template_kwargs.enable_thinking=false", "append it"),
    ("+trainer.ray_wait_register_center_timeout=4", "already exists"),
    ("+trainer.some_new_knob=1", "never read it"),
    ("custom_reward_function.path=x.py", "accepted and ignored"),
    ("no equals sign", "not a Hydra override"),
])
def test_extra_overrides_are_checked_against_the_release(override, words):
    found = problems(BASE + f'\n[verl]\nextra_overrides = ["ok.nothing=1", {override!r}]\n'.replace("'", '"'))
    assert any(p.key == "verl.extra_overrides.1" and words in (p.message + " " + (p.hint or "")) for p in found), \
        [p.render() for p in found]


@pytest.mark.parametrize("override,field", [
    ("+actor_rollout_ref.model.override_config.attn_implementation=sdpa", "model.attn_implementation"),
    ("actor_rollout_ref.actor.optim.lr=1e-6", "actor.lr"),
    ("+actor_rollout_ref.rollout.engine_kwargs.vllm.swap_space=32", "rollout.engine_kwargs.vllm.swap_space"),
])
def test_extra_override_with_a_spec_home_is_read_and_named(override, field):
    """verl reads it, so it is not refused; the field that should say it is named."""
    compiled = compile_bytes((BASE + f'\n[verl]\nextra_overrides = ["{override}"]\n').encode(), "spec.toml")
    assert any(w.key == "verl.extra_overrides.0" and f"home in the spec: {field}" in w.message
               for w in compiled.warnings), compiled.warnings
    assert override in compiled.files["launch.sh"].decode()


def test_extra_override_that_the_field_cannot_say_is_not_warned():
    compiled = compile_bytes((BASE + '\n[verl]\nextra_overrides = ["actor_rollout_ref.rollout.val_kwargs.top_p='
                              '${actor_rollout_ref.rollout.top_p}"]\n').encode(), "spec.toml")
    assert compiled.warnings == ()


@pytest.mark.parametrize("override", [
    # Dicts verl reads whole: appended keys are read, so they are accepted.
    "+data.apply_chat_template_kwargs.enable_thinking=false",
    "+ray_kwargs.ray_init.num_cpus=4",
])
def test_extra_overrides_under_dicts_verl_reads_whole_are_accepted(override):
    assert compile_bytes((BASE.replace('kwargs = { a = 1 }\n', '')
                          + f'\n[verl]\nextra_overrides = ["{override}"]\n').encode(), "spec.toml")


def test_megatron_transformer_overrides_pass_through():
    text = _megatron("tensor_parallel = 8\npipeline_parallel = 12\nexpert_parallel = 8\nexpert_tensor_parallel = 1\n"
                     "transformer_overrides = { moe_router_dtype = \"fp32\", recompute_method = \"uniform\" }")
    launch = compile_bytes(text.encode(), "spec.toml").files["launch.sh"].decode()
    # Declared with a null default in 0.9.1: plain; not declared: appended.
    assert "'actor_rollout_ref.actor.megatron.override_transformer_config.recompute_method=\"uniform\"'" in launch
    assert "'+actor_rollout_ref.actor.megatron.override_transformer_config.moe_router_dtype=\"fp32\"'" in launch


def test_every_problem_in_one_round():
    text = edit("n = 2", "n = 2\ntensor_parallel = 3")
    text = edit("ppo_mini_batch_size = 8", "ppo_mini_batch_size = 32", text)
    text += '\n[verl]\nextra_overrides = ["no.such.key=1"]\n'
    keys = {p.key for p in problems(text)}
    assert {"actor.ppo_mini_batch_size", "verl.extra_overrides.0"} <= keys


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


# -- hostile input: every reader bounded, every failure located (issue 14) -----------------


@pytest.mark.parametrize("names,allow,refused", [
    (["PATH"], [], ["env.set.PATH"]),
    (["PATH"], ["PATH"], []),
    (["LD_PRELOAD", "PYTHONPATH", "BASH_ENV"], ["PYTHONPATH"], ["env.set.BASH_ENV", "env.set.LD_PRELOAD"]),
    (["UID"], ["UID"], ["env.set.UID"]),  # bash's own: not even allowed
])
def test_names_that_take_over_the_launch_need_env_allow(names, allow, refused):
    text = BASE + "\n[env]\nset = {" + ", ".join(f'{n} = "x"' for n in names) + "}\n"
    text += f"allow = {allow!r}\n".replace("'", '"')
    if refused:
        assert sorted(p.key for p in problems(text)) == refused
    else:
        launch = compile_bytes(text.encode(), "spec.toml")
        assert b"export PATH=x" in launch.files["bundle.env"]


@pytest.mark.parametrize("name", ["GCONV_PATH", "OPENSSL_CONF", "PERL5OPT", "RUBYOPT", "NODE_PATH", "EXECIGNORE",
                                  "POSIXLY_CORRECT", "RAY_RUNTIME_ENV_HOOK",
                                  # Python's start-up runs HOME's user site (.pth files, a fake verl).
                                  "HOME", "GLIBC_TUNABLES", "LOCPATH"])
def test_names_that_load_code_or_change_how_bash_runs_are_takeover_names(name):
    (p,) = problems(BASE + f'\n[env]\nset = {{ {name} = "x" }}\n')
    assert p.key == f"env.set.{name}" and "changes which program or code the launch runs" in p.message


def test_passthrough_of_a_takeover_name_is_refused_too():
    (p,) = problems(BASE + '\n[env]\npassthrough = ["LD_LIBRARY_PATH"]\n')
    assert p.key == "env.passthrough.0" and "env.allow" in p.hint


def test_an_argument_linux_cannot_pass_is_refused_at_compile_time():
    found = problems(edit('path = "m"', 'path = "' + "m" * 140_000 + '"'))
    assert any(p.key == "model.path" and "at most 131072 bytes in one argument" in p.message for p in found)


def test_an_environment_entry_linux_cannot_pass_is_refused_at_compile_time():
    """The kernel holds each NAME=value of an exec's environment to 128 KiB, as it does an argument."""
    found = problems(BASE + '\n[env]\nset = { BIG = "' + "x" * 140_000 + '" }\n')
    assert [p.key for p in found] == ["env.set.BIG"]
    assert "at most 131072 bytes in one environment entry" in found[0].message
    assert "xxxx" not in found[0].render()


@pytest.mark.parametrize("value,words", [
    ("inf", "inf cannot travel through Hydra"),
    ("-inf", "-inf cannot travel through Hydra"),
    ("nan", "nan cannot travel through Hydra"),
    ("[1, { b = nan }]", "nan cannot travel"),
    (str(2**63), "an integer of 64 bits"),
    (str(-(2**63) - 1), "an integer of 64 bits"),
    ("0x" + "f" * 4000, "an integer of 16000 bits"),  # past 4,300 decimal digits: str() of it would raise
])
def test_free_form_tables_refuse_what_hydra_or_verl_cannot_hold(value, words):
    """reward.kwargs is verbatim (no type bounds it): inf, nan and integers past 64 bits are located errors,
    not a traceback from the override renderer."""
    found = problems(edit("kwargs = { a = 1 }", f"kwargs = {{ a = {value} }}"))
    assert len(found) == 1 and found[0].key.startswith("reward.kwargs.a") and words in found[0].message
    assert found[0].line is not None


def test_an_integer_too_long_to_print_in_a_typed_field_is_described_not_printed():
    found = problems(edit('[data]\n', '[data]\nseed = 0x' + "f" * 4000 + '\n'))
    assert [p.key for p in found] == ["data.seed"] and "an integer of 16000 bits" in found[0].message


@pytest.mark.parametrize("content,words", [
    (None, "is not a regular file"),  # a FIFO: refused without blocking
    ("[experiment]\nverl = \"0.9.1\"\n[data]\nseed = " + "9" * 5000 + "\n", "a value TOML cannot hold here"),
    ("[experiment]\nverl = \"0.9.1\"\n[data]\ntrain = " + "[" * 400 + "]" * 400 + "\n", "nested more than 32"),
    ("[" + ".".join(["a"] * 300) + "]\nx = 1\n", "nested more than 32"),
])
def test_hostile_spec_files_get_a_message_never_a_traceback_or_a_hang(tmp_path, content, words):
    import os

    spec = tmp_path / "hostile.toml"
    if content is None:
        os.mkfifo(spec)
    else:
        spec.write_text(content)
    result = support.cli("compile", str(spec), "--out", str(tmp_path / "b"))
    assert result.returncode == 2 and words in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "b").exists()


def test_devices_and_oversized_files_are_refused():
    result = support.cli("compile", "/dev/zero")
    assert result.returncode == 2 and "not a regular file" in result.stderr


def test_non_utf8_is_located_by_line_and_column(tmp_path):
    spec = tmp_path / "latin1.toml"
    spec.write_bytes(b'[experiment]\nverl = "0.9.1"\n# caf\xe9\n')
    result = support.cli("compile", str(spec))
    assert result.returncode == 2 and f"{spec}:3:6: not UTF-8 text (byte 0xe9)" in result.stderr


def test_terminal_control_characters_are_escaped_in_messages(tmp_path):
    spec = tmp_path / "esc.toml"
    spec.write_text('[experiment]\nverl = "0.9.1"\nname = "a\\u001b[31mred\\u202e"\n')
    result = support.cli("compile", str(spec))
    assert result.returncode == 2
    assert "\x1b" not in result.stderr and "\u202e" not in result.stderr
    assert "\\x1b" in result.stderr and "\\u202e" in result.stderr


@pytest.mark.parametrize("value", ["inf", "-inf", "nan"])
def test_infinite_and_nan_numbers_are_refused(value):
    (p,) = problems(edit("ppo_mini_batch_size = 8", f"ppo_mini_batch_size = 8\nentropy_coeff = {value}"))
    assert p.key == "actor.entropy_coeff"


def test_integers_beyond_int64_are_refused():
    (p,) = problems(edit("total_steps = 10", f"total_steps = {2**63}"))
    assert p.key == "trainer.total_steps"


def test_evidence_stop_needs_the_in_run_hook_and_travels_in_the_bundle_env():
    stop = BASE + '\n[evidence]\non_failure = "stop"\n'
    (problem,) = problems(stop)
    assert problem.key == "evidence.on_failure" and "trainer.evidence_callback = true" in problem.hint
    compiled = compile_bytes(edit("[trainer]\n", "[trainer]\nevidence_callback = true\n", stop).encode(), "spec.toml")
    assert "export TUTORRL_EVIDENCE_ON_FAILURE=stop" in compiled.files["bundle.env"].decode()
    job = json.loads(compiled.files["ray-job.json"])
    assert job["runtime_env"]["env_vars"]["TUTORRL_EVIDENCE_ON_FAILURE"] == "stop"
    # "record" is the default: said or not, the bundle is the same and sets nothing.
    hooked = edit("[trainer]\n", "[trainer]\nevidence_callback = true\n")
    said = compile_bytes((hooked + '\n[evidence]\non_failure = "record"\n').encode(), "spec.toml")
    unsaid = compile_bytes(hooked.encode(), "spec.toml")
    assert "TUTORRL_" not in unsaid.files["bundle.env"].decode()
    assert said.files["bundle.env"] == unsaid.files["bundle.env"]
    assert json.loads(said.files["ray-job.json"])["runtime_env"] == json.loads(unsaid.files["ray-job.json"])["runtime_env"]


# Every table verl reads whole, and lists inside them: each TOML date/time kind.
_FREE_TABLES = [
    ("model", "override_config"), ("actor", "mixed_precision"), ("rollout", "engine_kwargs"),
    ("reward", "kwargs"), ("reward", "manager_kwargs"), ("actor.megatron", "transformer_overrides"),
    ("critic.megatron", "transformer_overrides"),
]
_DATE_KINDS = {"date": "1979-05-27", "time": "07:32:00.999", "local datetime": "1979-05-27T07:32:00",
               "offset datetime": "1979-05-27 00:32:00-07:00"}
_DATE_CASES = [(f"{section}.{table}", f"{table} = {{ w = {value} }}", f"{section}.{table}.w")
               for section, table in _FREE_TABLES for value in _DATE_KINDS.values()] + [
    ("reward.kwargs", "kwargs = { w = [1, 1979-05-27T00:32:00Z] }", "reward.kwargs.w.1"),
    ("rollout.engine_kwargs", "engine_kwargs = { vllm = { w = [[07:32:00]] } }", "rollout.engine_kwargs.vllm.w.0.0"),
    ("model.override_config", "override_config = { w = [{ x = 1979-05-27 }] }", "model.override_config.w.0.x"),
]


@pytest.mark.parametrize("where,line,key", _DATE_CASES)
def test_a_toml_date_or_time_in_a_table_verl_reads_whole_is_located_and_refused(where, line, key):
    section = where.rpartition(".")[0]
    base = BASE.replace('kwargs = { a = 1 }\n', '')
    header = f"[{section}]\n"
    text = base.replace(header, header + line + "\n") if header in base else base + f"\n{header}{line}\n"
    (problem,) = problems(text)
    assert problem.key == key
    assert problem.message == "TOML dates and times cannot be passed to verl; write a string"
    assert problem.line == text.splitlines().index(line) + 1 and problem.column > 1


def test_a_toml_date_gets_a_located_message_from_the_cli_never_a_traceback(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(edit("kwargs = { a = 1 }", "kwargs = { a = 1979-05-27 }"))
    result = support.cli("compile", str(spec), "--out", str(tmp_path / "b"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"{spec}:30:12: " in result.stderr and "reward.kwargs.a: TOML dates and times cannot be passed to verl" \
        in result.stderr
    assert not (tmp_path / "b").exists()


_WORKER_ENV = "ray_kwargs.ray_init.runtime_env.env_vars"


def _with_extra(override: str, allow: list[str] = ()) -> str:
    return BASE + f"\n[verl]\nextra_overrides = [{json.dumps(override)}]\n[env]\nallow = {json.dumps(list(allow))}\n"


@pytest.mark.parametrize("override,words", [
    # verl hands ray_kwargs.ray_init to ray.init whole: this reached every worker, with no env.allow.
    (f"+{_WORKER_ENV}.LD_PRELOAD=/tmp/x.so", "LD_PRELOAD set in every Ray worker's environment changes which program"),
    (f"+{_WORKER_ENV}.HOME=/evil", "HOME set in every Ray worker's environment"),
    (f"++{_WORKER_ENV}.PYTHONPATH=/evil", "PYTHONPATH set in every Ray worker's environment"),
    (f"+{_WORKER_ENV}.HF_TOKEN=hf_abc", "HF_TOKEN looks like a secret and would be written into the bundle"),
    (f"+{_WORKER_ENV}.TUTORRL_BUNDLE_DIR=/x", "TUTORRL_* names are set by tutorrl itself"),
    # A whole table above the variables would carry names no check sees.
    ("+ray_kwargs.ray_init.runtime_env={env_vars: {LD_PRELOAD: /tmp/x.so}}", "given a whole table"),
    ("+ray_kwargs.ray_init={runtime_env: {env_vars: {LD_PRELOAD: /tmp/x.so}}}", "given a whole table"),
    (f"+{_WORKER_ENV}={{LD_PRELOAD: /tmp/x.so}}", "given a whole table"),
    ("+ray_kwargs.ray_init.runtime_env=${oc.create:{env_vars: {LD_PRELOAD: /x}}}", "given a whole table"),
])
def test_worker_environment_set_through_verls_ray_init_follows_the_env_rules(override, words):
    # (A whole ray_init table is also one verl 0.9.1 never reads: resolve says so too.)
    (p,) = [p for p in problems(_with_extra(override)) if "would accept it and never read it" not in p.message]
    assert p.key == "verl.extra_overrides.0" and words in p.message, p.render()
    assert p.line == _with_extra(override).splitlines().index(f"extra_overrides = [{json.dumps(override)}]") + 1


def test_worker_environment_through_ray_init_takes_env_allow_and_plain_names():
    allowed = compile_bytes(_with_extra(f"+{_WORKER_ENV}.LD_PRELOAD=/opt/x.so", ["LD_PRELOAD"]).encode(), "s.toml")
    assert f"+{_WORKER_ENV}.LD_PRELOAD=/opt/x.so" in allowed.files["launch.sh"].decode()
    compile_bytes(_with_extra(f"+{_WORKER_ENV}.NCCL_DEBUG=WARN").encode(), "s.toml")
    compile_bytes(_with_extra("+ray_kwargs.ray_init.num_cpus=4").encode(), "s.toml")


# -- secrets recognised by their value, whatever the name -------------------------------------------------------------

# Built here, not written whole: a scanner must not take the test file for a leak.
_TOKENS = {
    "an OpenAI API key": "sk-" + "proj-" + "Ab3" * 12,
    "a GitHub token": "ghp" + "_" + "aB1" * 12,
    "a Hugging Face token": "hf" + "_" + "xYz" * 11,
    "an AWS access key id": "AKIA" + "ABCD2345EFGH6789",
    "a Slack token": "xox" + "b-" + "1234567890-abcdef",
    "a GitLab token": "glpat" + "-" + "aB1_" * 6,
    "a private key": "-----BEGIN " + "OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1r",
}
# Everywhere a spec carries a string into a file tutorrl writes: an env value under any name,
# reward kwargs, a free table verl reads whole, an extra override, a plain text field.
_WHERE = {
    "env.set.MY_CONF": '[env]\nset = {{ MY_CONF = "{}" }}',
    "reward.kwargs.api": None,  # in BASE's [reward]
    "model.override_config.note": None,  # written under [model] below
    "verl.extra_overrides.0": '[verl]\nextra_overrides = ["+ray_kwargs.ray_init.note={}"]',
    "experiment.project": None,
}


def _with_secret(where: str, token: str) -> str:
    text = BASE
    if where == "model.override_config.note":
        return text.replace('path = "m"', f'path = "m"\noverride_config = {{ note = {json.dumps(token)} }}')
    if where == "experiment.project":
        return text.replace('name = "t"', f'name = "t"\nproject = {json.dumps(token)}')
    if where == "reward.kwargs.api":
        return text.replace("kwargs = { a = 1 }", f"kwargs = {{ a = 1, api = {json.dumps(token)} }}")
    body = _WHERE[where].format(token.replace("\n", "\\n"))
    return text + "\n" + body + "\n"


@pytest.mark.parametrize("where", sorted(_WHERE))
@pytest.mark.parametrize("kind", sorted(_TOKENS))
def test_a_credential_is_refused_by_its_value_wherever_it_is_written(kind, where):
    text = _with_secret(where, _TOKENS[kind])
    with pytest.raises(SpecError) as err:
        compile_bytes(text.encode(), "spec.toml")
    found = [p for p in err.value.problems if f"looks like {kind}" in p.message]
    assert found, err.value.render()
    assert found[0].key == where and found[0].line
    assert "env.passthrough" in found[0].render()


@pytest.mark.parametrize("text", ["hf_model", "sk-1", "AKIA-ish", "ghp_short", "my-xox-folder", "glpat-x",
                                  "a PRIVATE KEY is never written here"])
def test_what_only_resembles_a_credential_is_accepted(text):
    compile_bytes((BASE + f'\n[env]\nset = {{ NOTE = "{text}" }}\n').encode(), "spec.toml")


def test_a_credential_refusal_writes_nothing(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(_with_secret("env.set.MY_CONF", _TOKENS["a GitHub token"]))
    proc = support.cli("compile", str(spec), "--out", str(tmp_path / "bundles"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "looks like a GitHub token" in proc.stderr and "spec.toml:" in proc.stderr
    assert not (tmp_path / "bundles").exists()


def _rollout(layout: str, base: str = BASE) -> str:
    return edit('engine = "sglang"', 'engine = "sglang"\n' + layout, base)


def test_a_rollout_engine_that_does_not_divide_the_trainer_gpus_is_refused_citing_verl():
    """verl's actor-rollout worker asserts world_size % (tp x dp x pp) == 0 when it builds the rollout."""
    (found,) = [p for p in problems(_rollout("tensor_parallel = 3")) if p.key == "rollout.tensor_parallel"]
    assert found.message.startswith("3 does not divide the 2 trainer GPUs; verl 0.9.1's actor-rollout worker asserts")
    assert "verl/workers/engine_workers.py" in found.message
    # Larger than the trainer's GPUs: past the assertion verl would build no engine at all.
    assert "2 // 3 = 0 rollout engines (verl/workers/rollout/llm_server.py)" in found.message
    assert found.line == 19 and found.hint == "set rollout.tensor_parallel to one of 1, 2"
    # One that fits but does not tile 8 GPUs is refused the same way, without the zero-engine note.
    eight = edit("trainer_gpus_per_node = 2", "trainer_gpus_per_node = 2\nnodes = 4", _rollout("tensor_parallel = 3"))
    (found,) = [p for p in problems(eight) if p.key == "rollout.tensor_parallel"]
    assert "3 does not divide the 8 trainer GPUs" in found.message and "llm_server" not in found.message
    # The engine is tensor x data parallel from verl 0.6.0.
    (found,) = [p for p in problems(_rollout("tensor_parallel = 1\ndata_parallel = 3"))
                if p.key == "rollout.tensor_parallel"]
    assert "tensor-parallel 1 x data-parallel 3 = 3 GPUs per engine does not divide the 2 trainer GPUs" in found.message


def test_verls_default_rollout_size_is_named_as_verls_on_one_gpu():
    one = edit("trainer_gpus_per_node = 2", "trainer_gpus_per_node = 1", BASE)
    one = edit("ppo_micro_batch_size_per_gpu = 2", "ppo_micro_batch_size_per_gpu = 1", one)
    (found,) = [p for p in problems(one) if p.key == "rollout.tensor_parallel"]
    assert found.message.startswith("verl's default tensor_model_parallel_size 2 (rollout.tensor_parallel is not set) "
                                    "does not divide the 1 trainer GPU;")
    assert found.hint == "set rollout.tensor_parallel to one of 1"
    assert compile_bytes(_rollout("tensor_parallel = 1", one).encode(), "spec.toml")


def test_older_releases_refuse_a_rollout_size_that_does_not_divide_as_verl_does():
    older = _rollout("tensor_parallel = 3").replace('verl = "0.9.1"', 'verl = "0.5.0"').replace(
        'loggers = ["console", "file"]', 'loggers = ["console"]')
    (found,) = [p for p in problems(older) if p.key == "rollout.tensor_parallel"]
    # verl 0.5.0's FSDP worker asserts on the tensor-parallel size alone, and builds engines by a device mesh.
    assert "verl 0.5.0's actor-rollout worker asserts" in found.message and "(verl/workers/fsdp_workers.py)" in found.message
    assert "llm_server" not in found.message


def test_rollout_sizes_set_by_extra_overrides_count_as_verl_sees_them():
    one = edit("trainer_gpus_per_node = 2", "trainer_gpus_per_node = 1", BASE)
    one = edit("ppo_micro_batch_size_per_gpu = 2", "ppo_micro_batch_size_per_gpu = 1", one)
    tp1 = one + '\n[verl]\nextra_overrides = ["actor_rollout_ref.rollout.tensor_model_parallel_size=1"]\n'
    # verl runs this (one GPU, one GPU per engine): never refused for verl's default it replaces.
    assert not [w for w in compile_bytes(tp1.encode(), "spec.toml").warnings if "does not divide" in w.message]
    pp3 = tp1.replace('size=1"]', 'size=1", "actor_rollout_ref.rollout.pipeline_model_parallel_size=3"]')
    (found,) = [p for p in problems(pp3) if "do not divide" in p.message]
    assert found.key == "verl.extra_overrides" and "pipeline_model_parallel_size 3" in found.message
    # A size this check cannot read (an interpolation) is left to verl.
    odd = tp1.replace('size=1"]', 'size=${oc.env:TP}"]')
    assert not [p for p in _problems_or_none(odd) if "divide" in p.message]


def _problems_or_none(text: str) -> list:
    try:
        compile_bytes(text.encode(), "spec.toml")
    except SpecError as err:
        return err.problems
    return []


MINI = """\
[experiment]
name = "mini"
verl = "{release}"

[data]
train = "/d/t.parquet"
val = "/d/v.parquet"
train_batch_size = 8

[model]
path = "/m"

[actor]
ppo_mini_batch_size = 16

[rollout]
tensor_parallel = 1

[resources]
nodes = 1
trainer_gpus_per_node = 1
"""


@pytest.mark.parametrize("release,refused,cited", [
    ("0.2.0.post2", False, None),  # verl 0.2 checks nothing: the batch is one mini-batch
    ("0.3.0.post1", True, "RayPPOTrainer._validate_config"),
    ("0.5.0", True, "RayPPOTrainer._validate_config"),
    ("0.6.0", True, "ActorConfig.validate"),
    ("0.9.1", True, "ActorConfig.validate"),
])
def test_a_mini_batch_larger_than_the_batch_is_refused_where_verl_refuses_it(release, refused, cited):
    """No stricter than verl: the check verl makes at start, per release, with its own file named."""
    from tutorrl.compiler import compile_bytes
    from tutorrl.errors import SpecError

    try:
        compiled = compile_bytes(MINI.format(release=release).encode(), "spec.toml")
    except SpecError as exc:
        found = [p for p in exc.problems if p.key == "actor.ppo_mini_batch_size"]
        assert refused and found and cited in found[0].render(), [p.render() for p in exc.problems]
        # What to change, named exactly (the spec's batch is 8, its mini-batch 16).
        assert found[0].render().endswith("set it to at most 8, or data.train_batch_size to at least 16)")
        assert (found[0].line, found[0].file) == (14, "spec.toml")
        return
    assert not refused
    assert any("actor.ppo_mini_batch_size" in w.render() and "one mini-batch" in w.render() for w in compiled.warnings)


def test_struct_in_finds_each_section_a_field_holds_and_nothing_else():
    # struct_in answers classes and unions without typing's helpers (a compile asks for every field): each
    # of the spec's sections, found by what msgspec itself reads from the annotations.
    import msgspec

    from tutorrl.compiler.spec import structs
    from tutorrl.compiler.spec.load import struct_in

    sections = [c for c in vars(structs).values() if isinstance(c, type) and issubclass(c, structs.Section)]
    for cls in sections:
        for f in msgspec.inspect.type_info(cls).fields:
            held = f.type.cls if isinstance(f.type, msgspec.inspect.StructType) else next(
                (t.cls for t in getattr(f.type, "types", ()) if isinstance(t, msgspec.inspect.StructType)), None)
            assert struct_in(cls.__annotations__[f.name]) is held, (cls.__name__, f.name)
    assert struct_in(structs.Spec) is structs.Spec and struct_in(int) is None and struct_in(int | None) is None
    assert struct_in(structs.Recipe | None) is structs.Recipe and struct_in(structs.Text) is None
