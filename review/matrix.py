"""``tutorrl diff`` over a set of launches: the settings that vary, as a matrix (one column per launch).

Two launches are explained change by change (:mod:`tutorrl.review.model`);
a set -- a sweep's points, a folder of bundles -- is read across: each
setting whose value is not the same in every launch is a row, and what
every launch shares is left out. The values are the bundles' normalised
specs (what each launch is given), read through the same sides as a diff.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from tutorrl.compiler.spec import to_builtins
from tutorrl.review.sides import Side


class Matrix(msgspec.Struct, frozen=True):
    launches: list[dict]  # {"label", "bundle", "experiment", "point"}
    # setting -> its value in each launch (None where a launch leaves it unset)
    settings: dict[str, list[Any]]
    same: bool


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: value}


def matrix(sides: list[Side]) -> Matrix:
    flats = [_flat(to_builtins(side.spec)) for side in sides]
    keys = list(dict.fromkeys(k for flat in flats for k in flat))
    varying = {k: [flat.get(k) for flat in flats] for k in keys
               if len({json.dumps(flat.get(k), sort_keys=True) for flat in flats}) > 1}
    if len({side.manifest.verl for side in sides}) > 1 and "experiment.verl" not in varying:
        varying["experiment.verl"] = [side.manifest.verl for side in sides]
    launches = [{"label": side.label, "bundle": side.manifest.id, "experiment": side.manifest.experiment,
                 "point": dict(side.manifest.point)} for side in sides]
    return Matrix(launches=launches, settings=varying, same=len({s.digest for s in sides}) == 1)


def _cell(value: Any) -> str:
    if value is None:
        return "(unset)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    return json.dumps(value) if isinstance(value, (list, dict)) else repr(value)


def render_matrix(m: Matrix, fmt: str) -> str:
    if fmt == "json":
        return msgspec.json.format(msgspec.json.encode(m), indent=2).decode() + "\n"
    header = ["setting"] + [launch["bundle"] for launch in m.launches]
    rows = [[key] + [_cell(v) for v in values] for key, values in m.settings.items()]
    intro = (f"{len(m.launches)} launches; {len(m.settings)} "
             f"{'setting varies' if len(m.settings) == 1 else 'settings vary'} across them"
             + (" (they are one launch)" if m.same else ""))
    if fmt == "markdown":
        lines = [intro, "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
        return "\n".join(lines) + "\n"
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    lines = [intro, ""] + ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header] + rows]
    lines += ["", "launches:"] + [f"  {launch['bundle']}  {launch['label']}  ({launch['experiment']})"
                                   for launch in m.launches]
    return "\n".join(lines) + "\n"


def load_sides(words: list[str], *, trust_digests: bool = False) -> list[Side]:
    """The launches named: bundles, folders of bundles, specs (a sweep gives one side per point);
    ``trust_digests`` accepts a bundle that does not re-derive on its digests alone."""
    from pathlib import Path

    from tutorrl.compiler.pipeline import compile_family
    from tutorrl.contract import MANIFEST
    from tutorrl.errors import Problem, SpecError
    from tutorrl.review.sides import bundle_side, compiled_side

    out: list[Side] = []
    for word in words:
        path = Path(word)
        if path.is_dir():
            if (path / MANIFEST).exists():
                out.append(bundle_side(path, word, trust_digests=trust_digests))
                continue
            children = sorted(p for p in path.iterdir() if (p / MANIFEST).is_file() and not p.name.startswith("."))
            if not children:
                raise SpecError([Problem("is neither a bundle nor a folder of bundles", file=word)])
            from tutorrl.compiler.spec import order_key

            sides = [bundle_side(c, str(c), trust_digests=trust_digests) for c in children]
            out += sorted(sides, key=lambda side: order_key(side.manifest.point, side.manifest.experiment))
        elif path.exists():
            for launch in compile_family(word):
                label = f"{word} [{launch.point.label}]" if launch.point is not None else word
                out.append(compiled_side(launch.bundle, label))
        else:
            raise SpecError([Problem("no such spec file or bundle folder", file=word)])
    return out
