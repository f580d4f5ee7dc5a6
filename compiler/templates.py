"""The bundle's text files from ``templates/*.tmpl`` (package ``tutorrl.templates``).

Templates are data: text with ``%%{name}`` slots (``%%`` because a bash
script is full of ``$``), filled by :class:`string.Template`. Repeated parts
(one line per override, per passthrough name) are rendered by the compiler
and slotted in whole, so a template never needs a loop -- and the compile path
needs no template engine (jinja2 cost ~15 ms of every ``tutorrl compile``).
"""

from __future__ import annotations

import functools
import os
import string

import tutorrl.templates

_FOLDER = os.path.dirname(tutorrl.templates.__file__)


class _Slots(string.Template):
    delimiter = "%%"


@functools.cache
def _template(name: str) -> _Slots:
    with open(os.path.join(_FOLDER, name), encoding="utf-8") as fh:
        return _Slots(fh.read())


def render_template(name: str, **slots: str) -> str:
    """``name`` with every slot filled; a missing slot is a KeyError (a compiler bug, never a user's)."""
    return _template(name).substitute(slots)
