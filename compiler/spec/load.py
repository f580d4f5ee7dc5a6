"""Reading a spec: TOML text -> validated :class:`~tutorrl.compiler.spec.structs.Spec`.

msgspec stops at the first error and does not know TOML positions, so the
structure is checked here field by field against the struct definitions,
every problem is collected with its line and column, and only then is the
document converted. Cross-field rules (:mod:`tutorrl.compiler.pipeline.rules`) run on
the converted spec and are located the same way.
"""

from __future__ import annotations

import datetime
import functools
import re
import types
import typing
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal, Union

import msgspec

from tutorrl import _toml
from tutorrl.compiler.spec import structs as spec_module
from tutorrl.compiler.spec.structs import Spec
from tutorrl.errors import BundleError, Problem, SpecError

if TYPE_CHECKING:
    from pathlib import Path

KeyPath = tuple[str, ...]

# What each pattern-constrained string means, in words a user can act on.
_PATTERN_WORDS = {
    spec_module._NAME: "a name of letters, digits, '.', '_' and '-' (not starting with '.', '_' or '-')",
    spec_module._ENV_NAME: "an environment variable name (letters, digits, '_'; not starting with a digit)",
    spec_module._RELEASE: "a verl release such as \"0.9.1\"",
    spec_module._IDENT: "a Python identifier",
    r"^(cpu|cuda(:[0-9]+)?)\Z": "\"cpu\", \"cuda\" or \"cuda:N\"",
    spec_module._MODULE: "a dotted Python module name such as \"my_rewards.gsm8k\" (for a file, use reward.path)",
}
_TYPE_WORDS = {
    "str": "a string", "int": "an integer", "float": "a number", "bool": "true or false",
    "array": "an array", "object": "a table", "null": "nothing",
}


# A spec is a page of TOML; a larger "spec" is a mistake (or /dev/zero).
MAX_SPEC_BYTES = 1 << 20
# Nesting deeper than this is never a spec (the deepest real one is ~5).
MAX_DEPTH = 32


def read_spec_bytes(path: str | Path, name: str) -> bytes:
    """The spec file's bytes; a missing, special or oversized file is a located error.

    Opened without blocking and checked to be a regular file before reading, so
    a FIFO or a device (``/dev/zero``) is refused instead of hanging or
    reading forever; at most ``MAX_SPEC_BYTES`` are read.
    """
    import os
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise SpecError([Problem("no such file", file=name)]) from None
    except IsADirectoryError:
        _refuse_folder(path, name)
    except OSError as exc:
        raise SpecError([Problem(f"cannot read: {exc.strerror}", file=name)]) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            _refuse_folder(path, name)
        if not stat.S_ISREG(info.st_mode):
            raise SpecError([Problem("is not a regular file (a FIFO, device or socket); give a spec file", file=name)])
        if info.st_size > MAX_SPEC_BYTES:
            raise SpecError([Problem(f"is {info.st_size} bytes; a spec is at most {MAX_SPEC_BYTES} bytes", file=name)])
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(MAX_SPEC_BYTES + 1)
    except OSError as exc:
        raise SpecError([Problem(f"cannot read: {exc.strerror}", file=name)]) from None
    finally:
        os.close(fd)
    if len(data) > MAX_SPEC_BYTES:
        raise SpecError([Problem(f"is more than {MAX_SPEC_BYTES} bytes; a spec is at most that", file=name)])
    return data


def _positions(text: str):
    # Only a spec with a problem needs its keys' lines and columns: the
    # scanner loads then, not on every compile.
    from tutorrl.compiler.spec.toml_positions import key_positions

    return key_positions(text)


def _refuse_folder(path: str | Path, name: str):
    """A folder where a spec file belongs; a bundle folder is told what to do with it instead."""
    import os

    from tutorrl.contract import MANIFEST

    if os.path.isfile(os.path.join(path, MANIFEST)):
        import shlex

        q = shlex.quote(name)
        raise BundleError(f"{name} is a bundle folder, not a spec file; it is already compiled: "
                          f"tutorrl verify {q}, tutorrl run {q}")
    raise SpecError([Problem("is a folder, not a spec file; give one spec file (a .toml)", file=name)])


def parse_toml(raw: bytes, name: str) -> tuple[dict, str]:
    """Spec bytes as a TOML document (and its text); bad text is a located :class:`SpecError`."""
    if len(raw) > MAX_SPEC_BYTES:
        raise SpecError([Problem(f"is more than {MAX_SPEC_BYTES} bytes; a spec is at most that", file=name)])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise SpecError([Problem(f"not UTF-8 text (byte 0x{raw[exc.start]:02x})", file=name, line=line,
                                 column=column)]) from None
    try:
        data = _toml.loads(text)
    except _toml.TOMLDecodeError as exc:
        raise SpecError([_syntax_problem(exc, name)]) from None
    except ValueError as exc:
        # Python refuses to turn an integer of over 4,300 digits into an int.
        raise SpecError([Problem(f"a value TOML cannot hold here: {exc}", file=name)]) from None
    except RecursionError:
        raise SpecError([Problem(f"nested more than {MAX_DEPTH} levels deep; a spec never is", file=name)]) from None
    if _depth(data) > MAX_DEPTH:
        raise SpecError([Problem(f"nested more than {MAX_DEPTH} levels deep; a spec never is", file=name)])
    return data, text


def parse_spec(raw: bytes, name: str) -> tuple[Spec, "Locator"]:
    """Validate spec bytes; ``name`` is what error messages call the file.

    Returns the spec and a :class:`Locator` that places later findings
    (key-map resolution) at their line and column.
    """
    data, text = parse_toml(raw, name)
    # Positions are only needed to report a problem: computed on first use.
    locate = Locator(name, lambda: _positions(text))
    return validate_data(data, locate), locate


def validate_data(data: dict, locate: "Locator") -> Spec:
    """The spec a parsed TOML document holds; :class:`SpecError` with every problem, each placed by ``locate``.

    ``locate`` may place each key in another file (a spec composed from a base
    and its variations: :mod:`tutorrl.compiler.spec.compose`).
    """
    try:
        # The common case -- a valid spec -- is decided by msgspec alone; the
        # field-by-field walk below only runs to say where every problem is.
        spec = msgspec.convert(data, Spec)
        problems = []
    except msgspec.ValidationError:
        spec = None
        problems = list(_check_struct(data, Spec, (), locate))
    leaves = list(_leaves(data))
    # The checks below each walk every value; one pass over them first decides
    # a valid spec's ~70 values, and then none of the checks runs.
    if not any(map(_suspect, (v for _, v in leaves))):
        leaves = []
    problems += [locate(p, "control characters other than tab cannot travel through the launch script")
                 for p, v in leaves if _has_control_chars(v)]
    problems += list(_check_plugin_options(data, locate))
    # Free-form values (tables verl reads whole, plug-in options) have no type
    # to bound them; what neither Hydra nor verl can take is refused wherever
    # it stands, once per key (a typed field already said so).
    said = {p.key for p in problems}
    problems += [locate(p, why) for p, v in leaves if (why := _unrepresentable(v)) and ".".join(p) not in said]
    problems += [locate(p, DATE_MESSAGE) for p, v in leaves
                 if isinstance(v, _DATES) and p[:2] != ("reward", "options") and ".".join(p) not in said]
    problems += [locate(p, *credential_message(kind)) for p, v in leaves if (kind := credential(v))]
    unset = [(p, name) for p, v in leaves for name in _placeholders(v)]
    if unset:
        # A value holding a placeholder is not the user's yet: its type or pattern is judged once it is filled
        # in ("__UNSET_ARG1___run" is no valid name only for its placeholder), so the placeholder alone is said.
        held = {".".join(p) for p, _ in unset}
        problems = [q for q in problems if q.key not in held]
    problems += [locate(p, f"'{name}' is a placeholder for the shell variable {name[8:-2]}, which the imported "
                        "script read but never set", "replace it with the value the launch should use")
                 for p, name in unset]
    if problems:
        # A spec that compiles no further is still told of its release in the
        # same round: an unsupported one would otherwise come on the next compile.
        problems += _release_problems(data, locate, {p.key for p in problems})
        raise SpecError(problems)
    return spec


def _release_problems(data: dict, locate: "Locator", said: set) -> list[Problem]:
    """What the compiler's load_lock would say of ``experiment.verl``, placed there."""
    experiment = data.get("experiment")
    release = experiment.get("verl") if isinstance(experiment, dict) else None
    if not isinstance(release, str) or "experiment.verl" in said:
        return []
    actor = data.get("actor")
    variant = "megatron" if isinstance(actor, dict) and actor.get("strategy") == "megatron" else "fsdp"
    from tutorrl.compiler.release import load_lock

    try:
        load_lock(release, variant)
    except SpecError as exc:
        return [locate(("experiment", "verl"), p.message, p.hint) for p in exc.problems]
    except (OSError, ValueError, msgspec.DecodeError):
        return []  # a release name no lock file can have; its pattern was checked above
    return []


def check_values(data: dict, locate) -> tuple[list[Problem], dict[str, msgspec.Struct]]:
    """Part of a spec -- ``{"reward": {...}, "env": {"set": {...}}}``: what a reward
    plug-in filled -- checked as :func:`parse_spec` checks what a user writes:
    each field's type and pattern, then every leaf (control characters, numbers
    verl cannot hold, dates). ``locate(path, message, hint)`` makes the problems.

    Returns the problems and, when there are none, each section converted
    (``Reward(module=...)``), so what is used is what was checked.
    """
    types = _field_types(Spec)
    problems: list[Problem] = []
    converted: dict[str, msgspec.Struct] = {}
    for section, value in data.items():
        try:
            # As in parse_spec: msgspec decides a valid part alone; the walk only locates.
            converted[section] = msgspec.convert(value, types[section])
        except msgspec.ValidationError as exc:
            found = list(_check_struct(value, struct_in(types[section]), (section,), locate))
            problems += found or [locate((section,), _friendly(str(exc)))]
    said = {p.key for p in problems}
    for path, value in _leaves(data):
        key = ".".join(path)
        if key in said:
            continue
        if _has_control_chars(value):
            problems.append(locate(path, "control characters other than tab cannot travel through the launch script"))
        elif why := _unrepresentable(value):
            problems.append(locate(path, why))
        elif isinstance(value, _DATES):
            problems.append(locate(path, DATE_MESSAGE))
        elif kind := credential(value):
            problems.append(locate(path, *credential_message(kind)))
    return problems, converted


def _check_plugin_options(data: dict, locate: "Locator"):
    """``[reward.options]`` against the plug-in's own struct, located like the core spec."""
    reward = data.get("reward")
    if not isinstance(reward, dict) or not isinstance(reward.get("plugin"), str):
        return
    from tutorrl.compiler.spec.rewards import load_plugin

    try:
        plugin = load_plugin(reward["plugin"])
    except SpecError as exc:
        for problem in exc.problems:
            yield locate(("reward", "plugin"), problem.message, problem.hint)
        return
    options = reward.get("options", {})
    try:
        msgspec.convert(options, plugin.Options)
    except msgspec.ValidationError:
        yield from _check_struct(options, plugin.Options, ("reward", "options"), locate)


def _depth(value) -> int:
    """How deep tables and arrays nest, counted without recursion (the walks after this one recurse)."""
    best, stack = 0, [(value, 0)]
    while stack:
        node, depth = stack.pop()
        best = max(best, depth)
        if depth > MAX_DEPTH:
            break
        if isinstance(node, dict):
            stack += [(v, depth + 1) for v in node.values()]
        elif isinstance(node, list):
            stack += [(v, depth + 1) for v in node]
    return best


def _syntax_problem(exc: _toml.TOMLDecodeError, name: str) -> Problem:
    message = str(exc)
    match = re.search(r"\(at line (\d+), column (\d+)\)", message)
    if match:
        message = message[: match.start()].strip()
        return Problem(f"TOML syntax error: {message}", file=name,
                       line=int(match.group(1)), column=int(match.group(2)))
    match = re.search(r"\(at end of document\)", message)
    if match:
        message = message[: match.start()].strip()
    return Problem(f"TOML syntax error: {message}", file=name)


class Locator:
    """Turns a key path and a message into a located :class:`Problem`."""

    def __init__(self, file: str, positions):
        self.file = file
        self._positions = positions  # a dict, or a function that computes it

    @property
    def positions(self) -> dict[KeyPath, tuple[int, int]]:
        if callable(self._positions):
            self._positions = self._positions()
        return self._positions

    def __call__(self, path: Iterable[str], message: str, hint: str | None = None) -> Problem:
        path = tuple(path)
        # A missing key has no position of its own: point at the nearest
        # enclosing table the user wrote, or the top of the file.
        probe = path
        while probe and probe not in self.positions:
            probe = probe[:-1]
        line, column = self.positions.get(probe, (1, 1))
        return Problem(message, file=self.file, line=line, column=column,
                       key=".".join(path) or None, hint=hint)


def _close(word: str, choices: list[str], cutoff: float) -> list[str]:
    import difflib  # only on the error path

    return difflib.get_close_matches(word, choices, n=1, cutoff=cutoff)


# `X | None` is a types.UnionType where X is a class and a typing.Union
# where X is a typing construct (Annotated, Literal): the spec has both.
_UNIONS = (Union, types.UnionType)


def _unwrap(hint: Any) -> Any:
    while typing.get_origin(hint) is typing.Annotated:
        hint = typing.get_args(hint)[0]
    return hint


def struct_in(hint: Any) -> type[msgspec.Struct] | None:
    """The Struct type a field holds (directly or as ``Struct | None``)."""
    # A class and a union (`X | None`, most of the spec's fields) answered without typing's
    # helpers: every compile asks once for each field of the spec.
    if isinstance(hint, type):
        return hint if issubclass(hint, msgspec.Struct) else None
    if isinstance(hint, types.UnionType) or getattr(hint, "__origin__", None) is Union:
        structs = [a for a in hint.__args__ if isinstance(a, type) and issubclass(a, msgspec.Struct)]
        return structs[0] if len(structs) == 1 else None
    hint = _unwrap(hint)
    if isinstance(hint, type) and issubclass(hint, msgspec.Struct):
        return hint
    if typing.get_origin(hint) in _UNIONS:
        structs = [a for a in typing.get_args(hint) if isinstance(a, type) and issubclass(a, msgspec.Struct)]
        if len(structs) == 1:
            return structs[0]
    return None


def _literal_choices(hint: Any) -> list[str]:
    """String choices of a Literal field, including inside Optional and list."""
    hint = _unwrap(hint)
    origin = typing.get_origin(hint)
    if origin is Literal:
        return [a for a in typing.get_args(hint) if isinstance(a, str)]
    if origin in _UNIONS or origin is list:
        return [c for a in typing.get_args(hint) for c in _literal_choices(a)]
    return []


@functools.cache
def _field_types(cls: type[msgspec.Struct]) -> dict[str, Any]:
    """Each field's type by its TOML name (msgspec.structs.fields evaluates every annotation anew)."""
    return {f.encode_name: f.type for f in msgspec.structs.fields(cls)}


@functools.cache
def _struct_info(cls: type[msgspec.Struct]) -> tuple[dict, dict]:
    hints = typing.get_type_hints(cls, include_extras=True)
    return hints, {f.encode_name: f for f in msgspec.structs.fields(cls)}


def _check_struct(data: Any, cls: type[msgspec.Struct], path: KeyPath, locate: Locator):
    if not isinstance(data, dict):
        yield locate(path, f"expected a table, got {_describe(data)}")
        return
    hints, fields = _struct_info(cls)
    for key in data:
        if key not in fields:
            near = _close(key, list(fields), cutoff=0.6)
            where = f"[{'.'.join(path)}]" if path else "the top level"
            yield locate(path + (key,), f"unknown key in {where}",
                         f"did you mean '{near[0]}'?" if near else f"known keys: {', '.join(fields)}")
    for name, info in fields.items():
        if name not in data:
            if info.required:
                kind = "table" if struct_in(hints[info.name]) else "key"
                yield locate(path + (name,), f"missing required {kind}")
            continue
        value = data[name]
        hint = hints[info.name]
        sub = struct_in(hint)
        if sub is not None and isinstance(value, dict):
            yield from _check_struct(value, sub, path + (name,), locate)
        else:
            yield from _check_value(value, hint, path + (name,), locate)


# Patterns only a failing value reaches are compiled there, by re's cache:
# a module-level compile is paid by every cold compile, valid or not.
_AT = r" - at `\$(.*)`$"
_STEP = r"\[(\d+)\]|\[\"((?:[^\"\\]|\\.)*)\"\]|\.(\w+)"


def _check_value(value: Any, hint: Any, path: KeyPath, locate: Locator):
    inner = _unwrap(hint)
    if typing.get_origin(inner) in _UNIONS and isinstance(value, (list, dict)):
        # A value that is a list (or table) can only be the union's list (or
        # dict) member: check it against that, so the element is located.
        kind = list if isinstance(value, list) else dict
        members = [a for a in typing.get_args(inner) if typing.get_origin(_unwrap(a)) is kind]
        if len(members) == 1:
            hint, inner = members[0], _unwrap(members[0])
    if typing.get_origin(inner) is dict and isinstance(value, dict):
        # msgspec does not say which entry of a dict failed: check each one.
        key_type, value_type = typing.get_args(inner)
        for key, item in value.items():
            yield from _check_value(key, key_type, path + (key,), locate)
            yield from _check_value(item, value_type, path + (key,), locate)
        return
    try:
        msgspec.convert(value, hint)
    except msgspec.ValidationError as exc:
        message = str(exc)
        where = path
        match = re.search(_AT, message)
        if match:
            message = message[: match.start()]
            for index, key, attr in re.findall(_STEP, match.group(1)):
                where = where + (index or key or attr,)
        message = _friendly(message)
        leaf = _leaf(value, where[len(path):])
        hint_text = None
        choices = _literal_choices(hint)
        if choices and isinstance(leaf, str):
            near = _close(leaf, choices, cutoff=0.5)
            message = f"'{leaf}' is not one of: {', '.join(choices)}"
            hint_text = f"did you mean '{near[0]}'?" if near else None
        elif "got" not in message:
            message += f", got {_describe(leaf)}"
        yield locate(where, message, hint_text)


def _leaf(value: Any, steps: KeyPath) -> Any:
    for step in steps:
        try:
            value = value[int(step)] if isinstance(value, list) else value[step]
        except (KeyError, IndexError, ValueError, TypeError):
            return value
    return value


def _friendly(message: str) -> str:
    """msgspec's wording, in TOML's terms."""
    match = re.match(r"Expected `(\w+)`, got `(\w+)`$", message)
    if match:
        return f"expected {_TYPE_WORDS.get(match.group(1), match.group(1))}, got {_TYPE_WORDS.get(match.group(2), match.group(2))}"
    match = re.match(r"Expected `str` matching regex '(.*)'$", message)
    if match:
        pattern = match.group(1).replace("\\\\", "\\")  # msgspec prints the pattern escaped
        return f"expected {_PATTERN_WORDS.get(pattern, 'a string matching ' + pattern)}"
    match = re.match(r"Expected `(\w+)` (.*)$", message)
    if match:
        return f"expected {_TYPE_WORDS.get(match.group(1), match.group(1))} {match.group(2)}"
    match = re.match(r"Expected `(.*)`, got `(\w+)`$", message)
    if match:
        kinds = " or ".join(_TYPE_WORDS.get(k.strip(), k.strip()) for k in match.group(1).split("|"))
        return f"expected {kinds}, got {_TYPE_WORDS.get(match.group(2), match.group(2))}"
    return message[:1].lower() + message[1:]


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        # str() of an integer past 4,300 digits raises; a long one is no help to read anyway.
        return f"the integer {value}" if abs(value) < 10**30 else f"an integer of {value.bit_length()} bits"
    if isinstance(value, float):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {value!r}" if len(value) < 40 else "a string"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return f"a TOML {type(value).__name__}"


def _leaves(value: Any, path: KeyPath = ()):
    """(path, value) of every scalar under ``value``; an array's items are keyed by their index."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, path + (str(i),))
    else:
        yield path, value


# `tutorrl import`'s stand-in for a variable the script never set (importer/capture.py). The name ends at the
# first "__" after a letter or digit: "__UNSET_ARG4___run" is ARG4's, followed by "_run".
PLACEHOLDER = r"__UNSET_([A-Za-z0-9]+(?:_[A-Za-z0-9]+)*)__"


def _placeholders(value: Any) -> list[str]:
    """Every ``__UNSET_NAME__`` that `tutorrl import` left for the user in a string."""
    return [m.group(0) for m in re.finditer(PLACEHOLDER, value)] if isinstance(value, str) and "__UNSET_" in value \
        else []


# Values that are credentials whatever their name: the well-known token formats. Each
# written literally would land in bundle.env, ray-job.json and spec.toml. A
# substring test decides a valid spec; the patterns are compiled only for a hit.
_CREDENTIAL_MARKERS = ("sk-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "hf_", "AKIA", "ASIA",
                       "xox", "glpat-", "PRIVATE KEY")
_CREDENTIALS = (
    ("an OpenAI API key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
    ("a GitHub token", r"\bgh[pousr]_[A-Za-z0-9]{36,}|\bgithub_pat_[A-Za-z0-9_]{22,}"),
    ("a Hugging Face token", r"\bhf_[A-Za-z0-9]{30,}"),
    ("an AWS access key id", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    ("a Slack token", r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    ("a GitLab token", r"\bglpat-[A-Za-z0-9_-]{20,}"),
    ("a private key", r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----"),
)


def credential(value: Any) -> str | None:
    """The kind of credential ``value`` holds (by its format, not its name), or None."""
    if not isinstance(value, str) or not any(m in value for m in _CREDENTIAL_MARKERS):
        return None
    for kind, pattern in _CREDENTIALS:
        if re.search(pattern, value):
            return kind
    return None


def credential_message(kind: str) -> tuple[str, str]:
    return (f"looks like {kind} written as a literal value; it would be written into the bundle "
            "(bundle.env, ray-job.json, spec.toml)",
            "never write a secret in a spec: pass it by name (env.passthrough) and set it where the run starts")


_I64 = range(-(2**63), 2**63)
# TOML's dates and times (the reader's date, time and datetime, offset or not).
# Refused, not turned into text: Hydra's grammar and verl have no such type, so
# verl could only get a string, and which spelling (T or space, offset,
# fractional seconds) would be tutorrl's guess -- the reader keeps no trace of the
# user's. A quoted string reaches verl exactly as written. A plug-in's own
# options may take a date (its struct decides); what it fills is checked here.
_DATES = (datetime.date, datetime.time)
DATE_MESSAGE = "TOML dates and times cannot be passed to verl; write a string"


def _unrepresentable(value: Any) -> str | None:
    """Why Hydra cannot write the number back or verl cannot hold it (inf, nan, beyond 64 bits); else None."""
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return f"{value} cannot travel through Hydra's override grammar to verl; give a finite number"
    elif isinstance(value, int) and not isinstance(value, bool):
        if value not in _I64:
            return (f"an integer of {value.bit_length()} bits; verl's integers reach torch and C++ as "
                    "64-bit integers (at most 9223372036854775807)")
    return None


def _suspect(value: Any) -> bool:
    """Whether a check of validate_data's over every value refuses ``value``: each
    check's own answer, for the two kinds nearly every value is (a string and
    a number each cost their checks' substring and range tests)."""
    kind = type(value)
    if kind is str:
        return _has_control_chars(value) or bool(_placeholders(value)) or credential(value) is not None
    if kind is bool or kind is int or kind is float:
        return _unrepresentable(value) is not None
    return True  # dates, and anything else: the checks themselves decide


def _has_control_chars(value: Any) -> bool:
    """A string holding newlines or other control characters (tab aside)."""
    # isprintable() answers the common string in C; only one it refuses (a control
    # character, or merely a non-printing one) is walked character by character.
    return isinstance(value, str) and not value.isprintable() and any(
        ord(c) < 32 and c != "\t" or ord(c) == 127 for c in value)
