"""The bundle's text files from ``templates/*.tmpl`` (package ``tutorrl.templates``).

Templates are data: text with ``%%{name}`` slots (``%%`` because a bash
script is full of ``$``), filled in one pass (a value is never read for
slots). Repeated parts (one line per override, per passthrough name) are
rendered by the compiler and slotted in whole, so a template never needs a
loop -- and the compile path needs no template engine (jinja2's import would
be part of every ``tutorrl compile``; :class:`string.Template`, which fills
the same slots, compiles a pattern for each subclass).
"""

from __future__ import annotations

import functools
import os

import tutorrl.templates

_FOLDER = os.path.dirname(tutorrl.templates.__file__)
_OPEN = "%%{"


@functools.cache
def _template(name: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """(text before the first slot, ((slot, text after it), ...))."""
    with open(os.path.join(_FOLDER, name), encoding="utf-8") as fh:
        head, *parts = fh.read().split(_OPEN)
    slots = []
    for part in parts:
        slot, close, rest = part.partition("}")
        if not close or not slot.isidentifier():
            raise ValueError(f"{name}: a '%%{{' that opens no slot name")
        slots.append((slot, rest))
    for text in (head, *(rest for _, rest in slots)):
        if "%%" in text:
            raise ValueError(f"{name}: '%%' outside a %%{{slot}}")
    return head, tuple(slots)


def render_template(name: str, **slots: str) -> str:
    """``name`` with every slot filled; a missing slot is a KeyError (a compiler bug, never a user's)."""
    head, parts = _template(name)
    out = [head]
    for slot, rest in parts:
        out += (slots[slot], rest)
    return "".join(out)
