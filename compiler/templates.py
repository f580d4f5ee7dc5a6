"""Rendering the bundle's text files from ``templates/*.j2`` (package ``tutorrl.templates``)."""

from __future__ import annotations

import functools
from pathlib import Path

import tutorrl.templates

_FOLDER = Path(tutorrl.templates.__file__).parent


@functools.cache
def _environment():
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FunctionLoader(_source),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )


def _source(name: str) -> str:
    return (_FOLDER / name).read_text(encoding="utf-8")


def render_template(name: str, **context) -> str:
    return _environment().get_template(name).render(**context)
