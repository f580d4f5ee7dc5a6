"""Roots: the bundle names them, launch.sh puts the job's value in, and Hydra's real parser reads back exactly
the path whatever the value holds (many values read without a shell, a sample under real bash)."""

from __future__ import annotations

import json
import tomllib

import pytest
import tomli_w
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import support
from compiler_helpers import ALPHABET, launch_in_process
from tutorrl.compiler import compile_bytes, write_bundle
from tutorrl.compiler.pipeline import roots
from tutorrl.errors import SpecError

EXAMPLE = support.SPECS / "gsm8k_custom_reward.toml"
# Values a root may hold on some machine: the alphabet (quotes, $,
# ${, backslashes, spaces, brackets, commas, non-ASCII), never empty.
root_values = st.lists(st.sampled_from(ALPHABET + ["$(touch pwned)", "`id`", "\n"]), min_size=1, max_size=10).map(
    "".join).filter(lambda v: "\0" not in v)


def _spec(**changes) -> dict:
    return support.spec_doc(tomllib.loads(EXAMPLE.read_text()), **support.nested(changes))


def _bundle(tmp_path, data: dict):
    return write_bundle(compile_bytes(tomli_w.dumps(data).encode(), "spec.toml"), tmp_path).path


def _overrides(argv: list[str]) -> dict:
    out = {}
    for text in argv[4:]:
        kind, key, value = support.parse_override(text)
        out[key] = support.unescape_interpolation(value)
    return out


def test_example_names_roots_and_not_their_values(tmp_path):
    bundle = _bundle(tmp_path, _spec())
    text = (bundle / "launch.sh").read_text()
    assert "$DATA_ROOT" not in text.split("exec ")[1]  # the expansion is computed before exec, by name
    assert '"root": "DATA_ROOT"' in text and '"path": "/gsm8k/train.parquet"' in text
    spec_toml = (bundle / "spec.toml").read_text()
    assert 'train = "$DATA_ROOT/gsm8k/train.parquet"' in spec_toml
    assert "[roots.DATA_ROOT]" in spec_toml


def _reach_verl_exactly(argv: list[str], value: str) -> None:
    got = _overrides(argv)
    joined = value.rstrip("/") if value.rstrip("/") else ""
    assert got["data.train_files"] == joined + "/gsm8k/train.parquet"
    assert got["data.val_files"] == joined + "/gsm8k/test.parquet"
    assert got["trainer.default_local_dir"] == "/ck/gsm8k-custom-reward"


@pytest.fixture(scope="module")
def example_bundle(tmp_path_factory):
    return _bundle(tmp_path_factory.mktemp("b"), _spec())


# The property over many values without a shell: launch.sh's words and its roots program, run in this Python
# (compiler_helpers.launch_in_process). The shell's own part is the real-bash sample below.
@settings(max_examples=300, deadline=None)
@given(value=root_values)
def test_any_root_value_reaches_verl_exactly(example_bundle, value):
    argv, _ = launch_in_process(example_bundle, {"DATA_ROOT": value, "CKPT_ROOT": "/ck"})
    _reach_verl_exactly(argv, value)


# Real bash, a sample: each value that means something to bash on its own, and a few drawn ones; bash must hand
# verl what launch_in_process reads, and run nothing a value holds.
@pytest.mark.slow
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                               HealthCheck.function_scoped_fixture])
@given(value=root_values)
@example(value="$(touch pwned)")
@example(value="`touch pwned`")
@example(value="\n")
@example(value="it's \"q\" ${x} \\ $HOME * ~ 日本 😀")
@example(value="/")
@example(value="a b/")
def test_any_root_value_reaches_verl_exactly_through_real_bash(tmp_path_factory, standin_python, value):
    bundle = _bundle(tmp_path_factory.mktemp("b"), _spec())
    env = {"DATA_ROOT": value, "CKPT_ROOT": "/ck"}
    argv = standin_python.argv(bundle, env=env)
    _reach_verl_exactly(argv, value)
    assert argv == launch_in_process(bundle, env)[0]
    assert not (standin_python.folder / "pwned").exists()


def test_defaults_apply_and_a_list_of_paths_mixes_roots(tmp_path, standin_python):
    data = _spec(**{"data.train": ["$DATA_ROOT/a.parquet", "/abs/b.parquet", "$DATA_ROOT"]})
    bundle = _bundle(tmp_path, data)
    got = _overrides(standin_python.argv(bundle))
    assert got["data.train_files"] == ["data/a.parquet", "/abs/b.parquet", "data"]
    assert got["trainer.default_local_dir"] == "checkpoints/gsm8k-custom-reward"


def test_a_root_without_default_or_value_stops_the_launch(tmp_path, standin_python):
    data = _spec(**{"roots.DATA_ROOT": {}})
    bundle = _bundle(tmp_path, data)
    result = standin_python.run(bundle, env={"DATA_ROOT": ""})
    assert result.returncode != 0
    assert "DATA_ROOT: is a root of this bundle" in result.stderr
    assert not standin_python.record.exists()  # verl never started


def _problems(data: dict) -> list[str]:
    with pytest.raises(SpecError) as info:
        compile_bytes(tomli_w.dumps(data).encode(), "spec.toml")
    return [f"{p.key}: {p.message}" for p in info.value.problems]


def test_roots_are_refused_where_they_would_need_a_second_expansion():
    data = _spec(**{"reward.kwargs.where": "$DATA_ROOT/x", "env.set": {"CACHE": "$DATA_ROOT/cache"}})
    data["verl"]["extra_overrides"].append("data.tokenizer=$DATA_ROOT/tok")
    found = "\n".join(_problems(data))
    assert "reward.kwargs: root $DATA_ROOT is used in a table entry" in found
    assert "env.set.CACHE: root $DATA_ROOT is used in an environment value" in found
    assert "root $DATA_ROOT is used in a raw override ([verl] extra_overrides or unread_overrides)" in found


@pytest.mark.parametrize("name, words", [
    ("TUTORRL_DATA", "TUTORRL_* names are set by tutorrl itself"),
    ("PATH", "changes how the launch itself runs"),
    ("HOME", "changes how the launch itself runs"),
    # A root's value is put into verl's config: `run --dry-run` printed this one
    # and wrote it into runs/*/verl-config.yaml.
    ("HF_TOKEN", "HF_TOKEN looks like a secret; a root's value is written into verl's config"),
    ("OpenaiApiKey", "looks like a secret"),
    # Bash gives these its own values: compiled, they stopped every launch.
    *[(name, f"{name} is a variable bash sets or changes itself; it cannot name a folder")
      for name in ("OLDPWD", "SHELL", "_", "PWD", "SHLVL", "RANDOM", "LINENO", "SECONDS", "BASHPID", "BASH",
                   "OPTIND", "PIPESTATUS", "BASH_ARGV0", "COMP_LINE")],
])
def test_root_names_that_belong_to_others_are_refused(name, words):
    data = _spec(**{f"roots.{name}": {"default": "x"}, "data.train": f"${name}/t.parquet"})
    assert any(words in p for p in _problems(data))


def test_a_root_also_in_env_is_refused():
    data = _spec(**{"env.passthrough": ["DATA_ROOT"]})
    assert any("DATA_ROOT is both a root and in [env]" in p for p in _problems(data))


def test_undeclared_and_unused_roots_are_warnings():
    data = _spec(**{"model.path": "$MODEL_ROOT/qwen", "roots.SPARE": {}})
    compiled = compile_bytes(tomli_w.dumps(data).encode(), "spec.toml")
    warnings = [f"{w.key}: {w.message}" for w in compiled.warnings]
    assert any("model.path: $MODEL_ROOT is not a root of this spec" in w for w in warnings)
    assert any("root SPARE is declared but no setting starts with $SPARE" in w for w in warnings)
    # Undeclared: passed as written, the name and all.
    assert b"'actor_rollout_ref.model.path=\"$MODEL_ROOT/qwen\"'" in compiled.files["launch.sh"]


@given(name=st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True),
       rest=st.one_of(st.just(""), st.text(max_size=10).map(lambda t: "/" + t)),
       other=st.text(max_size=12))
def test_reference_splits_exactly_a_leading_name(name, rest, other):
    assert roots.reference(f"${name}{rest}") == (name, rest)
    assert roots.expand(f"${name}{rest}", {name: "/r/"}) == "/r" + rest if rest else "/r/"
    assert roots.expand(f"${name}{rest}", {}) is None
    # Text that does not start with a whole name is left as written.
    for text in (other.lstrip("$"), f"x${name}{rest}", f"${name}x{other}" if other[:1] not in ("", "/") else "a"):
        if roots.reference(text) is None:
            assert roots.expand(text, {name: "/r"}) == text
    assert roots.reference(f"${name}.parquet") is None and roots.reference(f"${{{name}}}/x") is None


# Every character, lone surrogates included (hypothesis leaves those out unless asked).
_json_values = st.recursive(
    st.text(st.characters(blacklist_categories=()), max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6)


@settings(max_examples=300, deadline=None)
@given(value=_json_values)
@example(value=["\x7f\x00\b\f\n\r\t\"\\ é😀", {"root": "A", "path": ""}, [], {}])
def test_the_launch_argument_is_written_as_json_writes_it(value):
    # launch.sh's JSON argument is written without importing json (a share of a cold compile of a spec with
    # roots): json's own text, byte for byte; what it does not write (a number) is json's to write.
    assert roots._json_text(value) == json.dumps(value, sort_keys=True)
    assert roots.launch_argument(["$DATA_ROOT/x", 3, None]) == json.dumps(
        [{"path": "/x", "root": "DATA_ROOT"}, 3, None], sort_keys=True)


def test_a_root_in_a_table_entrys_list_is_found_and_numbers_beside_it_are_not_roots():
    data = _spec(**{"reward.kwargs.n": 3, "reward.kwargs.files": ["a", "x${DATA_ROOT}"]})
    assert [p for p in _problems(data) if "root $DATA_ROOT is used" in p] == [
        "reward.kwargs: root $DATA_ROOT is used in a table entry verl reads whole; roots are put in only where a "
        "setting's own value starts with one"]
