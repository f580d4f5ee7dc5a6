"""Field documentation read from the source: the strings beneath fields."""

from __future__ import annotations

import msgspec

from tutorrl.compiler.spec.structs import Section, Spec, Trainer
from tutorrl.review.fielddocs import field_docs


class _Base(msgspec.Struct, kw_only=True):
    inherited: int = 0
    """Declared on the base class."""


class _Documented(_Base):
    wrapped: str | None = None
    """A sentence long enough to be wrapped
    over two lines of source."""
    renamed: int = msgspec.field(default=1, name="toml-name")
    """Keyed by its name in TOML."""
    bare: int = 2
    "Any string literal counts, not only triple-quoted ones."
    undocumented: int = 3
    not_a_doc = "a class attribute, not a field"


def test_docs_are_the_strings_beneath_each_field():
    docs = field_docs(_Documented)
    assert docs == {
        "inherited": "Declared on the base class.",
        "wrapped": "A sentence long enough to be wrapped over two lines of source.",
        "toml-name": "Keyed by its name in TOML.",
        "bare": "Any string literal counts, not only triple-quoted ones.",
    }


def test_every_spec_field_is_documented():
    # The schema test checks the published schema; this names the field that lacks one.
    import typing

    seen: set[type] = set()
    todo = [Spec]
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        docs = field_docs(cls)
        missing = [f.encode_name for f in msgspec.structs.fields(cls) if f.encode_name not in docs]
        assert not missing, f"{cls.__name__}: fields without a documentation string: {missing}"
        for hint in typing.get_type_hints(cls).values():
            stack = [hint]
            while stack:
                tp = stack.pop()
                if isinstance(tp, type) and issubclass(tp, Section):
                    todo.append(tp)
                stack.extend(typing.get_args(tp))
    assert Trainer in seen and len(seen) >= 20


def test_source_that_cannot_be_read_gives_no_docs():
    cls = msgspec.defstruct("Generated", [("x", int)], module="not_a_loaded_module")
    assert field_docs(cls) == {}
