"""``tutorrl diff BASE CHILD`` where the base does not compile on its own: what the child writes over it.

A partial base (one that leaves the release or the name to its children)
has no launch to compare, so the comparison is made where the two can
be compared: the merged document of the base (and what it extends) against
the merged document of the child, setting by setting, as written. Where both
compile, the ordinary diff of the two launches is made instead.
"""

from __future__ import annotations

import json
import os
from typing import Any

import msgspec


class Change(msgspec.Struct, frozen=True):
    setting: str
    base: Any = None  # None: the base leaves it unset
    spec: Any = None  # None: the spec takes it away (never: a child cannot unset a key)


class LayerDiff(msgspec.Struct, frozen=True):
    base: str
    spec: str
    changes: list[Change]


def _base_index(base: str, chain) -> int | None:
    # Read with the spec's path as its name, each base is named by a path from here.
    real = os.path.realpath(base)
    return next((n for n, source in enumerate(chain) if n and os.path.realpath(source.name) == real), None)


def extends(base: str, spec: str) -> bool:
    """Whether the spec file ``spec`` is built on ``base`` (directly or through other bases)."""
    from tutorrl.compiler.pipeline import read_chain
    from tutorrl.errors import TutorrlError

    try:
        return _base_index(base, read_chain(spec, spec)) is not None
    except TutorrlError:
        return False


def layer_diff(base: str, spec: str) -> LayerDiff:
    """Each setting whose merged value the spec changes over ``base``, as written."""
    from tutorrl.compiler.pipeline import compose, read_chain

    chain = read_chain(spec, spec)
    at = _base_index(base, chain)
    before, after = _flat(compose(chain[at:]).data), _flat(compose(chain).data)

    def same(a: Any, b: Any) -> bool:
        return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)

    changes = [Change(k, before.get(k), after.get(k)) for k in dict.fromkeys([*after, *before])
               if not same(before.get(k), after.get(k))]
    return LayerDiff(base=base, spec=spec, changes=changes)


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: value}


def render_layers(d: LayerDiff, fmt: str) -> str:
    if fmt == "json":
        return msgspec.json.format(msgspec.json.encode(d), indent=2).decode() + "\n"
    def shown(v: Any) -> str:
        if v is None:
            return "(unset)"
        if isinstance(v, bool):
            return "true" if v else "false"
        return repr(v) if isinstance(v, float) else json.dumps(v, default=str)

    head = (f"{d.spec} changes {len(d.changes)} {'setting' if len(d.changes) == 1 else 'settings'} over {d.base} "
            "(a base that does not compile on its own: compared as written, not as launches)")
    rows = [f"{'+' if c.base is None else '~'} {c.setting}: {shown(c.base)} -> {shown(c.spec)}" for c in d.changes]
    if fmt == "markdown":
        return head + "\n\n" + "\n".join(f"- `{r}`" for r in rows) + "\n"
    return head + "\n\n" + "\n".join(f"  {r}" for r in rows) + "\n"
