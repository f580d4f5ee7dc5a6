"""tutorrl._toml.dumps writes what tomli_w.dumps writes, to the byte.

Every committed bundle's spec.toml was written by tomli_w, and its bytes are
hashed into the bundle's id: the fast writer must never differ. tomli_w is the
oracle here, on generated documents -- the shapes the fast writer writes
itself and the ones it hands back to tomli_w.
"""

from __future__ import annotations

import datetime
import decimal

import tomli_w
from hypothesis import given, settings, strategies as st

from tutorrl import _toml

import support

# Keys: bare ones, and ones that must be quoted and escaped.
keys = st.one_of(st.from_regex(r"\A[A-Za-z0-9_-]{1,8}\Z"), st.text(max_size=6))
strings = st.one_of(st.text(max_size=12), st.text(alphabet='ab"\\\t\n\r\x00\x7f\x1f\u0085\u2028é ', max_size=8))
scalars = st.one_of(strings, st.booleans(), st.integers(min_value=-(2**63), max_value=2**63 - 1),
                    st.floats(allow_nan=True, allow_infinity=True))
plain = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3), max_leaves=8)
# What the fast writer hands to tomli_w: tables in arrays, inline tables, dates, decimals.
other = st.one_of(st.lists(st.dictionaries(keys, scalars, max_size=2), min_size=1, max_size=2),
                  st.lists(st.one_of(scalars, st.dictionaries(keys, scalars, max_size=2)), min_size=2, max_size=3),
                  st.dates(), st.datetimes(), st.times(), st.decimals(allow_nan=False, places=3))


def documents(values):
    return st.recursive(st.dictionaries(keys, values, max_size=4),
                        lambda inner: st.dictionaries(keys, st.one_of(values, inner), max_size=4), max_leaves=12)


@settings(max_examples=400, deadline=None)
@given(documents(plain))
def test_plain_documents_are_written_as_tomli_w_writes_them(doc):
    assert _toml.dumps(doc) == tomli_w.dumps(doc)


@settings(max_examples=200, deadline=None)
@given(documents(st.one_of(plain, other)))
def test_any_other_document_is_tomli_w_s_own(doc):
    assert _toml.dumps(doc) == tomli_w.dumps(doc)


def test_a_key_that_is_not_text_gets_tomli_w_s_error():
    try:
        tomli_w.dumps({"a": {1: 2}})
    except TypeError as exc:
        expected = str(exc)
    try:
        _toml.dumps({"a": {1: 2}})
    except TypeError as exc:
        assert str(exc) == expected
    else:
        raise AssertionError("no error for a key that is not a string")


def test_every_committed_spec_is_written_by_the_fast_path_as_tomli_w_writes_it(monkeypatch):
    from tutorrl.compiler.spec import parse_spec, to_builtins
    from tutorrl.compiler.spec.normal_form import normalize

    specs = sorted(support.SPECS.glob("*.toml"))
    assert specs
    expected = {}
    for path in specs:
        raw = path.read_bytes()
        if b"[sweep]" in raw or b"extends" in raw:
            continue  # a set, not one spec: its points are compiled by the set's tests
        doc = to_builtins(normalize(parse_spec(raw, path.name)[0]))
        expected[path.name] = (doc, tomli_w.dumps(doc))
    assert len(expected) >= 5

    def handed_back(*args, **kwargs):
        raise AssertionError("handed to tomli_w")

    # Specs are the fast writer's whole point: none of them falls back.
    monkeypatch.setattr(tomli_w, "dumps", handed_back)
    for name, (doc, text) in expected.items():
        assert _toml.dumps(doc) == text, name


def test_a_date_in_a_table_goes_to_tomli_w():
    doc = {"a": {"when": datetime.date(2026, 12, 3), "n": decimal.Decimal("1.50")}}
    assert _toml.dumps(doc) == tomli_w.dumps(doc) == '[a]\nwhen = 2026-12-03\nn = 1.50\n'
