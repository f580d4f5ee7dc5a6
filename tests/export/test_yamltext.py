"""The exports' YAML writer: whatever it is given, PyYAML reads back exactly that."""

from __future__ import annotations

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tutorrl.export.yamltext import dumps, dumps_all

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**63 - 1),
                     st.text(st.characters(blacklist_categories=("Cs",)), max_size=40),
                     st.sampled_from(["yes", "No", "on", "~", "0x1F", "1:20", "010", "1e3", ".inf", "- a",
                                      "a: b", "#x", "a #b", "x\n", "x\n\n", "a\nb\n", "a\nb", " a\nb",
                                      "a\n b\n\n\n", "a \nb", "a\tb\nc", "\ufeffa\nb", "", "@x", "!x", "*x", "&x"]))
_documents = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.text(max_size=12), inner, max_size=4)),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.text(max_size=12), _documents, max_size=5))
def test_yaml_reads_back_exactly_what_was_written(document):
    assert yaml.safe_load(dumps(document)) == document


def test_several_documents_and_comments():
    text = dumps_all([{"a": 1}, {"b": ["x", {"c": "d\ne\n"}]}], ("first", ""))
    assert text.startswith("# first\n#\n")
    assert list(yaml.safe_load_all(text)) == [{"a": 1}, {"b": ["x", {"c": "d\ne\n"}]}]
