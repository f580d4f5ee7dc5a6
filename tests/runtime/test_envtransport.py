"""The `$` transport against Ray's own env_vars rewriting (ray._private.utils.update_envs)."""

import os

import pytest
from hypothesis import given, settings, strategies as st

from tutorrl.runtime.envtransport import NOTHING_VAR, encode_env

pytestmark = pytest.mark.needs_ray


def _update_envs(env: dict) -> None:
    """Ray's own rewriting (imported by each test: at import, a core environment's collection fails)."""
    from ray._private.utils import update_envs

    update_envs(env)


# Bias the alphabet towards the characters that matter.
_text = st.text(alphabet=st.sampled_from(list("${}_:-AXHOMEax0 \\'\"")), max_size=30)


def _through_ray(values: dict[str, str]) -> dict[str, str]:
    saved = dict(os.environ)
    try:
        os.environ.pop(NOTHING_VAR, None)
        os.environ.update(HOME="/home/someone", X="x-value", _="/usr/bin/env")
        _update_envs(encode_env(values))
        return {k: os.environ[k] for k in values}
    finally:
        os.environ.clear()
        os.environ.update(saved)


def test_issue_example_arrives_intact():
    values = {"A": "a$HOME${X}$$", "B": "${HOME}", "C": "plain", "D": "${X:-dflt}"}
    assert _through_ray(values) == values


def test_values_without_dollar_are_sent_unchanged():
    assert encode_env({"A": "plain {x}"}) == {"A": "plain {x}"}


def test_unencoded_value_would_be_mangled():
    # Guards the premise: without the transport Ray changes the value.
    saved = dict(os.environ)
    try:
        os.environ["HOME"] = "/home/someone"
        _update_envs({"A": "a$HOME${X}$$"})
        assert os.environ["A"] != "a$HOME${X}$$"
    finally:
        os.environ.clear()
        os.environ.update(saved)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(["A", "B", "C", "PATHY"]), _text, max_size=4))
def test_any_value_arrives_intact(values):
    assert _through_ray(values) == values
