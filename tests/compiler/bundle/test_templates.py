"""Bundle templates: ``%%{slot}`` filled in one pass, as string.Template fills them."""

from __future__ import annotations

import os
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tutorrl.compiler.bundle import templates


class _Reference(string.Template):
    delimiter = "%%"


NAMES = sorted(n for n in os.listdir(templates._FOLDER) if n.endswith(".tmpl"))


def _slots(name: str) -> list[str]:
    return [slot for slot, _ in templates._template(name)[1]]


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_each_template_renders_as_string_template_does(name, data):
    values = {slot: data.draw(st.text(max_size=20), label=slot) for slot in _slots(name)}
    with open(os.path.join(templates._FOLDER, name), encoding="utf-8") as fh:
        expected = _Reference(fh.read()).substitute(values)
    assert templates.render_template(name, **values) == expected


def test_values_are_not_read_for_slots():
    name = next(n for n in NAMES if _slots(n))
    values = {slot: "%%{" + slot + "}" for slot in _slots(name)}
    assert "%%{" in templates.render_template(name, **values)


def test_a_missing_slot_is_a_key_error():
    name = next(n for n in NAMES if _slots(n))
    with pytest.raises(KeyError):
        templates.render_template(name)


def test_stray_delimiters_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(templates, "_FOLDER", str(tmp_path))
    templates._template.cache_clear()
    try:
        (tmp_path / "a.tmpl").write_text("x %% y")
        (tmp_path / "b.tmpl").write_text("x %%{not a name} y")
        for bad in ("a.tmpl", "b.tmpl"):
            with pytest.raises(ValueError):
                templates.render_template(bad)
    finally:
        templates._template.cache_clear()
