"""A deterministic YAML writer for the small subset the exports need.

Core tutorrl depends on msgspec and tomli-w only, and msgspec's YAML needs
PyYAML; the documents here are mappings, lists, strings, integers and
booleans (floats too), so a writer of some sixty lines keeps the compile-path dependencies
as they are. Strings are written plain only where YAML 1.1 and 1.2 both read
them back as the same string, as a literal block where that is exact, and
double-quoted otherwise.
The tests read every export back with PyYAML, and prove the writer against
it with hypothesis: every value it is given reads back as that value.
"""

from __future__ import annotations

import re

# Plain scalars that read back as strings in YAML 1.1 and 1.2 alike: no
# indicator at the start, no ': ' or ' #', nothing a resolver takes for a
# bool, null, number, timestamp or sexagesimal (those have digits and ':'/'-').
_PLAIN = re.compile(r"[A-Za-z_/][A-Za-z0-9_./-]*")
_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"}


def _quote(text: str) -> str:
    """A double-quoted scalar in printable ASCII: YAML's escapes (``\\U`` for a
    character past U+FFFF, which JSON would split into a surrogate pair YAML
    does not join)."""
    out = []
    for c in text:
        n = ord(c)
        if c in '"\\':
            out.append("\\" + c)
        elif 0x20 <= n < 0x7F:
            out.append(c)
        elif n < 0x100:
            out.append(f"\\x{n:02x}")
        elif n < 0x10000:
            out.append(f"\\u{n:04x}")
        else:
            out.append(f"\\U{n:08x}")
    return '"' + "".join(out) + '"'


def _float(value: float) -> str:
    """A float as both YAML 1.1 and 1.2 read it back: PyYAML's 1.1 resolver takes
    ``1e-05`` (no dot in the mantissa) and ``inf`` for strings, so the mantissa
    always has a dot and the infinities and NaN are YAML's own ``.inf``/``.nan``."""
    if value != value:
        return ".nan"
    if value in (float("inf"), float("-inf")):
        return ".inf" if value > 0 else "-.inf"
    text = repr(value)
    mantissa, e, exponent = text.partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    return mantissa + e + exponent


def _scalar(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, str):
        if _PLAIN.fullmatch(value) and value.lower() not in _WORDS:
            return value
        return _quote(value)
    raise TypeError(f"no YAML spelling for {type(value).__name__}")


def _block(text: str) -> tuple[str, list[str]] | None:
    """A literal block that holds ``text`` exactly -- its indicator and lines -- or None.

    ``|-`` ends the value with no newline, ``|`` with one, ``|+`` keeps every
    trailing newline (as blank lines)."""
    body = text.rstrip("\n")
    trailing = len(text) - len(body)
    if "\n" not in body:
        return None
    lines = body.split("\n")
    # A block's indentation is read from its first non-empty line: one that
    # starts with a space would set it deeper, and lose (or misplace) that space.
    if next(line for line in lines if line).startswith(" "):
        return None
    if any(line != line.rstrip(" ") or not all(c.isprintable() and c not in "\t\ufeff" for c in line)
           for line in lines):
        return None
    style = {0: "|-", 1: "|"}.get(trailing, "|+")
    return style, lines + [""] * max(trailing - 1, 0)


def _key(key: str) -> str:
    if not isinstance(key, str):
        raise TypeError("mapping keys are strings")
    return _scalar(key)


def _lines(value, indent: int) -> list[str]:
    pad = " " * indent
    if isinstance(value, dict):
        out = []
        for k, v in value.items():
            out += _entry(f"{pad}{_key(k)}:", v, indent)
        return out
    if isinstance(value, list):
        out = []
        for item in value:
            if isinstance(item, dict) and item:
                # "- " then the mapping's first key on the same line, the rest under it.
                rest = _lines(item, indent + 2)
                out.append(f"{pad}- {rest[0][indent + 2:]}")
                out += rest[1:]
            else:
                out += _entry(f"{pad}-", item, indent)
        return out
    raise TypeError("a YAML document is a mapping or a list")


def _entry(head: str, value, indent: int) -> list[str]:
    if isinstance(value, dict) and value:
        return [head, *_lines(value, indent + 2)]
    if isinstance(value, list) and value:
        return [head, *_lines(value, indent + 2)]
    if isinstance(value, (dict, list)):
        return [f"{head} {'{}' if isinstance(value, dict) else '[]'}"]
    block = _block(value) if isinstance(value, str) else None
    if block is not None:
        pad = " " * (indent + 2)
        return [f"{head} {block[0]}", *[f"{pad}{line}" if line else "" for line in block[1]]]
    return [f"{head} {_scalar(value)}"]


def comment_text(text: str) -> str:
    """``text`` made safe for the rest of one comment line: every character that
    is not printable is written as its escape (``\\x0a``), since a line break
    in a comment (YAML's and bash's alike; YAML 1.1 also breaks at U+0085,
    U+2028 and U+2029) would start a line the document or script *runs* -- a
    folder named with a newline once added a ``setup:`` key to a SkyPilot task."""
    if text.isprintable():
        return text
    out = []
    for c in text:
        n = ord(c)
        if c.isprintable():
            out.append(c)
        elif n < 0x100:
            out.append(f"\\x{n:02x}")
        elif n < 0x10000:
            out.append(f"\\u{n:04x}")
        else:
            out.append(f"\\U{n:08x}")
    return "".join(out)


def comment_lines(comments: tuple[str, ...], marker: str = "#") -> str:
    """``# `` lines, one per comment, each held to its line (:func:`comment_text`)."""
    return "".join(f"{marker} {comment_text(c)}\n" if c else f"{marker}\n" for c in comments)


def dumps(document, comments: tuple[str, ...] = ()) -> str:
    """One YAML document, ``comments`` first as ``# `` lines."""
    body = _lines(document, 0) if document else ["{}" if isinstance(document, dict) else "[]"]
    return comment_lines(comments) + "\n".join(body) + "\n"


def dumps_all(documents: list, comments: tuple[str, ...] = ()) -> str:
    """Several documents separated by ``---``."""
    return comment_lines(comments) + "---\n".join(
        dumps(d) for d in documents)
