"""Override rendering, checked against Hydra's real parser and verl 0.9.1's real config."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import support
from compiler_helpers import strings  # the alphabet: quotes, $, ${, brackets, non-ASCII
from tutorrl.compiler.release.hydra import omegaconf_escape, render_override, render_value

scalars = st.one_of(
    strings,
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
)
values = st.one_of(scalars, st.lists(st.one_of(strings, st.integers(-1000, 1000), st.booleans()), max_size=4))


def _same(parsed, intended) -> bool:
    if isinstance(intended, float):
        return isinstance(parsed, float) and (parsed == intended or (math.isnan(parsed) and math.isnan(intended)))
    if isinstance(intended, list):
        return isinstance(parsed, list) and len(parsed) == len(intended) and all(map(_same, parsed, intended))
    return type(parsed) is type(intended) and parsed == intended


@settings(max_examples=600, deadline=None)
@given(strings)
def test_parser_reads_back_exactly_the_string(text):
    kind, key, value = support.parse_override(render_override("trainer.experiment_name", text))
    assert (kind, key) == ("CHANGE", "trainer.experiment_name")
    # Hydra hands back OmegaConf's escaped text; OmegaConf turns \\${ into ${.
    assert value == omegaconf_escape(text)
    assert support.unescape_interpolation(value) == text


@settings(max_examples=400, deadline=None)
@given(values)
def test_parser_reads_back_typed_values(value):
    kind, key, parsed = support.parse_override(render_override("+a.b", value, append=False))
    assert kind == "ADD" and key == "a.b"
    assert _same(support.unescape_interpolation(parsed), value), (render_value(value), parsed)


def test_strings_that_look_like_other_types_stay_strings():
    for text in ["true", "8", "null", "1e-6", "[1,2]", "a,b", "  padded  ", ""]:
        assert support.parse_override(render_override("k", text))[2] == text


@pytest.mark.needs_verl
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(strings, strings)
def test_verl_config_holds_the_intended_values(name, kwarg):
    """Composed by Hydra into verl 0.9.1's own trainer config (the installed package)."""
    config = support.compose_verl("ppo_trainer", [
        render_override("trainer.experiment_name", name),
        render_override("reward.custom_reward_function.reward_kwargs.note", kwarg, append=True),
        render_override("trainer.logger", ["console", name]),
        render_override("actor_rollout_ref.actor.optim.lr", 3e-07),
    ])
    assert support.lookup(config, "trainer.experiment_name") == name
    assert support.lookup(config, "reward.custom_reward_function.reward_kwargs.note") == kwarg
    assert support.lookup(config, "trainer.logger") == ["console", name]
    assert support.lookup(config, "actor_rollout_ref.actor.optim.lr") == 3e-07


def test_non_finite_numbers_are_refused():
    with pytest.raises(ValueError):
        render_value(float("inf"))


def test_launch_programs_carry_each_function_as_inspect_reads_it():
    """The programs launch.sh runs embed the compiler's own quoting by its source,
    read without importing inspect (a cold compile's cost); it must be the same text."""
    import inspect

    from tutorrl.compiler.release import hydra
    from tutorrl.compiler.pipeline import recipe_code, roots

    for function in (hydra.omegaconf_escape, hydra.quote_string, hydra.render_value, roots.join,
                     recipe_code.recipe_files, recipe_code.recipe_digest):
        assert hydra.function_source(function) == inspect.getsource(function), function.__name__
