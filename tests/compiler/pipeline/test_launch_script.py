"""launch.sh hands verl exactly the intended argv and environment: many examples read without a shell, a sample
under real bash."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

import support
from tutorrl.compiler import compile_bytes, write_bundle
from tutorrl.compiler.pipeline.resolve import resolve
from tutorrl.compiler.release.keymap import load_lock
from tutorrl.compiler.spec.flat import variant_of
from tutorrl.compiler.spec.load import parse_spec
from tutorrl.compiler.spec.normal_form import normalize

from compiler_helpers import launch_in_process, strings  # strings: the alphabet

EXAMPLE = support.SPECS / "gsm8k_custom_reward.toml"


def _expected_argv(raw: bytes, *, rooted_as_written: bool = False) -> list[str]:
    """verl's argv; ``rooted_as_written``: paths under a root as launch.sh's lines name them."""
    spec, _ = parse_spec(raw, "spec.toml")
    spec = normalize(spec)
    rmap = load_lock(spec.experiment.verl, variant_of(spec))
    from tutorrl.compiler.release.keysets import load_keyset

    resolved, findings = resolve(spec, rmap, load_keyset(rmap.release, rmap.variant))
    assert not findings
    # A path under a root gets the root's value (here: the spec's default) in launch.sh.
    defaults = {name: root.default for name, root in spec.roots.items()}
    texts, count = [], 0
    for o in resolved.overrides:
        text = _with_roots(o, defaults)
        if rooted_as_written and text != o.text:
            text, count = f"$rooted_{count}", count + 1
        texts.append(text)
    return ["-m", "verl.trainer.main_ppo", "--config-name", resolved.config_name, *texts]


def _with_roots(override, values: dict[str, str]) -> str:
    import msgspec

    from tutorrl.compiler.pipeline import roots

    value = override.value
    if override.raw is None and any(name in values for name, _ in roots.references(value)):
        expand = lambda v: roots.expand(v, values)  # noqa: E731
        value = [expand(v) for v in value] if isinstance(value, list) else expand(value)
    return msgspec.structs.replace(override, value=value).text


def _odd_spec(train: str, kwarg: str, env_value: str) -> bytes:
    odd = support.Whole(set={"ODD_VALUE": env_value})
    return support.spec_toml(support.example_spec(EXAMPLE.name), data={"train": train},
                             reward={"kwargs": {"note": kwarg}}, env=odd).encode()


@settings(max_examples=500, deadline=None)
@given(text=strings | st.text(max_size=12))
@example(text="")
def test_the_launch_quotes_each_word_as_shlex_does(text):
    # assemble quotes without importing shlex (a share of a cold compile): the same words, every character.
    from tutorrl.compiler.pipeline.assemble import _quote

    assert _quote(text) == shlex.quote(text)
    for c in map(chr, range(0x250)):
        assert _quote(c + text) == shlex.quote(c + text)


# The property over many examples without a shell: launch.sh's words read with POSIX quoting and its roots program
# run in this Python (compiler_helpers.launch_in_process). The shell's own part is the real-bash sample below.
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(train=strings.filter(bool), kwarg=strings, env_value=strings)
def test_launch_sh_hands_verl_exactly_the_argv(tmp_path_factory, train, kwarg, env_value):
    raw = _odd_spec(train, kwarg, env_value)
    bundle = write_bundle(compile_bytes(raw, "spec.toml"), tmp_path_factory.mktemp("b")).path
    argv, env = launch_in_process(bundle)
    assert argv == _expected_argv(raw)
    assert env["ODD_VALUE"] == env_value


# Real bash, a sample: the values that mean most to bash and Hydra, and a few drawn ones; bash must hand verl the
# argv and the environment launch_in_process reads.
@pytest.mark.slow
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(train=strings.filter(bool), kwarg=strings, env_value=strings)
@example(train="it's ${x} \"q\" \\", kwarg="$(touch pwned) `id` $HOME", env_value="a'b\"c $x ${y} \\\t")
@example(train="\\", kwarg="'", env_value="")
@example(train="日本 → ✓ 😀", kwarg="pkg://a,b=[c]{d}", env_value="~ # %")
def test_bash_hands_verl_exactly_the_argv(tmp_path_factory, standin_python, train, kwarg, env_value):
    raw = _odd_spec(train, kwarg, env_value)
    bundle = write_bundle(compile_bytes(raw, "spec.toml"), tmp_path_factory.mktemp("b")).path
    argv = standin_python.argv(bundle)
    assert argv == _expected_argv(raw)
    env = standin_python.seen_env()
    assert env["ODD_VALUE"] == env_value
    read_argv, read_env = launch_in_process(bundle)
    assert argv == read_argv and read_env["ODD_VALUE"] == env_value
    assert not (standin_python.folder / "pwned").exists()


def test_extra_arguments_go_before_the_overrides(tmp_path, standin_python):
    bundle = write_bundle(compile_bytes(EXAMPLE.read_bytes(), "x.toml"), tmp_path).path
    argv = standin_python.argv(bundle, "--cfg", "job")
    assert argv[:6] == ["-m", "verl.trainer.main_ppo", "--config-name", "ppo_trainer", "--cfg", "job"]
    assert argv[6:] == _expected_argv(EXAMPLE.read_bytes())[4:]


def test_wrong_verl_release_is_refused_before_verl_starts(tmp_path, standin_python):
    bundle = write_bundle(compile_bytes(EXAMPLE.read_bytes(), "x.toml"), tmp_path).path
    result = standin_python.run(bundle, verl="0.8.0")
    assert result.returncode == 3
    assert "targets verl 0.9.1" in result.stderr and "0.8.0" in result.stderr
    assert not standin_python.record.exists()


def test_missing_passthrough_is_refused_and_secret_never_written(tmp_path, standin_python):
    raw = (support.SPECS / "chess_tutor_wandb.toml").read_bytes()
    bundle = write_bundle(compile_bytes(raw, "x.toml"), tmp_path).path
    result = standin_python.run(bundle, env={"WANDB_API_KEY": ""})
    assert result.returncode != 0 and "WANDB_API_KEY" in result.stderr
    assert not standin_python.record.exists()
    secret = "s3cr3t-value-123"
    argv = standin_python.argv(bundle, env={"WANDB_API_KEY": secret})
    assert standin_python.seen_env()["WANDB_API_KEY"] == secret
    assert all(secret not in a for a in argv)
    for path in bundle.iterdir():
        assert secret.encode() not in path.read_bytes()


def test_script_is_strict_bash_without_tracing(tmp_path):
    bundle = write_bundle(compile_bytes(EXAMPLE.read_bytes(), "x.toml"), tmp_path).path
    text = (bundle / "launch.sh").read_text()
    assert text.startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in text and "set -x" not in text
    # One override per line: a changed setting is a one-line diff.
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("exec "))
    body = [line.removesuffix(" \\").strip() for line in lines[start + 1:] if line.strip()]
    expected = _expected_argv(EXAMPLE.read_bytes(), rooted_as_written=True)[4:]
    assert [shlex.split(line) for line in body] == [[o] for o in expected]
