"""Values in Hydra's override grammar, spelled so Hydra reads back exactly them.

Every string is quoted (unquoted, Hydra types ``true``/``8``/``null``, splits
``a,b`` into a sweep, strips edge spaces and fails on ``'``, ``=``, ``#``,
``~`` and non-ASCII). Double quotes are used so the override reads naturally
inside the single quotes of the shell script. Two layers of escaping apply,
innermost first:

1. OmegaConf: a literal ``${`` would be read as an interpolation when verl's
   config is resolved, so it becomes ``\\${``, and backslashes directly before
   it are doubled (OmegaConf reads ``\\\\`` there as one backslash).
2. Hydra's quoted string: ``"`` becomes ``\\"``, and runs of backslashes directly
   before a quote -- escaped ones or the closing one -- are doubled. Other
   backslashes stand for themselves.

The property tests in ``tests/compiler/release/test_hydra.py`` check both layers
against Hydra's own ``OverridesParser`` and against composing verl's config.
"""

from __future__ import annotations

import math
import re


class _Pattern:
    """A pattern compiled at its first use, by re's cache, on a text holding ``needs``
    (a string every match contains): a text without it is its own substitution, and a
    launch whose values need no escaping compiles none of the three. The program
    :func:`launch_prelude` writes compiles them as usual, from ``pattern``."""

    def __init__(self, pattern: str, needs: str) -> None:
        self.pattern = pattern
        self.needs = needs

    def sub(self, repl, text: str) -> str:
        return re.sub(self.pattern, repl, text) if self.needs in text else text


_INTERPOLATION = _Pattern(r"(\\*)\$\{", "${")
_BEFORE_QUOTE = _Pattern(r'(\\*)(")', '"')
_TRAILING = _Pattern(r"(\\+)$", "\\")


def omegaconf_escape(text: str) -> str:
    """Make ``${`` literal for OmegaConf (what Hydra's parser hands back)."""
    return _INTERPOLATION.sub(lambda m: m.group(1) * 2 + "\\${", text)


def quote_string(text: str) -> str:
    body = omegaconf_escape(text)
    body = _BEFORE_QUOTE.sub(lambda m: m.group(1) * 2 + '\\"', body)
    body = _TRAILING.sub(lambda m: m.group(1) * 2, body)
    return f'"{body}"'


def render_value(value) -> str:
    """One typed value in override grammar."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"not a finite number: {value!r}")
        return repr(value)
    if isinstance(value, str):
        return quote_string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(render_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{render_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot render {type(value).__name__} as a Hydra value")


def render_override(key: str, value, *, append: bool = False) -> str:
    return f"{'+' if append else ''}{key}={render_value(value)}"


def launch_prelude(*functions) -> list[str]:
    """Source lines that define this module's quoting in a program launch.sh runs
    (``re`` imported by the program): its patterns, then :func:`omegaconf_escape`,
    :func:`quote_string` and ``functions``, each from its own source -- never a
    copy, so a value quoted at job start is quoted as the compiler quotes it."""
    return [
        f"_INTERPOLATION = re.compile({_INTERPOLATION.pattern!r})",
        f"_BEFORE_QUOTE = re.compile({_BEFORE_QUOTE.pattern!r})",
        f"_TRAILING = re.compile({_TRAILING.pattern!r})",
        *(function_source(f) for f in (omegaconf_escape, quote_string, *functions)),
    ]


def function_source(function) -> str:
    """A top-level, undecorated ``def``'s source, as ``inspect.getsource`` gives it: its
    first line and every line after it up to the next one at column 0, less trailing
    blank lines. Not ``inspect`` itself: importing it (ast, dis, tokenize) would be a
    large part of a cold compile of a spec with roots (issue 26); a test holds the two equal."""
    code = function.__code__
    with open(code.co_filename, encoding="utf-8") as fh:
        lines = fh.read().splitlines(keepends=True)[code.co_firstlineno - 1:]
    end = 1
    for i, line in enumerate(lines[1:], 1):
        if line.strip() and not line[0].isspace():
            break
        if line.strip():
            end = i + 1
    return "".join(lines[:end])
