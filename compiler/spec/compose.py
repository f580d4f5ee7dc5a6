"""A spec written in layers: a base, the specs that extend it, a sweep's point, ``--set`` values.

Pure: parsed documents in, one merged document out, with a record of which
layer wrote each key so that a problem is placed in the file that wrote the
value ("set in base.toml:12, overridden in lr.toml:4"). Reading the files of
a chain is :mod:`tutorrl.compiler.pipeline.family`'s job.

Merging is key by key: a table written in two layers merges, anything else
(a value, an array, a table replacing a value) replaces what the layer below
wrote. An array replaces whole because a list of files or names is one
setting; merging element by element would build lists no one wrote.
"""

from __future__ import annotations

from typing import Any

from tutorrl.compiler.spec.load import KeyPath, Locator, _close, _struct_info, _unwrap, struct_in
from tutorrl.errors import Problem

def might_compose(raw: bytes) -> bool:
    """Whether spec bytes may extend a base or hold a sweep: a substring test that keeps
    a plain spec's compile off the composition path (TOML decides for those that pass)."""
    return b"extends" in raw or b"sweep" in raw


# Keys that shape the composition itself; none of them reaches the spec.
EXTENDS = ("experiment", "extends")
SWEEP = "sweep"


class Layer:
    """One written source: a spec file, a sweep point, or the command line's ``--set``.

    ``where(path)`` is the (line, column) where this layer writes ``path``
    (or the nearest table above it), or None where it keeps no positions.
    """

    def __init__(self, name: str, data: dict, text: str | None = None):
        self.name = name
        self.data = data
        self._text = text
        self._positions: dict | None = None

    def positions(self) -> dict[KeyPath, tuple[int, int]]:
        if self._positions is None:
            from tutorrl.compiler.spec.toml_positions import key_positions

            self._positions = key_positions(self._text) if self._text is not None else {}
        return self._positions

    def where(self, path: KeyPath) -> tuple[int, int] | None:
        positions = self.positions()
        probe = path
        while probe and probe not in positions:
            probe = probe[:-1]
        return positions.get(probe)


class WrittenAt(Layer):
    """Values placed at ``path`` but written elsewhere in another layer's file
    (a sweep's value for ``actor.lr`` is written at ``sweep.grid."actor.lr"[1]``)."""

    def __init__(self, name: str, data: dict, file: Layer, at: dict[KeyPath, KeyPath]):
        super().__init__(name, data)
        self._file, self._at = file, at

    def where(self, path: KeyPath) -> tuple[int, int] | None:
        probe = path
        while probe and probe not in self._at:
            probe = probe[:-1]
        return self._file.where(self._at[probe]) if probe else None


class Composed:
    """The merged document and, for each key path, the layers that wrote it (bottom first)."""

    def __init__(self, layers: list[Layer]):
        self.layers: list[Layer] = []
        self.data: dict = {}
        self.writers: dict[KeyPath, list[int]] = {}
        for layer in layers:
            self.add(layer)

    def add(self, layer: Layer) -> None:
        self.layers.append(layer)
        _merge(self.data, layer.data, (), len(self.layers) - 1, self.writers)

    def copy(self) -> Composed:
        out = Composed.__new__(Composed)
        out.layers = list(self.layers)
        out.data = copy_value(self.data)
        out.writers = {k: list(v) for k, v in self.writers.items()}
        return out

    def locator(self) -> ComposedLocator:
        return ComposedLocator(self)


def _merge(into: dict, data: dict, path: KeyPath, index: int, writers: dict[KeyPath, list[int]]) -> None:
    for key, value in data.items():
        here = path + (key,)
        below = into.get(key)
        writers.setdefault(here, []).append(index)
        if isinstance(value, dict) and isinstance(below, dict):
            _merge(below, value, here, index, writers)
            continue
        if isinstance(below, dict):
            # What the layer below wrote under this key is gone, and so is its claim to it.
            for stale in [k for k in writers if len(k) > len(here) and k[:len(here)] == here]:
                del writers[stale]
        into[key] = copy_value(value)
        if isinstance(value, dict):
            _claim(value, here, index, writers)


def _claim(table: dict, path: KeyPath, index: int, writers: dict[KeyPath, list[int]]) -> None:
    for key, value in table.items():
        writers.setdefault(path + (key,), []).append(index)
        if isinstance(value, dict):
            _claim(value, path + (key,), index, writers)


def copy_value(value: Any) -> Any:
    """A copy of a TOML value deep enough that merging into it never touches a layer."""
    if isinstance(value, dict):
        return {k: copy_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_value(v) for v in value]
    return value


class ComposedLocator(Locator):
    """Places a key in the layer that wrote its value, and says what it overrode."""

    def __init__(self, composed: Composed):
        top = composed.layers[-1]
        files = [layer for layer in composed.layers if not isinstance(layer, WrittenAt) and layer.name != SET_NAME]
        super().__init__((files[-1] if files else top).name, {})
        self.composed = composed

    def __call__(self, path, message: str, hint: str | None = None) -> Problem:
        path = tuple(path)
        writers = self.composed.writers
        probe = path
        while probe and probe not in writers:
            probe = probe[:-1]
        if not probe:
            return Problem(message, file=self.file, line=1, column=1, key=".".join(path) or None, hint=hint)
        layers = self.composed.layers
        chain = writers[probe]
        last = layers[chain[-1]]
        if probe == path and len(chain) > 1:
            earlier = [_at(layers[i], path) for i in dict.fromkeys(chain[:-1])]
            message += f" (set in {', then '.join(earlier)}, overridden in {_at(last, path)})"
        where = last.where(path)
        line, column = where if where is not None else (None, None)
        return Problem(message, file=last.name, line=line, column=column, key=".".join(path) or None, hint=hint)


def _at(layer: Layer, path: KeyPath) -> str:
    where = layer.where(path)
    return f"{layer.name}:{where[0]}" if where is not None else layer.name


# -- setting paths: "actor.lr" --------------------------------------------------------------------------------

SET_NAME = "--set"


def split_path(dotted: str) -> KeyPath:
    return tuple(dotted.split("."))


def path_problem(path: KeyPath) -> tuple[str, str | None] | None:
    """Why ``path`` names no spec setting (message, hint), or None where it does.

    A path may end at a table (its value then replaces the table) and may go
    on into a free table (``env.set.NAME``, ``reward.custom.kwargs.k``).
    """
    from tutorrl.compiler.spec.structs import Spec

    if not all(path):
        return "an empty part in a dotted setting path", None
    if path == EXTENDS or path[0] == SWEEP:
        return "names what the spec is composed of, not a setting", None
    cls: Any = Spec
    for n, part in enumerate(path):
        if cls is None:
            return (f"{'.'.join(path[:n])} is a setting, not a table", None)
        hints, fields = _struct_info(cls)
        if part not in fields:
            near = _close(part, list(fields), cutoff=0.6)
            where = f"[{'.'.join(path[:n])}]" if n else "the top level"
            return (f"no setting '{part}' in {where}",
                    f"did you mean '{'.'.join(path[:n] + (near[0],))}'?" if near else f"known keys: {', '.join(fields)}")
        hint = hints[fields[part].name]
        sub = struct_in(hint)
        if sub is not None:
            cls = sub
            continue
        import typing

        if typing.get_origin(_unwrap(hint)) is dict or _is_free(hint):
            return None  # a table whose keys are the user's
        cls = None
    return None


def _is_free(hint: Any) -> bool:
    import typing

    inner = _unwrap(hint)
    return any(typing.get_origin(_unwrap(a)) is dict for a in typing.get_args(inner))


def field_type(path: KeyPath) -> Any:
    """The declared type of the setting at ``path`` (Annotated kept), or None inside a free table."""
    from tutorrl.compiler.spec.structs import Spec

    import typing

    cls: Any = Spec
    hint = None
    for part in path:
        if cls is None:
            # Inside a table of the user's keys: its values' declared type, where it has one.
            inner = _unwrap(hint)
            members = [inner] + [_unwrap(a) for a in typing.get_args(inner)]
            tables = [m for m in members if typing.get_origin(m) is dict]
            if not tables:
                return None
            hint = typing.get_args(tables[0])[1]
            if hint is Any:
                return None
            continue
        hints, fields = _struct_info(cls)
        if part not in fields:
            return None
        hint = hints[fields[part].name]
        cls = struct_in(hint)
    return hint if cls is None else None


def typed_value(text: str, hint: Any) -> Any:
    """A command-line value typed as its field says: TOML where that gives the field's
    type (``3e-6`` a number, ``true`` a boolean, ``[1, 2]`` an array), else the text as a string.

    Where neither fits, the TOML reading (or the text) is returned and the
    spec's own validation says what the field expected.
    """
    from tutorrl import _toml

    import msgspec

    try:
        parsed, readable = _toml.loads("v = " + text)["v"], True
    except (_toml.TOMLDecodeError, ValueError, RecursionError):
        parsed, readable = None, False
    if hint is None:
        return parsed if readable else text
    for candidate in ([parsed] if readable else []) + [text]:
        try:
            msgspec.convert(candidate, hint)
        except msgspec.ValidationError:
            continue
        return candidate
    return parsed if readable else text


def put(data: dict, path: KeyPath, value: Any) -> None:
    """Set ``path`` in a document, making the tables on the way."""
    for part in path[:-1]:
        below = data.get(part)
        if not isinstance(below, dict):
            below = data[part] = {}
        data = below
    data[path[-1]] = value


def nested(path: KeyPath, value: Any) -> dict:
    """A one-key document: ``("actor", "lr"), 1e-6`` -> ``{"actor": {"lr": 1e-6}}``."""
    doc: dict = {}
    put(doc, path, value)
    return doc
