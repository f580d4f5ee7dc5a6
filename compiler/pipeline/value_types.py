"""Whether a raw override's value (``[verl] extra_overrides``) can be the type verl declares for its key.

Hydra reads an override's value by its own grammar (``hydra/grammar/OverrideLexer.g4``:
``INT``, ``FLOAT``, ``BOOL``, ``NULL``, quoted and unquoted strings, ``[...]``,
``{...}``, functions) and puts it into verl's composed config, whose nodes are
plain (verl's yaml has no schema): Hydra itself takes any value for any key.
What verl then does with it is where a wrong type shows:

* a section verl builds into a dataclass through ``OmegaConf.structured`` +
  ``merge`` (``verl.utils.config.omega_conf_to_dataclass``) converts the value
  as OmegaConf's typed nodes do (``omegaconf/nodes.py``, 2.3):
  ``IntegerNode`` takes an int or a string ``int()`` parses and nothing else;
  ``FloatNode`` a float, an int or a string ``float()`` parses; ``BooleanNode``
  a bool, an int, or a string that is an int or one of yes/y/on/true/no/n/off/false
  (any case); a list field a list. Anything else is a ``ValidationError``: verl
  stops at start;
* a plain section is read as given: a string where verl counts
  (``[n_gpus] * config.trainer.nnodes``) fails at start, a string where it tests
  a flag is always true -- a silent misreading.

So a value is refused here only where no reading of verl's takes it: a string
that OmegaConf's conversion to the declared int or bool refuses (and that a
plain node would hand on as a string), a list or table for a scalar, a number
or bool for a list. A string for a float is left alone: the key set's type is
its yaml default's, and verl 0.8 and 0.9 declare
``rollout_correction.rollout_is_threshold: str | float = 2.0`` (its own DAPO
examples pass ``0.5_4.0``, a lower_upper pair) -- the only unions with ``str``
among verl's config dataclasses 0.6-0.9, all on floats. What OmegaConf converts
(``"1"`` for an int, ``"false"`` for a bool) verl takes in its typed sections, and is left alone;
so is a float for an int (verl's yaml declares ``rollout.top_p: 1``, an int,
and reads 0.9 as meant), a string for a list (verl wraps a single logger or
file name itself), null (verl's "unset"), and what Hydra resolves later
(interpolations, functions such as ``int(...)``, sweeps). A key whose type the
key set does not know (null, str, dict) is not checked. Standard library only:
the compile path does not import Hydra; ``tests/compiler/pipeline/
test_extra_value_types.py`` holds this reading to Hydra's parser and
OmegaConf's nodes.
"""

from __future__ import annotations

import re

_DIGITS = r"[0-9](?:_?[0-9])*"
_INT_UNSIGNED = r"(?:0|[1-9](?:_?[0-9])*)"
_POINT = rf"(?:{_INT_UNSIGNED}\.|{_INT_UNSIGNED}?\.{_DIGITS})"
# Compiled by re's cache where first used: a value stops at the first that matches,
# and a module-level compile of all six is paid by every spec with extra_overrides.
_INT = rf"[+-]?{_INT_UNSIGNED}\Z"
_FLOAT = rf"[+-]?(?:{_POINT}|(?:{_INT_UNSIGNED}|{_POINT})[eE][+-]?{_DIGITS}|[Ii][Nn][Ff]|[Nn][Aa][Nn])\Z"
_BOOL = r"(?:[Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee])\Z"
_NULL = r"[Nn][Uu][Ll][Ll]\Z"
_QUOTED = r"""("|')(.*)\1\Z"""
_FUNCTION = r"[A-Za-z_][A-Za-z0-9_.]*\s*\("
_BOOL_WORDS = {"yes", "y", "on", "true", "no", "n", "off", "false"}

# The declared types checked, in the words a message uses.
_WORDS = {"int": "an integer", "float": "a number", "bool": "a boolean", "list": "a list"}


def hydra_type(value: str) -> tuple[str, str] | None:
    """(type, text) Hydra gives ``value`` (the text after ``=``): ``int``, ``float``, ``bool``,
    ``null``, ``str`` (``text`` without its quotes), ``list`` or ``dict``; None where it is only
    known once Hydra or OmegaConf resolve it (an interpolation, a function, a sweep)."""
    text = value.strip(" \t")
    if "${" in text or re.match(_FUNCTION, text):
        return None
    if text.startswith("["):
        return "list", text
    if text.startswith("{"):
        return "dict", text
    quoted = re.match(_QUOTED, text, re.DOTALL)
    if quoted and quoted.group(1) not in quoted.group(2):
        return "str", quoted.group(2)
    if "," in text.replace("\\,", ""):
        return None  # a sweep (a,b): Hydra's multirun, not one value
    for name, pattern in (("int", _INT), ("float", _FLOAT), ("bool", _BOOL), ("null", _NULL)):
        if re.match(pattern, text):
            return name, text
    return "str", text


def _converts(text: str, declared: str) -> bool:
    """Whether OmegaConf's typed node for ``declared`` converts the string ``text`` (omegaconf/nodes.py)."""
    try:
        if declared == "int":
            int(text)
        elif declared == "float":
            float(text)
        else:  # bool: an int, or one of BooleanNode's words
            try:
                int(text)
            except ValueError:
                return text.lower() in _BOOL_WORDS
        return True
    except ValueError:
        return False


def type_refusal(key: str, value: str, declared: str, default, release: str) -> tuple[str, str] | None:
    """(message, hint) when no reading of verl's takes ``value`` for ``key`` of type ``declared``, else None."""
    if declared not in _WORDS:
        return None
    given = hydra_type(value)
    if given is None:
        return None
    kind, text = given
    if kind == "null":
        return None
    if declared == "list":
        if kind in ("list", "str"):
            return None
    elif kind == "str":
        if declared == "float" or _converts(text, declared):
            return None
    elif kind in ("int", "float", "bool"):
        return None  # a number or bool for a scalar: OmegaConf or Python reads it as a number
    shown = {"str": f"the string {text!r}", "list": "a list", "dict": "a table",
             "int": f"the integer {text}", "float": f"the number {text}", "bool": f"the boolean {text}"}[kind]
    why = ("OmegaConf cannot convert it, so verl stops where it builds the section into its typed config, "
           "and reads the wrong type as given where it does not")
    example = {"int": "1", "float": "0.5", "bool": "true", "list": "[a,b]"}[declared]
    return (f"verl {release} declares '{key}' {_WORDS[declared]} (default {_shown(default)}); Hydra passes "
            f"{shown}: {why}", f"give {_WORDS[declared]}, e.g. '{key}={example}'")


def _shown(default) -> str:
    if isinstance(default, bool):
        return "true" if default else "false"
    if isinstance(default, list):
        return "[" + ", ".join(str(v) for v in default) + "]"
    return str(default)
