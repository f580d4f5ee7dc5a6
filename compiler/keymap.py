"""The verl key map: which verl keys each tutorrl setting is written to, per release.

The map itself is data (``keymap/verl.toml``); this module gives it types,
answers "where does setting S live in release R", and digests the part of the
map a bundle was compiled with so a manifest can say exactly which mapping
produced it.
"""

from __future__ import annotations

import functools
import hashlib
import tomllib
from pathlib import Path
from typing import Literal

import msgspec

from tutorrl.errors import Problem, SpecError

Variant = Literal["fsdp", "megatron"]
# plain: the value; pkg: "pkg://<module>"; module-file: the module's file,
# found by launch.sh with the job's Python (see templates/launch.sh.j2).
Spelling = Literal["plain", "pkg", "module-file"]


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
    spelling: Spelling = "plain"
    variants: tuple[Variant, ...] = ("fsdp", "megatron")


class Absent(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Why a setting has no home in some releases (shown in errors and migrations)."""

    releases: str
    why: str
    variants: tuple[Variant, ...] = ("fsdp", "megatron")


class Setting(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    at: list[At]
    absent: tuple[Absent, ...] = ()


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
    # Package data sits beside the module in every install; reading it
    # directly skips importlib.resources, which costs the compile path ~8 ms.
    data = (Path(__file__).parent / "keymap" / "verl.toml").read_bytes()
    return msgspec.convert(tomllib.loads(data.decode()), KeyMap)


def describe_releases(releases: list[str], keymap: KeyMap | None = None) -> str:
    """``["0.7.1", "0.8.0", "0.9.0", "0.9.1"]`` -> ``"from verl 0.7.1"``, in words a user reads.

    Consecutive supported releases collapse into ranges.
    """
    order = (keymap or load_keymap()).releases
    if not releases:
        return "in no supported verl release"
    if list(releases) == order:
        return "in every supported verl release"
    runs: list[list[str]] = []
    for release in order:
        if release in releases:
            if runs and order.index(runs[-1][-1]) == order.index(release) - 1:
                runs[-1].append(release)
            else:
                runs.append([release])
    if len(runs) == 1:
        run = runs[0]
        if len(run) == 1:
            return f"only in verl {run[0]}"
        if run[-1] == order[-1]:
            return f"from verl {run[0]}"
        if run[0] == order[0]:
            return f"up to verl {run[-1]}"
    parts = [run[0] if len(run) == 1 else f"{run[0]} to {run[-1]}" for run in runs]
    return "in verl " + (", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0])


def absent_reason(setting: str, release: str, variant: Variant, keymap: KeyMap | None = None) -> str | None:
    """The map's explanation of why ``setting`` has no key in ``release``, if it gives one."""
    entry = (keymap or load_keymap()).setting.get(setting)
    if entry is None:
        return None
    return next((a.why for a in entry.absent if in_range(release, a.releases) and variant in a.variants), None)


def settings_writing(key: str, keymap: KeyMap | None = None) -> list[str]:
    """The settings that write ``key`` in some release and variant (``*`` entries match one segment)."""
    keymap = keymap or load_keymap()
    found = []
    for name, entry in keymap.setting.items():
        for at in entry.at:
            if any(_key_matches(pattern, key) for pattern in at.keys):
                found.append(name)
                break
    return found


def _key_matches(pattern: str, key: str) -> bool:
    if "*" not in pattern:
        return pattern == key
    head, _, tail = pattern.partition("*")
    rest = key[len(head):] if key.startswith(head) else None
    return bool(rest) and not tail and "." not in rest


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
    chosen = next((sel for span, sel in keymap.variant[variant].items() if in_range(release, span)), None)
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
