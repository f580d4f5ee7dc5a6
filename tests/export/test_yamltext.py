"""The exports' YAML writer: whatever it is given, PyYAML reads back exactly that."""

from __future__ import annotations

import math

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tutorrl.export.yamltext import dumps, dumps_all

# Text drawn from YAML's own delicate characters (indentation, line breaks in
# YAML 1.1 and 1.2, indicators, quotes, number parts), so that shapes such as
# "\n .e" -- a block whose first non-empty line is indented -- come up often;
# any character at all, too.
_shaped = st.text(st.sampled_from([" ", "\n", "a", ".", "#", ":", "-", "\t", "'", '"', "\\", "\xe9", "\x85",
                                   "\u2028", "\r", "~", "|", ">", "0", "1", "e", "+", "\ufeff", "\U0001f600"]),
                  max_size=14)
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**63 - 1), st.floats(allow_nan=False),
                     st.text(st.characters(blacklist_categories=("Cs",)), max_size=40), _shaped,
                     st.sampled_from(["yes", "No", "on", "~", "0x1F", "1:20", "010", "1e3", ".inf", "- a",
                                      "a: b", "#x", "a #b", "x\n", "x\n\n", "a\nb\n", "a\nb", " a\nb",
                                      "a\n b\n\n\n", "a \nb", "a\tb\nc", "\ufeffa\nb", "", "@x", "!x", "*x", "&x"]))
_documents = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.text(max_size=12), inner, max_size=4)),
    max_leaves=20,
)


# Deterministic (derandomize, no example database): the same examples on every
# run and machine, so a pass means the same thing everywhere.
@settings(max_examples=1000, deadline=None, derandomize=True, database=None)
@given(st.dictionaries(st.text(max_size=12), _documents, max_size=5))
def test_yaml_reads_back_exactly_what_was_written(document):
    assert yaml.safe_load(dumps(document)) == document


@settings(max_examples=20000, deadline=None, derandomize=True, database=None)
@given(st.one_of(_shaped, st.floats(allow_nan=False), st.text(st.characters(blacklist_categories=("Cs",)),
                                                                max_size=20)))
def test_every_scalar_reads_back_as_itself(value):
    """One scalar at a time, many of them: strings written as blocks, plain or quoted, and floats."""
    assert yaml.safe_load(dumps({"k": value, "list": [value]})) == {"k": value, "list": [value]}


@pytest.mark.parametrize("value", [
    "\n .e",                       # a block's indentation is read from its first non-empty line: read back "\n.e"
    "\n  indented first\nthen\n",  # ... and the lines after it are less indented: YAML PyYAML refuses
    1e-05, 1e16, 5e-324,             # no dot in the mantissa: YAML 1.1 reads a string
    float("inf"), float("-inf"),     # JSON's Infinity is a string in YAML
])
def test_the_values_a_review_found_wrong(value):
    assert yaml.safe_load(dumps({"k": value})) == {"k": value}


def test_nan_is_yaml_nan():
    assert math.isnan(yaml.safe_load(dumps({"k": float("nan")}))["k"])


def test_several_documents_and_comments():
    text = dumps_all([{"a": 1}, {"b": ["x", {"c": "d\ne\n"}]}], ("first", ""))
    assert text.startswith("# first\n#\n")
    assert list(yaml.safe_load_all(text)) == [{"a": 1}, {"b": ["x", {"c": "d\ne\n"}]}]
