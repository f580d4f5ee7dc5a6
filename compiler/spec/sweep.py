"""A spec's ``[sweep]``: the points it names, each a set of values for dotted settings.

Pure: the ``[sweep]`` table in, points out. ``grid`` takes every combination
of its settings' values (the last setting varying fastest, as written);
``zip`` takes its settings' values together, the n-th of each, as one more
axis before the grid's. Each point has a label (``actor.lr=3e-06,
rollout.n=8``) for messages and tables, and a suffix for its experiment name
(``lr_3e-06-n_8``) that depends on the values alone: the same point is named
the same in any sweep that holds it, which keeps its bundle's hash.
"""

from __future__ import annotations

import math
import re
from typing import Any

import msgspec

from tutorrl.compiler.spec.compose import KeyPath, SWEEP, path_problem, split_path
from tutorrl.errors import Problem

# A sweep larger than this is a search, not a family of launches a person
# reviews; each point is a bundle folder in the repository.
MAX_POINTS = 1000


class Sweep(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``[sweep]``: settings by their dotted spec path, and the values each takes."""

    grid: dict[str, list[Any]] = {}
    """Every combination: ``grid = { "actor.lr" = [1e-6, 3e-6], "rollout.n" = [4, 8] }`` is four points."""
    zip: dict[str, list[Any]] = {}
    """Values taken together, the n-th of each (the arrays have equal lengths)."""


class Point(msgspec.Struct, frozen=True):
    """One launch of a sweep: each swept setting's value, in the sweep's order."""

    values: tuple[tuple[str, Any], ...]
    # Where each value is written in the spec: (setting, path of the value in the document).
    written: tuple[tuple[str, KeyPath], ...]
    suffix: str

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={shown(v)}" for k, v in self.values)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.values)


def order_key(point: dict, experiment: str = "") -> tuple:
    """Where a launch stands among its sweep's points, from its manifest's point alone (a
    folder of bundles is listed by id, which says nothing): by each value, numbers as numbers."""
    return tuple((k, (0, v, "") if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, 0, str(v)))
                 for k, v in point.items()) + ((experiment,),)


def shown(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value) if not re.fullmatch(r"[A-Za-z0-9._/:+-]+", value) else value
    if isinstance(value, (dict, list)):
        import json

        return json.dumps(value, default=str)  # one line: a label or a table cell
    return repr(value)


def expand(table: Any, locate) -> list[Point]:
    """The points of a ``[sweep]`` table; :class:`SpecError` with every problem, placed by ``locate``."""
    from tutorrl.errors import SpecError

    problems = check(table, locate)
    if problems:
        raise SpecError(problems)
    sweep = msgspec.convert(table, Sweep)
    axes: list[list[tuple[tuple[str, Any, KeyPath], ...]]] = []
    if sweep.zip:
        n = len(next(iter(sweep.zip.values())))
        axes.append([tuple((k, v[i], (SWEEP, "zip", k, str(i))) for k, v in sweep.zip.items()) for i in range(n)])
    for key, values in sweep.grid.items():
        axes.append([((key, v, (SWEEP, "grid", key, str(i))),) for i, v in enumerate(values)])
    combos: list[tuple] = [()]
    for axis in axes:
        combos = [c + choice for c in combos for choice in axis]
    names = _short_names([k for k, _, _ in (combos[0] if combos else ())])
    suffixes = _suffixes(combos, names)
    return [Point(values=tuple((k, v) for k, v, _ in combo), written=tuple((k, at) for k, _, at in combo),
                  suffix=suffix) for combo, suffix in zip(combos, suffixes)]


def check(table: Any, locate) -> list[Problem]:
    """Every problem of a ``[sweep]`` table, each placed where it is written."""
    if not isinstance(table, dict):
        return [locate((SWEEP,), "expected a table: [sweep] with grid = { ... } and/or zip = { ... }")]
    problems = []
    for key in table:
        if key not in ("grid", "zip"):
            problems.append(locate((SWEEP, key), "unknown key in [sweep]", "a sweep has grid and zip"))
    seen: dict[str, str] = {}
    lengths = {}
    for kind in ("grid", "zip"):
        part = table.get(kind, {})
        if not isinstance(part, dict):
            problems.append(locate((SWEEP, kind), f"expected a table of settings and their values, "
                                                  f"such as {kind} = {{ \"actor.lr\" = [1e-6, 3e-6] }}"))
            continue
        for key, values in part.items():
            at = (SWEEP, kind, key)
            if key in seen:
                problems.append(locate(at, f"{key} is swept in both [sweep] {seen[key]} and {kind}",
                                       "sweep each setting once"))
                continue
            seen[key] = kind
            why = path_problem(split_path(key))
            if key == "experiment.name":
                why = ("each point's experiment is named after experiment.name and the point itself",
                       "sweep the settings that differ; the names follow")
            if why is not None:
                problems.append(locate(at, *why))
            if not isinstance(values, list) or not values:
                problems.append(locate(at, "expected a non-empty array of the values the setting takes"))
                continue
            if kind == "zip":
                # Zipped values go together: only a repeated combination is one launch twice.
                lengths[key] = len(values)
                continue
            dupes = [v for i, v in enumerate(values) if v in values[:i] and not isinstance(v, (dict, list))]
            if dupes:
                problems.append(locate(at, f"the value {shown(dupes[0])} is given twice",
                                       "each point of a sweep is a different launch"))
    if len(set(lengths.values())) > 1:
        said = ", ".join(f"{k} has {n}" for k, n in lengths.items())
        for key in lengths:
            problems.append(locate((SWEEP, "zip", key), f"zip's arrays take their values together and must "
                                                        f"have equal lengths: {said}"))
    elif lengths:
        import json

        rows = [json.dumps([table["zip"][k][i] for k in lengths], sort_keys=True, default=str)
                for i in range(next(iter(lengths.values())))]
        twice = next((i for i, row in enumerate(rows) if row in rows[:i]), None)
        if twice is not None:
            problems.append(locate((SWEEP, "zip", next(iter(lengths)), str(twice)),
                                   f"zip's values at position {twice + 1} repeat an earlier combination",
                                   "each point of a sweep is a different launch"))
    if not problems and not seen:
        problems.append(locate((SWEEP,), "a sweep with no settings", "give grid = { ... } or zip = { ... }"))
    if not problems:
        count = math.prod(len(v) for v in table.get("grid", {}).values()) * (
            next(iter(lengths.values())) if lengths else 1)
        if count > MAX_POINTS:
            sizes = " x ".join(str(len(v)) for v in table.get("grid", {}).values())
            problems.append(locate((SWEEP,), f"the sweep has {count} points ({sizes or ''}"
                                             f"{' x ' if sizes and lengths else ''}"
                                             f"{str(next(iter(lengths.values()))) + ' zipped' if lengths else ''}); "
                                             f"at most {MAX_POINTS}",
                                   "split it into several specs, each a family someone reviews"))
    return problems


def _short_names(keys: list[str]) -> dict[str, str]:
    """Each swept setting's name in a suffix: its last part, or the whole path where two share one."""
    last = [k.rsplit(".", 1)[-1] for k in keys]
    return {k: (short if last.count(short) == 1 else k) for k, short in zip(keys, last)}


_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _token(value: Any) -> str | None:
    """A value written into a name, or None where no short spelling says it (a table, an array)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        token = _SAFE.sub("_", value).strip("._-")
        return token[:32] or None
    return None


def _suffixes(combos: list[tuple], names: dict[str, str]) -> list[str]:
    """The suffix of each point; a setting whose values do not each get a distinct
    token (tables, long or unsafe strings that meet) is named by the value's index."""
    if not combos:
        return []
    keys = [k for k, _, _ in combos[0]]
    columns = []
    for n, key in enumerate(keys):
        values: list = []
        index = []
        for combo in combos:
            v = combo[n][1]
            i = next((i for i, w in enumerate(values) if v == w and type(v) is type(w)), None)
            if i is None:
                i = len(values)
                values.append(v)
            index.append(i)
        tokens = [_token(v) for v in values]
        if None in tokens or len(set(tokens)) < len(tokens):
            tokens = [str(i + 1) for i in range(len(values))]
        columns.append([f"{names[key]}_{tokens[i]}" for i in index])
    return ["-".join(parts) for parts in zip(*columns)]
