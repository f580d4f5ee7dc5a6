"""TOML in and out: tomli's compiled reader, and a writer byte-identical to tomli_w's.

Reading. A spec is parsed on every compile, and ``tutorrl check`` parses
every spec of a repository: the standard library's pure-Python ``tomllib``
was a fifth of a warm compile. tomli -- the same parser, of which
``tomllib`` is a copy -- ships wheels compiled with mypyc that parse a spec
about twice as fast and import no slower. It is a core dependency held below
2.4, the release that began to read TOML 1.1: a spec is TOML 1.0, what every
editor and linter of the spec reads. Where tomli is missing (a platform
without its wheel still gets it, pure Python, from pip), ``tomllib`` gives
the same documents and the same errors.

Writing. Every bundle holds its normalised spec as TOML, and its bytes are
hashed: they must be exactly what ``tomli_w.dumps`` writes, the writer every
committed bundle was made with. tomli_w builds them a character at a time
in Python (its string escaper walks each string char by char), a large
part of a compile. :func:`dumps` writes the shapes
a spec has -- tables of strings, booleans, numbers and arrays of them -- by
tomli_w's own layout rules, and hands any other document (arrays of tables,
inline tables, dates, decimals, keys that are not strings) to tomli_w
whole, so it never has to know those rules. A property test holds the two
equal on generated documents (tests/cli/test_toml.py).
"""

from __future__ import annotations

try:
    from tomli import TOMLDecodeError, loads
except ImportError:  # pragma: no cover - tomli is a declared dependency
    from tomllib import TOMLDecodeError, loads

__all__ = ["TOMLDecodeError", "dumps", "loads"]

_BARE_KEY = frozenset("abcdefghijklmnopqrstuvwxyz" "ABCDEFGHIJKLMNOPQRSTUVWXYZ" "0123456789" "-_")
# What a basic string cannot hold as it is: tomli_w escapes these (tab it keeps).
_ESCAPED = frozenset('"\\') | frozenset(chr(i) for i in range(32) if i != 9) | {chr(127)}
_INDENT = "    "  # tomli_w's default indent, for arrays written over several lines


class _Other(Exception):
    """A document :func:`dumps` leaves to tomli_w."""


def dumps(doc: dict) -> str:
    """``tomli_w.dumps(doc)``, to the byte."""
    out: list[str] = []
    try:
        _table(doc, "", out)
    except _Other:
        import tomli_w

        return tomli_w.dumps(doc)
    return "".join(out)


def _table(table: dict, name: str, out: list[str]) -> None:
    # tomli_w's gen_table_chunks: the table's own values first, then each sub-table;
    # a header only for a named table with values of its own or none at all.
    literals = []
    tables = []
    for key, value in table.items():
        kind = type(value)
        if kind is dict:
            tables.append((key, value))
        elif kind is list or kind is tuple:
            if value and any(not _plain(item) for item in value):
                raise _Other  # arrays of tables, inline tables: tomli_w's heuristics decide
            literals.append((key, value))
        elif kind is str or kind is bool or kind is int or kind is float:
            literals.append((key, value))
        else:
            raise _Other
    done = False
    if name and (literals or not tables):
        out.append(f"[{name}]\n")
        done = True
    for key, value in literals:
        out.append(f"{_key(key)} = {_literal(value, 0)}\n")
        done = True
    for key, value in tables:
        if done:
            out.append("\n")
        done = True
        part = _key(key)
        _table(value, f"{name}.{part}" if name else part, out)


def _plain(value) -> bool:
    """A value written inline without tomli_w's table heuristics."""
    kind = type(value)
    if kind is list or kind is tuple:
        return all(_plain(item) for item in value)
    return kind is str or kind is bool or kind is int or kind is float


def _literal(value, nest: int) -> str:
    kind = type(value)
    if kind is str:
        return _string(value)
    if kind is bool:
        return "true" if value else "false"
    if kind is int or kind is float:
        return str(value)
    # A list or tuple of plain values (checked by _table): one item per line.
    if not value:
        return "[]"
    indent = _INDENT * (1 + nest)
    return "[\n" + ",\n".join(indent + _literal(item, nest + 1) for item in value) + f",\n{_INDENT * nest}]"


def _key(key) -> str:
    if type(key) is not str:
        raise _Other  # tomli_w says what is wrong with it
    return key if key and _BARE_KEY.issuperset(key) else _string(key)


def _string(text: str) -> str:
    if _ESCAPED.isdisjoint(text):
        return f'"{text}"'
    import tomli_w

    return tomli_w.dumps({"s": text})[4:-1]  # 's = "..."\n': the escapes are tomli_w's own
