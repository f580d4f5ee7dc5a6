"""Key sets: every key of a verl release's composed Hydra trainer config.

tutorrl checks each verl override it emits against the key set of the target
release. A key set is data: ``keysets/verl-<release>-<variant>.json`` in this
package, extracted from the release's own wheel by
:mod:`tutorrl.compiler.release.keyset_import` (``tutorrl keys import <release>``) and
committed after review.

This module is on the compile path, so it imports nothing heavy: only msgspec
and the standard library (no hydra, omegaconf or verl).
"""

# No `from __future__ import annotations`: msgspec would evaluate each field's
# type from a string on every compile that checks a raw override.
import functools
import os
import re
from typing import Any, Literal

import msgspec

from tutorrl import _overlay
from tutorrl.compiler.release import added
from tutorrl.errors import InputError, Problem

SCHEMA = "tutorrl.keyset/1"

#: The variants a key set exists for: verl's FSDP trainer config and its
#: Megatron trainer config.
VARIANTS: tuple[str, ...] = ("fsdp", "megatron")

KeyType = Literal["int", "float", "str", "bool", "list", "dict", "null", "missing"]

_FILE_RE = re.compile(r"^verl-(?P<release>.+)-(?P<variant>fsdp|megatron)\.json$")


class KeyInfo(msgspec.Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    """One flattened key of a composed config.

    ``default`` is the composed value (an interpolation's resolved value, or its
    raw text where it could not be resolved; ``None`` for a ``???`` value).
    ``type`` is the JSON type of ``default``, or ``"missing"`` for ``???``.
    ``open`` is true for a dict that is empty in the composed config: Hydra
    only accepts new sub-keys under it with a ``+`` prefix.
    ``interpolation`` is the raw ``${...}`` text when the value is an
    interpolation.
    """

    default: Any
    type: KeyType
    open: bool = False
    interpolation: str | None = None


class KeySet(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """All keys of one verl release's composed trainer config, for one variant."""

    schema: str
    release: str
    variant: str
    config_name: str
    overrides: list[str]
    keys: dict[str, KeyInfo]
    # The entry point whose config this is (compiler/release/entries.py); main_ppo's files say nothing of it.
    entry: str = "ppo"

    def has(self, key: str) -> bool:
        """Whether ``key`` (dotted) is a key of the composed config.

        Only flattened keys count: a non-empty dict's own path (``trainer``) is
        not one, its leaves are.
        """
        return key in self.keys

    def refuses_append(self, key: str) -> bool:
        """Whether Hydra refuses ``+key=...``: the config declares the key with a value. It takes '+' on a
        declared key whose value is null, and the value reaches verl either way."""
        info = self.keys.get(key)
        return info is not None and info.type != "null"

    def is_prefix(self, key: str) -> bool:
        """Whether ``key`` is a non-empty dict of the config (a parent of keys)."""
        prefix = key + "."
        return any(k.startswith(prefix) for k in self.keys)

    def open_parent(self, key: str) -> str | None:
        """The nearest ancestor of ``key`` that is an open (empty) dict.

        When ``key`` is not itself a key, this is where Hydra needs ``+key=``
        to add it. ``None`` when no ancestor is open.
        """
        parts = key.split(".")
        for end in range(len(parts) - 1, 0, -1):
            parent = ".".join(parts[:end])
            info = self.keys.get(parent)
            if info is not None:
                return parent if info.open else None
        return None

    def near(self, key: str, n: int = 3) -> list[str]:
        """Up to ``n`` keys close to ``key``, best first (for "did you mean")."""
        import difflib  # only for a key that is not there

        return difflib.get_close_matches(key, sorted(self.keys), n=n, cutoff=0.6)


def _data_dir() -> str:
    # The folder beside this module, as templates are found: importlib.resources'
    # import would cost every compile of a spec with extra_overrides (issue 26).
    return os.path.join(os.path.dirname(__file__), "keysets")


def available_keysets() -> list[tuple[str, str]]:
    """Every (release, variant) with a key set, the package's and the user's added releases',
    sorted by release then variant."""
    return list(_available())


@functools.cache
def _available() -> tuple[tuple[str, str], ...]:
    found = []
    folders = [(_data_dir(), None)] + [(os.path.join(_overlay.release_dir(r), "keysets"), r) for r in added.user_releases()]
    for folder, only in folders:
        try:
            names = os.listdir(folder)
        except FileNotFoundError:
            continue
        for name in names:
            match = _FILE_RE.match(name)
            if match and only in (None, match["release"]):
                found.append((match["release"], match["variant"]))
    return tuple(sorted(set(found), key=lambda rv: (release_sort_key(rv[0]), rv[1])))


def release_sort_key(release: str) -> tuple:
    """Order releases numerically (0.10.0 after 0.9.1); suffixes after the base."""
    parts: list[tuple[int, Any]] = []
    for piece in re.split(r"[.+-]", release):
        parts.append((0, int(piece)) if piece.isdigit() else (1, piece))
    return tuple(parts)


def decode_keyset(data: bytes) -> KeySet:
    """Parse a key-set JSON document."""
    return msgspec.json.decode(data, type=KeySet)


def keyset_name(release: str, variant: str, entry: str = "ppo") -> str:
    """``verl-0.9.1-fsdp.json``; another entry point's ``verl-0.9.1-fsdp@fully_async.json``."""
    return f"verl-{release}-{variant}{'' if entry == 'ppo' else '@' + entry}.json"


@functools.cache
def load_keyset(release: str, variant: str, entry: str = "ppo") -> KeySet:
    """The packaged key set of verl ``release`` for ``variant`` and entry point ``entry`` (cached)."""
    if variant not in VARIANTS:
        raise InputError(
            [Problem(f"unknown verl variant {variant!r}", hint=f"expected one of {', '.join(VARIANTS)}")]
        )
    name = keyset_name(release, variant, entry)
    path = _overlay.find(_data_dir(), "keysets", name, release, release in added.user_releases())
    try:
        if path is None:
            raise FileNotFoundError(name)
        with open(path, "rb") as fh:
            data = fh.read()
    except (FileNotFoundError, IsADirectoryError):
        if entry != "ppo":
            raise InputError([Problem(f"tutorrl has no key set for entry point {entry!r} at verl {release} "
                                      f"({variant})", hint="its releases are in compiler/release/keymap/entries.toml")]
                             ) from None
        have = available_keysets()
        listing = ", ".join(f"{r} ({v})" for r, v in have) or "none"
        raise InputError(
            [
                Problem(
                    f"tutorrl has no key set for verl {release} ({variant})",
                    hint=f"available: {listing}; add the release with `tutorrl keys add {release}`",
                )
            ]
        ) from None
    keyset = decode_keyset(data)
    if keyset.schema != SCHEMA or keyset.release != release or keyset.variant != variant or keyset.entry != entry:
        raise InputError(
            [
                Problem(
                    f"key set {path} is inconsistent: schema {keyset.schema!r}, "
                    f"release {keyset.release!r}, variant {keyset.variant!r}",
                    hint="re-run `tutorrl keys import`",
                )
            ]
        )
    return keyset
