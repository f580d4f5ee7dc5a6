"""The key map as a person writes it: ``keymap/verl.toml``'s schema (see :mod:`tutorrl.compiler.release.keymap`).

Each setting's timeline, the facts read from verl's code (``keymap/passthrough.toml``)
and the variant timeline, as msgspec structs. Read by
:func:`~tutorrl.compiler.release.keymap.load_keymap` and the tools that derive the
locks from the map (``tutorrl keys lock``, ``keys add``); never by a compile,
which reads one lock and nothing else -- defining these types is a share of every
cold compile that imports the lock's module.
"""

# No `from __future__ import annotations`: msgspec would evaluate each field's
# type from a string when the map is read.
from typing import Union

import msgspec

from tutorrl.compiler.release.keymap import (
    VARIANTS,
    Engine,
    Ignored,
    Kind,
    Spelling,
    Variant,
    in_range,
    release_tuple,
)


class Entry(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One point of a setting's timeline."""

    key: str | None = None
    spelling: Spelling = "plain"
    variants: tuple[Variant, ...] = VARIANTS
    # verl reads the key although no yaml declares it: Hydra needs `+`.
    undeclared: str = ""
    # verl declares the key and never reads it (why): written as said, with a warning.
    unread: str = ""
    # With `unread`: only these rollout engines never read it (empty: none does).
    engines: tuple[str, ...] = ()
    # The timeline ends here: the setting has no key from this release on.
    absent: str | None = None


class Setting(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    since: dict[str, Union[str, Entry, list[Entry]]]
    kind: Kind = "value"
    # Why the setting has no key before its first entry (errors, migrate).
    before: str = ""

    def entries(self) -> list[tuple[str, Entry]]:
        out = []
        for release, value in self.since.items():
            items = value if isinstance(value, list) else [value]
            out += [(release, Entry(key=i) if isinstance(i, str) else i) for i in items]
        return sorted(out, key=lambda pair: release_tuple(pair[0]))

    def in_force(self, release: str, variant: Variant) -> Entry | None:
        """The entry in force for ``release`` and ``variant``, an ``absent`` one included (None: before the first)."""
        chosen = None
        for since, entry in self.entries():
            if release_tuple(since) <= release_tuple(release) and variant in entry.variants:
                chosen = entry
        return chosen

    def at(self, release: str, variant: Variant) -> Entry | None:
        """The entry that gives the setting a key in ``release`` and ``variant`` (None: no home)."""
        chosen = self.in_force(release, variant)
        return None if chosen is None or chosen.absent is not None else chosen

    def absent_why(self, release: str, variant: Variant) -> str:
        """Why the setting has no key there ('' when it has one, or the map gives no reason)."""
        chosen = self.in_force(release, variant)
        if chosen is None:
            return self.before
        return chosen.absent or ""


class Fact(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A fact read from verl's code (keymap/passthrough.toml), with where it is read."""

    key: str
    releases: str
    read_by: str
    variants: tuple[Variant, ...] = VARIANTS
    note: str = ""
    # [[undeclared]] only: verl hands the undeclared dict on whole.
    whole: bool = False
    # [[undeclared]] only: verl reads the key only when rollout.name is one of
    # these (the engine's own sampling fields); empty: whatever the engine.
    engines: tuple[Engine, ...] = ()

    def holds(self, release: str, variant: Variant) -> bool:
        return in_range(release, self.releases) and variant in self.variants


class Facts(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    schema: str
    passthrough: tuple[Fact, ...] = ()
    undeclared: tuple[Fact, ...] = ()


class VariantSelect(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    config_name: str
    select: tuple[str, ...] = ()


class VariantTimeline(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    since: dict[str, VariantSelect]


class KeyMap(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    schema: str
    releases: list[str]
    variant: dict[Variant, VariantTimeline]
    setting: dict[str, Setting]
    ignored: tuple[Ignored, ...] = ()
    # From keymap/passthrough.toml: dicts verl reads whole, keys it reads undeclared.
    facts: Facts = Facts("tutorrl.passthrough/1")
    # The user's releases (`tutorrl keys add`), also in `releases`; never in the TOML.
    added: tuple[str, ...] = ()

    def packaged(self) -> list[str]:
        """The releases the package itself holds (its locks, its key sets)."""
        return [r for r in self.releases if r not in self.added]

    def read_as(self, release: str) -> str:
        """The release whose ranges an added release is read with: the newest packaged one
        at or before it (the oldest when none is). The map's ranges were written against
        the packaged releases only, so a closed range ``A..B`` that reaches ``B`` says
        nothing of a release after ``B``: an added release takes every range as its base
        does -- a range that ends at the newest packaged release extends to a newer
        added one, a range that ended before it does not (``tutorrl keys add`` names
        each range it so extends)."""
        if release not in self.added:
            return release
        packaged = self.packaged()
        earlier = [r for r in packaged if release_tuple(r) <= release_tuple(release)]
        return earlier[-1] if earlier else packaged[0]

    def variant_select(self, release: str, variant: Variant) -> VariantSelect | None:
        chosen = None
        for since, sel in sorted(self.variant[variant].since.items(), key=lambda p: release_tuple(p[0])):
            if release_tuple(since) <= release_tuple(release):
                chosen = sel
        return chosen
