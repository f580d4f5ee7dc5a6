"""A spec as the family of launches it names: its bases, its sweep's points, ``--set`` values.

``read_chain`` is the I/O edge: the spec and every base it extends, read as
bytes. :func:`compile_chain` is pure: those bytes (and the ``--set`` words)
in, one :class:`CompiledPoint` per launch out. A spec of one file with no
``--set`` takes :func:`~tutorrl.compiler.pipeline.compile.compile_bytes` unchanged,
so its bundle and its compile time are what they always were.

A point's bundle is the bundle of the spec that point is on its own: the
merged document with the point's values in place and its experiment named
after the point, compiled by the same path as any spec. Only its manifest's
provenance (source files, the point) says where it came from.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from tutorrl.compiler.bundle import CompiledBundle
from tutorrl.compiler.bundle.manifest import sha256, with_provenance
from tutorrl.compiler.spec.compose import (
    EXTENDS,
    SET_NAME,
    SWEEP,
    Composed,
    Layer,
    WrittenAt,
    field_type,
    might_compose,
    path_problem,
    put,
    split_path,
    typed_value,
)
from tutorrl.compiler.spec import read_spec_bytes
from tutorrl.compiler.spec.sweep import Point
from tutorrl.compiler.spec.load import parse_toml
from tutorrl.errors import Problem, SpecError

# A chain of bases deeper than this is a mistake (or a loop through links).
MAX_CHAIN = 16


class Source(msgspec.Struct, frozen=True):
    """One file of a chain: what errors call it, its path relative to the spec's folder, its bytes."""

    name: str
    rel: str
    raw: bytes


class CompiledPoint(msgspec.Struct, frozen=True):
    bundle: CompiledBundle
    point: Point | None = None


def read_chain(path: str, name: str, raw: bytes | None = None,
               read: Callable[[str, str], bytes] = read_spec_bytes) -> list[Source]:
    """The spec at ``path`` and the bases it extends, the spec first; a cycle, a missing base,
    or a chain deeper than :data:`MAX_CHAIN` is a :class:`SpecError` placed at its ``extends``."""
    if raw is None:
        raw = read(path, name)
    chain = [Source(name=name, rel=os.path.basename(path), raw=raw)]
    seen = [os.path.realpath(path)]
    current_path, current = path, chain[0]
    while True:
        data, text = parse_toml(current.raw, current.name)
        extends = _extends(data)
        if extends is None:
            return chain
        layer = Layer(current.name, data, text)
        if not isinstance(extends, str) or not extends.strip():
            raise SpecError([_at(layer, "expected the path of the base spec, relative to this spec (a string)")])
        bad = next((c for c in extends if ord(c) < 32 or ord(c) == 127), None)
        if bad is not None:
            # Before any path use: the OS refuses a NUL in a path with a ValueError, and the rest name no file.
            raise SpecError([_at(layer, f"a control character ({bad!r}) in the path of the base spec",
                                 "name the base by its file name")])
        if os.path.isabs(extends):
            raise SpecError([_at(layer, "an absolute path; name the base relative to this spec, so the family "
                                        "compiles the same wherever it is checked out")])
        base_path = os.path.join(os.path.dirname(current_path), extends)
        base_name = os.path.normpath(os.path.join(os.path.dirname(current.name), extends))
        real = os.path.realpath(base_path)
        if real in seen:
            names = [s.name for s in chain] + [chain[seen.index(real)].name]
            raise SpecError([_at(layer, f"extends {extends}, which makes a cycle: {' -> '.join(names)}",
                                 "a base cannot extend a spec built on it")])
        if len(chain) >= MAX_CHAIN:
            raise SpecError([_at(layer, f"a chain of more than {MAX_CHAIN} bases")])
        try:
            base_raw = read(base_path, base_name)
        except SpecError as exc:
            raise SpecError([_at(layer, f"its base {base_name}: {p.message}", p.hint) for p in exc.problems]) from None
        rel = os.path.normpath(os.path.join(os.path.dirname(current.rel), extends)).replace(os.sep, "/")
        current = Source(name=base_name, rel=rel, raw=base_raw)
        current_path = base_path
        chain.append(current)
        seen.append(real)


def _extends(data: dict) -> Any:
    experiment = data.get("experiment")
    return experiment.get("extends") if isinstance(experiment, dict) else None


def _at(layer: Layer, message: str, hint: str | None = None) -> Problem:
    where = layer.where(EXTENDS)
    line, column = where if where is not None else (None, None)
    return Problem(message, file=layer.name, line=line, column=column, key="experiment.extends", hint=hint)


def parse_sets(words: Sequence[str]) -> list[tuple[str, tuple[str, ...], str]]:
    """``--set PATH=VALUE`` words as (word, path, value text); a malformed word is a problem named ``--set``."""
    out, problems = [], []
    for word in words:
        dotted, eq, text = word.partition("=")
        path = split_path(dotted.strip())
        if not eq or not dotted.strip():
            problems.append(Problem(f"{word!r}: expected PATH=VALUE, such as actor.lr=3e-6", file=SET_NAME))
            continue
        why = path_problem(path)
        if why is not None:
            problems.append(Problem(why[0], file=SET_NAME, key=".".join(path), hint=why[1]))
            continue
        after = _after_value(text)
        if after is not None:
            line, column = after
            problems.append(Problem(f"{word!r}: the value is more than one TOML value; text follows the first at "
                                    f"line {line}, column {column} of the value", file=SET_NAME,
                                    key=".".join(path), hint="give each setting its own --set, or quote the whole "
                                    "value as one TOML string"))
            continue
        out.append((word, path, text))
    if problems:
        raise SpecError(problems)
    return out


def _after_value(text: str) -> tuple[int, int] | None:
    """(line, column) in ``text`` where a second TOML value or table begins, None where ``text`` is
    one value (or no TOML at all: then it is a string). typed_value reads ``v = TEXT`` and keeps ``v``,
    so anything after it would be dropped without a word."""
    if "\n" not in text and "\r" not in text:
        return None  # a TOML value ends at its line's end: one line holds one value at most
    from tutorrl import _toml

    try:
        doc = _toml.loads("v = " + text)
    except (_toml.TOMLDecodeError, ValueError, RecursionError):
        return None
    if list(doc) == ["v"]:
        return None
    for index, char in enumerate(text):
        if char != "\n":
            continue
        try:
            if list(_toml.loads("v = " + text[:index])) != ["v"]:
                continue
        except (_toml.TOMLDecodeError, ValueError, RecursionError):
            continue
        rest = text[index:]
        start = index + len(rest) - len(rest.lstrip())
        line = text.count("\n", 0, start) + 1
        return line, start - (text.rfind("\n", 0, start) + 1) + 1
    return 1, 1


def compose(chain: list[Source], sets: Sequence[str] = ()) -> Composed:
    """The chain's documents merged, the most basic first, then the ``--set`` values."""
    layers = []
    for source in reversed(chain):
        data, text = parse_toml(source.raw, source.name)
        experiment = data.get("experiment")
        if isinstance(experiment, dict) and "extends" in experiment:
            data = {**data, "experiment": {k: v for k, v in experiment.items() if k != "extends"}}
        layers.append(Layer(source.name, data, text))
    composed = Composed(layers)
    parsed = parse_sets(sets)
    if parsed:
        doc: dict = {}
        for _, path, text in parsed:
            put(doc, path, typed_value(text, field_type(path)))
        composed.add(Layer(SET_NAME, doc))
    return composed


def compile_chain(chain: list[Source], sets: Sequence[str] = ()) -> list[CompiledPoint]:
    """Every launch a chain names: one, or one per point of its sweep, in the sweep's order.

    Every problem of every point is reported in one round; a problem each
    point has (a mistake in the base) is said once, the others name their point.
    """
    from tutorrl.compiler.spec.sweep import expand

    composed = compose(chain, sets)
    set_paths = {".".join(path) for _, path, _ in parse_sets(sets)}
    sources = {s.rel: sha256(s.raw) for s in chain} if len(chain) > 1 or sets or SWEEP in composed.data else {}
    table = composed.data.pop(SWEEP, None)
    if table is None:
        return [CompiledPoint(_compile_one(composed, sources, {}, list(sets)))]
    locate = composed.locator()
    try:
        points = expand(table, locate)
    except SpecError as exc:
        # The rest of the spec is told of in the same round, where no point's value could change it.
        raise SpecError(exc.problems + _unswept_problems(composed, table)) from None
    clash = [Problem(f"{key} is swept; --set cannot also set it", file=SET_NAME, key=key)
             for key in dict.fromkeys(k for k, _ in points[0].values) if key in set_paths]
    experiment = composed.data.get("experiment")
    name = experiment.get("name") if isinstance(experiment, dict) else None
    if not isinstance(name, str):
        clash.append(locate(("experiment", "name") if name is not None else ("experiment",),
                            "a sweep names each point's experiment after experiment.name and the point; "
                            "set experiment.name"))
    if clash:
        raise SpecError(clash)
    sweep_layer = composed.layers[composed.writers[(SWEEP,)][-1]]
    compiled: list[CompiledPoint] = []
    failures: list[tuple[Point, list[Problem]]] = []
    for point in points:
        one = composed.copy()
        doc: dict = {}
        at = {}
        for (key, value), (_, written) in zip(point.values, point.written):
            path = split_path(key)
            put(doc, path, value)
            at[path] = written
        put(doc, ("experiment", "name"), f"{name}-{point.suffix}")
        at[("experiment", "name")] = (SWEEP,)
        one.add(WrittenAt(sweep_layer.name, doc, sweep_layer, at))
        try:
            bundle = _compile_one(one, sources, point.as_dict(), list(sets))
        except SpecError as exc:
            failures.append((point, exc.problems))
            continue
        compiled.append(CompiledPoint(bundle, point))
    if failures:
        raise SpecError(_by_point(failures, len(points)),
                        summary=f"{len(failures)} of {len(points)} points of the sweep have problems; "
                                "no bundle was written.")
    return compiled


def _unswept_problems(composed: Composed, table: Any) -> list[Problem]:
    """The problems of the spec without its sweep, but for the settings the sweep names."""
    from tutorrl.compiler.spec.load import validate_data

    swept = {key for part in ("grid", "zip") if isinstance(table, dict) and isinstance(table.get(part), dict)
             for key in table[part]}
    try:
        validate_data(composed.data, composed.locator())
    except SpecError as exc:
        return [p for p in exc.problems
                if not any(p.key == k or (p.key or "").startswith(k + ".") for k in swept)]
    return []


def _compile_one(composed: Composed, sources: dict, point: dict, sets: list[str]) -> CompiledBundle:
    from tutorrl.compiler.pipeline.assemble import assemble
    from tutorrl.compiler.pipeline.compile import resolve_parsed
    from tutorrl.compiler.spec.load import validate_data

    locate = composed.locator()
    spec = validate_data(composed.data, locate)
    spec, lock, resolved, warnings = resolve_parsed(spec, locate)
    compiled = assemble(spec, resolved, lock, warnings=warnings)
    if sources or point or sets:
        compiled = with_provenance(compiled, sources=sources, point=point, set=sets)
    return compiled


def _by_point(failures: list[tuple[Point, list[Problem]]], total: int) -> list[Problem]:
    """Each point's problems; one that every point of the sweep has is said once, without a point."""
    counts: dict[Problem, int] = {}
    for _, problems in failures:
        for p in set(problems):
            counts[p] = counts.get(p, 0) + 1
    shared = {p for p, n in counts.items() if n == total}
    out = list(shared)
    for point, problems in failures:
        out += [msgspec.structs.replace(p, message=f"in point {point.label}: {p.message}")
                for p in problems if p not in shared]
    return out


def compile_family(path: str, *, sets: Sequence[str] = (), display_name: str | None = None,
                   read: Callable[[str, str], bytes] = read_spec_bytes) -> list[CompiledPoint]:
    """The launches of the spec file at ``path`` (one, or one per point of its sweep)."""
    name = display_name or str(path)
    return compile_raw(str(path), name, read(path, name), sets=sets, read=read)


def compile_raw(path: str, name: str, raw: bytes, *, sets: Sequence[str] = (),
                read: Callable[[str, str], bytes] = read_spec_bytes) -> list[CompiledPoint]:
    """:func:`compile_family` of a spec whose bytes are read already (``read`` reads its bases)."""
    from tutorrl.compiler.pipeline.compile import compile_bytes

    if not sets and not might_compose(raw):
        return [CompiledPoint(compile_bytes(raw, name))]
    return compile_chain(read_chain(path, name, raw, read), sets)


def bases_of(path: str, raw: bytes, read: Callable[[str, str], bytes] = read_spec_bytes) -> list[str]:
    """What errors call each base the spec at ``path`` extends (directly or through others);
    [] where it extends none or its chain does not read (compiling it says why)."""
    if not might_compose(raw):
        return []
    try:
        return [s.name for s in read_chain(path, path, raw, read)[1:]]
    except SpecError:
        return []


def compile_spec(path, *, display_name: str | None = None,
                 read: Callable[[str, str], bytes] = read_spec_bytes) -> CompiledBundle:
    """The one launch of the spec file at ``path``, its bases read beside it; a sweep
    (many launches) is refused, naming :func:`compile_family`."""
    name = display_name or str(path)
    launches = compile_family(str(path), display_name=name, read=read)
    if len(launches) > 1:
        raise SpecError([Problem(f"is a sweep of {len(launches)} points, not one launch; compile_family() (or "
                                 "`tutorrl compile`) gives one bundle per point", file=name)])
    return launches[0].bundle
