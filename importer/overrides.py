"""Hydra's reading of one override, parsed once per process.

An import reads each override of a launch three times: to translate it, and
in the round trip's two compositions (the original launch's, all the same
text, and the imported spec's, about half of it the same text). Each read is
a run of Hydra's Antlr parser (~0.2 ms warm, more while its lexer's DFA
fills), so the same text is parsed once. A parsed ``Override`` is not changed
by its readers: ``value()`` builds a new list or dict on every call.
"""

from __future__ import annotations

import functools

# The corpus tool imports thousands of launches in one process: a bound keeps its memory flat.
_CACHE_SIZE = 4096


@functools.cache
def _parser():
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create()


@functools.lru_cache(maxsize=_CACHE_SIZE)
def parse(text: str):
    """Hydra's ``Override`` for ``text``, as ``OverridesParser.parse_override`` reads it; raises what
    that raises (an error is not kept: the next read parses again and raises the same)."""
    return _parser().parse_override(text)
