"""The verl key map: which verl keys each tutorrl setting is written to, per release.

The map itself is data (``keymap/verl.toml``); this module gives it types,
answers "where does setting S live in release R", and digests the part of the
map a bundle was compiled with so a manifest can say exactly which mapping
produced it.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.resources
import tomllib
from typing import Literal

import msgspec

from tutorrl.errors import Problem, SpecError

Variant = Literal["fsdp", "megatron"]


def release_tuple(release: str) -> tuple[int, ...]:
    """``"0.3.0.post1"`` -> ``(0, 3, 0, 1)``; ``"0.9.1"`` -> ``(0, 9, 1, 0)``."""
    main, _, post = release.partition(".post")
    return tuple(int(p) for p in main.split(".")) + (int(post or 0),)


def in_range(release: str, spec: str) -> bool:
    """Whether ``release`` falls in a range written ``A``, ``A..B``, ``A..`` or ``..B``."""
    if ".." not in spec:
        return release_tuple(release) == release_tuple(spec)
    low, high = spec.split("..", 1)
    r = release_tuple(release)
    return (not low or release_tuple(low) <= r) and (not high or r <= release_tuple(high))


class At(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    releases: str
    keys: list[str]
    append: bool = False
    spelling: Literal["plain", "pkg"] = "plain"
    variants: tuple[Variant, ...] = ("fsdp", "megatron")


class Setting(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    at: list[At]


class Ignored(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    releases: str
    prefix: str
    reason: str
    instead: str = ""


class VariantSelect(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    config_name: str
    select: tuple[str, ...] = ()


class KeyMap(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    schema: str
    releases: list[str]
    variant: dict[Variant, dict[str, VariantSelect]]
    setting: dict[str, Setting]
    ignored: tuple[Ignored, ...] = ()


class Target(msgspec.Struct, frozen=True):
    """Where one setting is written for one release and variant."""

    keys: tuple[str, ...]
    append: bool
    spelling: str


class ReleaseMap(msgspec.Struct, frozen=True):
    """The key map cut down to one release and variant: what a compile uses."""

    release: str
    variant: Variant
    config_name: str
    select: tuple[str, ...]
    targets: dict[str, Target]
    ignored: tuple[Ignored, ...]

    def digest(self) -> str:
        return "sha256:" + hashlib.sha256(msgspec.json.encode(self, order="sorted")).hexdigest()

    def target(self, setting: str) -> Target | None:
        """The target of ``setting``; ``reward.kwargs.<name>`` resolves through its ``*`` entry."""
        if setting in self.targets:
            return self.targets[setting]
        head, _, tail = setting.rpartition(".")
        wild = self.targets.get(head + ".*")
        if wild is None:
            return None
        return Target(tuple(k.replace("*", tail) for k in wild.keys), wild.append, wild.spelling)

    def ignored_by(self, key: str) -> Ignored | None:
        return next((i for i in self.ignored if key.startswith(i.prefix)), None)


@functools.cache
def load_keymap() -> KeyMap:
    data = importlib.resources.files("tutorrl.compiler").joinpath("keymap/verl.toml").read_bytes()
    return msgspec.convert(tomllib.loads(data.decode()), KeyMap)


def releases_with(setting: str, variant: Variant, keymap: KeyMap | None = None) -> list[str]:
    """The releases of the map in which ``setting`` exists for ``variant``."""
    keymap = keymap or load_keymap()
    entry = keymap.setting.get(setting)
    if entry is None:
        return []
    return [r for r in keymap.releases
            if any(in_range(r, at.releases) and variant in at.variants for at in entry.at)]


@functools.cache
def release_map(release: str, variant: Variant) -> ReleaseMap:
    """The map for one release; raises :class:`SpecError` for an unsupported release."""
    keymap = load_keymap()
    if release not in keymap.releases:
        raise SpecError([Problem(
            f"verl {release} is not supported; supported releases: {', '.join(keymap.releases)}",
            key="experiment.verl")])
    chosen = keymap.variant[variant].get(release)
    if chosen is None:
        raise SpecError([Problem(f"verl {release} has no {variant} variant in the key map",
                                 key="experiment.verl")])
    targets: dict[str, Target] = {}
    for name, setting in keymap.setting.items():
        for at in setting.at:
            if in_range(release, at.releases) and variant in at.variants:
                targets[name] = Target(tuple(at.keys), at.append, at.spelling)
                break
    ignored = tuple(i for i in keymap.ignored if in_range(release, i.releases))
    return ReleaseMap(release, variant, chosen.config_name, tuple(chosen.select), targets, ignored)
