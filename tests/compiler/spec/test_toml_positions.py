"""The position scanner against documents tomllib accepts."""

from __future__ import annotations

import tomllib

import tomli_w
from hypothesis import given, settings
from hypothesis import strategies as st

from tutorrl.compiler.spec.toml_positions import key_positions

TRICKY = '''\
# comment [not.a.table]
title = "a = b # not a comment"
"quoted key" = 1
dotted.inner = 'lit'
multi = """
[fake.table]
fake = 1
"""
literal_multi = \'\'\'x \'\' y\'\'\'
arr = [
  1, # comment ] with bracket
  [2, 3],
  { k = "}" },
]

[table . "with space"]
x = { a = 1, b.c = [1, 2] }

[[points]]
y = 1
[[points]]
y = 2
'''


def test_tricky_document():
    tomllib.loads(TRICKY)  # the scanner's precondition
    pos = key_positions(TRICKY)
    assert pos[("title",)] == (2, 1)
    assert pos[("quoted key",)] == (3, 1)
    assert pos[("dotted",)] == (4, 1) and pos[("dotted", "inner")] == (4, 8)
    assert pos[("multi",)] == (5, 1)
    assert ("fake",) not in pos and ("fake", "table") not in pos
    assert pos[("literal_multi",)] == (9, 1)
    assert pos[("arr", "0")] == (11, 3) and pos[("arr", "1")] == (12, 3)
    assert pos[("arr", "2", "k")] == (13, 5)
    assert pos[("table", "with space")] == (16, 10)
    assert pos[("table", "with space", "x", "b", "c")] == (17, 16)
    assert pos[("table", "with space", "x", "b", "c", "1")] == (17, 24)
    assert pos[("points", "y")] == (20, 1)


_keys = st.text(alphabet="abcXYZ_-09 .é\"'", min_size=1, max_size=6)
_scalars = st.one_of(st.integers(-5, 5), st.booleans(), st.text(alphabet="ab\"'\\ #=[]{}\n", max_size=8))
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3), max_leaves=6)
_tables = st.recursive(
    st.dictionaries(_keys, _values, max_size=4),
    lambda inner: st.dictionaries(_keys, st.one_of(_values, inner), max_size=4),
    max_leaves=12,
)


def _walk(data, path=()):
    for key, value in data.items():
        yield path + (key,)
        if isinstance(value, dict):
            yield from _walk(value, path + (key,))


@settings(max_examples=150, deadline=None)
@given(_tables, st.booleans())
def test_every_key_of_a_written_document_is_found_where_it_is_written(data, multiline):
    text = tomli_w.dumps(data, multiline_strings=multiline)
    assert tomllib.loads(text) == data
    pos = key_positions(text)
    lines = text.splitlines()
    for path in _walk(data):
        assert path in pos, (path, text)
        line, column = pos[path]
        written = lines[line - 1][column - 1:]
        # However tomli_w spells the key (bare or quoted), it stands there.
        spelled = tomli_w.dumps({path[-1]: 1}).split(" = ")[0]
        assert written.startswith(spelled), (path, written, text)
