"""What ``tutorrl diff`` compares, chosen from what it is given: two sides, a set, a spec against a git ref,
or a partial base under a spec built on it."""

from __future__ import annotations

import os

import msgspec

from tutorrl.errors import InputError, Problem
from tutorrl.review.layers import LayerDiff
from tutorrl.review.matrix import Matrix
from tutorrl.review.model import Diff


class Compared(msgspec.Struct, frozen=True):
    """One of ``diff`` (two sides), ``matrix`` (a set) or ``layers`` (a base and a spec that extends it),
    and the warnings of the sides read (bundles accepted on their digests alone)."""

    kind: str
    result: Diff | Matrix | LayerDiff
    warnings: list[str]

    @property
    def same(self) -> bool:
        r = self.result
        return not r.changes if isinstance(r, LayerDiff) else r.same


def compare(old: str, new: list[str], *, against: str | None = None, trust_digests: bool = False) -> Compared:
    from tutorrl.review.model import diff_sides
    from tutorrl.review.sides import load_side, spec_side

    if against is None and (len(new) > 1 or any(_is_set(w) for w in [old, *new])):
        from tutorrl.review.matrix import load_sides, matrix

        sides = load_sides([old, *new], trust_digests=trust_digests)
        return Compared("matrix", matrix(sides), [w for side in sides for w in side.warnings])
    if against is not None:
        if new:
            raise InputError([Problem("--against compares one spec with its committed self; "
                                      "give one spec, not two paths")])
        from tutorrl.compiler.spec import read_spec_bytes
        from tutorrl.review.gitref import read_at_ref

        now = read_spec_bytes(old, old)
        before = spec_side(read_at_ref(old, against), f"{against}:{old}")
        after = spec_side(now, old)
    else:
        if not new:
            raise InputError([Problem("give two bundles or specs to compare (or a set: several, a folder of bundles, "
                                      "a sweep's spec), or one spec and --against REF")])
        from tutorrl.errors import SpecError

        try:
            before = load_side(old, trust_digests=trust_digests)
        except SpecError:
            from tutorrl.review import layers

            # A partial base of the other spec: what that spec writes over it, as written.
            if not os.path.isfile(new[0]) or not layers.extends(old, new[0]):
                raise
            return Compared("layers", layers.layer_diff(old, new[0]), [])
        after = load_side(new[0], trust_digests=trust_digests)
    return Compared("diff", diff_sides(before, after), [*before.warnings, *after.warnings])


def _is_set(word: str) -> bool:
    from tutorrl.contract import MANIFEST

    if os.path.isdir(word):
        return not os.path.exists(os.path.join(word, MANIFEST))
    try:
        with open(word, "rb") as fh:
            raw = fh.read(1 << 20)
    except OSError:
        return False
    if b"sweep" not in raw:
        return False
    from tutorrl import _toml

    try:
        return "sweep" in _toml.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, _toml.TOMLDecodeError):
        return False
