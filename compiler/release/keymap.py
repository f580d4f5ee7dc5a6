"""The verl key map: where each spec setting lives in verl's config, per release.

Two layers, both data:

* ``keymap/verl.toml`` (schema ``tutorrl.keymap/2``) -- what a person reviews.
  One *timeline* per setting: ``since."R" = key`` entries that hold until the
  next entry, so a verl release that moves nothing needs no edit beyond the
  ``releases`` list. Entries may be restricted to a variant (FSDP or Megatron),
  carry a value *spelling*, end a timeline (``absent = "why"``), or state that
  verl reads a key no yaml declares (``undeclared = "why"``). Whether Hydra
  needs ``+`` is not written there: it follows from the release's key set.
  ``[[passthrough]]`` lists the dicts verl hands on whole (so keys appended
  under them are read), ``[[ignored]]`` the keys a release accepts and never
  reads.
* ``keymap/lock/verl-<release>-<variant>.json`` -- generated from the map and
  the key sets by :func:`build_lock` (``tutorrl keys lock``), committed, and
  checked by a test. A compile reads one lock and nothing else; its digest is
  the ``keymap_digest`` a manifest records.
"""


import functools
import os
from typing import TYPE_CHECKING, Any, Literal, Union

import msgspec

from tutorrl import _overlay, _sha256, _toml
from tutorrl.compiler.release import added
from tutorrl.errors import Problem, SpecError

if TYPE_CHECKING:
    from pathlib import Path

Variant = Literal["fsdp", "megatron"]
VARIANTS: tuple[Variant, ...] = ("fsdp", "megatron")
# plain: the value; pkg: "pkg://<module>"; module-file: the module's file,
# found by launch.sh with the job's Python; evidence-callback: true -> the
# class verl calls after every save (see compiler/release/spelling.py).
Spelling = Literal["plain", "pkg", "module-file", "evidence-callback"]
Kind = Literal["value", "table"]
# verl's rollout.name values a fact can be restricted to (the spec's rollout.engine).
Engine = Literal["vllm", "sglang", "hf"]

# A str, not a pathlib.Path: the compile path reads one lock and imports no
# pathlib.
_HERE = os.path.dirname(__file__)
_LOCKS = os.path.join(_HERE, "keymap", "lock")
LOCK_SCHEMA = "tutorrl.lock/1"


release_tuple = added.release_order


def in_range(release: str, span: str) -> bool:
    """Whether ``release`` falls in a range written ``A``, ``A..B``, ``A..`` or ``..B``."""
    if ".." not in span:
        return release_tuple(release) == release_tuple(span)
    low, high = span.split("..", 1)
    r = release_tuple(release)
    return (not low or release_tuple(low) <= r) and (not high or r <= release_tuple(high))


# ------------------------------------------------------------------ the map


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


class Ignored(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """Keys a release accepts and never reads. ``keys`` are exact, or a subtree ``a.b.**``."""

    keys: tuple[str, ...]
    releases: str
    reason: str
    # Old prefix -> new prefix, for the advice.
    instead: dict[str, str] = {}
    variants: tuple[Variant, ...] = VARIANTS

    def match(self, key: str) -> bool:
        return any(key == k or (k.endswith(".**") and key.startswith(k[:-2])) for k in self.keys)

    def advice(self, key: str) -> str | None:
        for old, new in self.instead.items():
            if key.startswith(old):
                return f"use '{new}{key[len(old):]}'"
        return None


class Retired(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """A key a release removed whose one remaining behaviour is what one of its old values chose.

    A launch that sets ``key`` to ``always`` there asks for what the release does anyway, so leaving the
    override out loses nothing (verl, which refuses the key, would otherwise stop at start); any other
    value asked for a behaviour the release no longer has, and stays refused."""

    key: str
    releases: str
    # The old value, as Hydra reads it (``null`` for None), whose behaviour the release kept as its only one.
    always: str
    reason: str
    variants: tuple[Variant, ...] = VARIANTS


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
    retired: tuple[Retired, ...] = ()
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

    def retired_at(self, key: str, release: str, variant: str) -> Retired | None:
        """The retirement of ``key`` in force at ``release`` (None when the map records none)."""
        at = self.read_as(release)
        return next((r for r in self.retired if r.key == key and variant in r.variants
                     and in_range(at, r.releases)), None)

    def variant_select(self, release: str, variant: Variant) -> VariantSelect | None:
        chosen = None
        for since, sel in sorted(self.variant[variant].since.items(), key=lambda p: release_tuple(p[0])):
            if release_tuple(since) <= release_tuple(release):
                chosen = sel
        return chosen


@functools.cache
def load_keymap() -> KeyMap:
    """The packaged map, its ``releases`` followed by the user's added ones (in release order)."""
    data = _toml.loads(_read_text(os.path.join(_HERE, "keymap", "verl.toml")))
    data["facts"] = _toml.loads(_read_text(os.path.join(_HERE, "keymap", "passthrough.toml")))
    mine = [r for r in added.user_releases() if r not in data["releases"]]
    data["releases"] = sorted(data["releases"] + mine, key=release_tuple)
    data["added"] = mine
    for release in mine:
        # Timeline entries an added release was given (`keys add --move`): each holds for its release
        # only as a starting point, as the map's own entries do; nothing else of the map is overlaid.
        path = os.path.join(_overlay.release_dir(release), "keymap.toml")
        if os.path.isfile(path):
            for name, table in _toml.loads(_read_text(path)).get("setting", {}).items():
                entry = table.get("since", {}).get(release)
                if name in data["setting"] and entry is not None:
                    data["setting"][name].setdefault("since", {})[release] = entry
    return msgspec.convert(data, KeyMap)


def supported_releases() -> list[str]:
    """The releases tutorrl compiles for: the locks that exist, the package's and then the
    user's added ones (no TOML parse on the compile path), in release order."""
    return _lock_index()[0]


def forget_user_releases() -> None:
    """Read the data folder again (after `keys add` or `keys remove` in this process)."""
    from tutorrl.compiler.release import built, keysets

    added.forget()
    for cached in (_lock_index, load_keymap, load_lock, keysets._available, keysets.load_keyset, built.load_built):
        cached.cache_clear()


@functools.cache
def _lock_index() -> tuple[list[str], frozenset]:
    pairs = added.lock_pairs(_LOCKS)
    for release in added.user_releases():
        pairs |= {p for p in added.lock_pairs(os.path.join(_overlay.release_dir(release), "lock")) if p[0] == release}
    releases = sorted({r for r, _ in pairs}, key=release_tuple)
    return releases, frozenset(pairs)


# ----------------------------------------------------------------- the lock


class Target(msgspec.Struct, frozen=True, omit_defaults=True):
    """Where one setting is written for one release and variant."""

    key: str
    plus: bool = False
    spelling: Spelling = "plain"
    kind: Kind = "value"
    # verl's default for the key (value kinds), as composed; `interpolation`
    # holds the raw ${...} when the default is one (tables too: see written()).
    default: Any = None
    interpolation: str = ""
    # Table kinds: sub-keys the release declares, sub-tables that are open
    # (empty dicts, so Hydra takes `+` entries), and whether verl reads the
    # table whole (then any entry is read).
    declared: tuple[str, ...] = ()
    open: tuple[str, ...] = ()
    passthrough: bool = False
    # The release declares the key and never reads it (why): the compiler warns;
    # with `unread_engines`, only when rollout.engine is one of them.
    unread: str = ""
    unread_engines: tuple[str, ...] = ()

    def written(self, entry: str | None = None) -> tuple[str, bool]:
        """The key this setting (or one ``entry`` of its table) is written under, and whether
        Hydra needs ``+`` for it: a key the release's config does not declare is an append.
        The one place that rule is decided (resolve, migrate, review and errors ask here)."""
        if entry is None:
            return self.key, self.plus
        return f"{self.key}.{entry}", entry not in self.declared

    def forced(self, entry: str | None = None) -> bool:
        """Whether an ``entry`` of this table is written ``++`` (add, or set when present).

        A table whose default interpolates another (the ref's Megatron
        ``override_transformer_config`` is the actor's) has, to Hydra, every
        key of that other table: ``+`` fails on one the actor's table declares
        or the spec wrote there first ("Could not append ... An item is already
        at"), a bare key fails on one it lacks. ``++`` is right in both cases
        (verl's own scripts write these entries so)."""
        return entry is not None and self.kind == "table" and bool(self.interpolation)

    def spelled(self, entry: str | None = None) -> str:
        """:meth:`written` as an override's left side: ``+key.entry``, ``++key.entry`` or ``key``."""
        key, append = self.written(entry)
        return ("++" if self.forced(entry) else "+" if append else "") + key


# dict=True: a __dict__ beside the fields, where digest() keeps what it
# computed (never encoded, compared or hashed: msgspec sees the fields only).
class Lock(msgspec.Struct, frozen=True, omit_defaults=True, dict=True):
    """The key map cut down to one release and variant: all a compile needs."""

    schema: str
    release: str
    variant: Variant
    config_name: str
    select: tuple[str, ...]
    targets: dict[str, Target]
    # Settings with no key here, and why (when the map says).
    absent: dict[str, str]
    passthrough: tuple[str, ...]
    # Keys verl reads although no yaml of this release declares them (need `+`).
    undeclared: tuple[str, ...]
    ignored: tuple[Ignored, ...]
    # Keys of `undeclared` that verl reads only with these rollout engines
    # (omitted when empty, so a release with none keeps its lock and digest).
    undeclared_engines: dict[str, tuple[str, ...]] = {}
    # The entry point (compiler/release/entries.py) whose config this lock is cut for;
    # omitted for main_ppo, so its locks and their digests are what they were.
    entry: str = "ppo"

    def digest(self) -> str:
        # Computed once per lock: load_lock hands out one lock per release, and
        # encoding all of it (thousands of targets) on every call would show in every compile.
        held = self.__dict__.get("_digest")
        if held is None:
            held = self.__dict__["_digest"] = \
                "sha256:" + _sha256.sha256(msgspec.json.encode(self, order="sorted")).hexdigest()
        return held

    def ignored_by(self, key: str) -> Ignored | None:
        return next((i for i in self.ignored if i.match(key)), None)

    def passthrough_above(self, key: str) -> str | None:
        return next((p for p in self.passthrough if key.startswith(p + ".")), None)

    def reads_undeclared(self, key: str, engine: str | None = None) -> bool:
        """Whether verl reads ``key`` though no yaml declares it, with rollout engine ``engine``
        (None: not known, so a read by any engine counts)."""
        if key not in self.undeclared:
            return False
        only = self.undeclared_engines.get(key)
        return engine is None or not only or engine in only


def lock_path(release: str, variant: Variant, entry: str = "ppo") -> "Path":
    from pathlib import Path

    return Path(_lock_file(release, variant, entry))


def _lock_file(release: str, variant: Variant, entry: str = "ppo") -> str:
    return os.path.join(_LOCKS, f"verl-{release}-{variant}{'' if entry == 'ppo' else '@' + entry}.json")


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        return fh.read()


@functools.cache
def load_lock(release: str, variant: Variant, entry: str | None = None) -> Lock:
    """The committed lock (or an added release's) of ``release``, ``variant`` and entry point
    ``entry`` (a name of keymap/entries.toml or its module; None: main_ppo); raises
    :class:`SpecError` for an unsupported release (at ``experiment.verl``), an unknown entry or
    one the release lacks (at ``experiment.entry``)."""
    try:
        with open(_lock_file(release, variant), "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        found = _overlay.find(_LOCKS, "lock", f"verl-{release}-{variant}.json", release,
                              added.is_user_release(release))
        if found is None:
            raise SpecError([_unsupported(release, variant)]) from None
        with open(found, "rb") as fh:
            data = fh.read()
    if entry is not None and entry != "ppo":
        name = entry_at(entry, release, variant).name
        if name != "ppo":
            path = _overlay.find(_LOCKS, "lock", os.path.basename(_lock_file(release, variant, name)), release,
                                 added.is_user_release(release))
            if path is None:
                raise SpecError([Problem(f"entry point '{name}' has no lock at verl {release} ({variant})",
                                         key="experiment.entry",
                                         hint="`tutorrl keys add` writes an entry point's files where the "
                                              "release's wheel ships its module and config")]) from None
            with open(path, "rb") as fh:
                data = fh.read()
    return msgspec.json.decode(data, type=Lock)


def _unsupported(release: str, variant: str) -> Problem:
    releases = supported_releases()
    if release in releases:
        return Problem(f"verl {release} is not supported with {variant}", key="experiment.verl",
                       hint=f"supported releases: {', '.join(releases)}")
    return Problem(f"verl {release} is not supported", key="experiment.verl",
                   hint=f"supported releases: {', '.join(releases)}; a newer verl release is added with "
                        f"`tutorrl keys add {release}` (it reads the release's wheel)")


def releases_of(entry) -> list[str]:
    """The supported releases at which entry point ``entry`` (an EntryPoint) exists."""
    return [r for r in supported_releases() if _has_entry(entry, r)]


def _has_entry(entry, release: str, variant: str | None = None) -> bool:
    """Whether ``release`` has entry point ``entry`` (for ``variant``): entries.toml's releases, or for a
    release `tutorrl keys add` added, the entry's lock it wrote (it writes one for each entry the wheel ships)."""
    if entry.exists_at(release, variant):
        return True
    if entry.default or not added.is_user_release(release):
        return False
    return any(_overlay.find(_LOCKS, "lock", os.path.basename(_lock_file(release, v, entry.name)), release, True)
               for v in ([variant] if variant else ("fsdp", "megatron")))


def entry_at(text: str | None, release: str, variant: str | None = None):
    """The entry ``text`` names, checked to exist at ``release`` (and to have a config for ``variant`` where
    given); a :class:`SpecError` at ``experiment.entry`` naming the known entries, the releases where it
    exists, or the variants it has."""
    from tutorrl.compiler.release.entries import find_entry, load_entries

    entry = find_entry(text)
    if entry is None:
        known = ", ".join(f"{e.name} ({e.module})" for e in load_entries().values())
        raise SpecError([Problem(f"tutorrl knows no verl entry point {text!r}", key="experiment.entry",
                                 hint=f"known: {known}; a new one is a table of compiler/release/keymap/entries.toml "
                                      "with its key sets (`tutorrl keys import`)")])
    if not _has_entry(entry, release):
        where = releases_of(entry)
        raise SpecError([Problem(f"entry point '{entry.name}' ({entry.module}) exists {describe_releases(where)}; "
                                 f"this spec targets verl {release}", key="experiment.entry",
                                 hint="target one of those releases in experiment.verl" if where else None)])
    if variant is not None and not _has_entry(entry, release, variant):
        has = ", ".join(f"{v} ({entry.config_name(v)})" for v in entry.variants)
        raise SpecError([Problem(f"entry point '{entry.name}' ({entry.module}) has no {variant} config: its own "
                                 f"Hydra config is for {has} only", key="experiment.entry",
                                 hint="choose an actor strategy of that variant, or another entry point")])
    return entry


class LockError(Exception):
    """The map says something the release's key set contradicts."""


def build_lock(release: str, variant: Variant, keymap: KeyMap | None = None, keyset=None, entry: str = "ppo") -> Lock:
    """Derive the lock of ``release``/``variant`` (entry point ``entry``) from the map and the key set.

    Another entry point's config is its own (keymap/entries.toml): its key set, its
    config name and no config-group choice; the settings and verl's facts are the
    key map's, since its workers are main_ppo's."""
    from tutorrl.compiler.release.keysets import load_keyset

    # `entry` below is each setting's timeline entry. The literal, not the caller's equal string:
    # msgspec omits a default it finds by identity, and main_ppo's locks must not name it.
    entry_point = "ppo" if entry == "ppo" else entry
    keymap = keymap or load_keymap()
    keyset = keyset or load_keyset(release, variant, entry_point)
    sel = keymap.variant_select(release, variant)
    if sel is None:
        raise LockError(f"verl {release}: no {variant} config in the key map")
    found = None
    if entry_point != "ppo":
        from tutorrl.compiler.release.entries import find_entry

        found = find_entry(entry_point)
    # An entry reading verl's own trainer config has its variants chosen as main_ppo's are.
    if entry_point != "ppo" and not (found is not None and found.trainer_config):
        sel = VariantSelect(config_name=keyset.config_name)
    facts = keymap.facts
    # An added release reads the ranges as its base release does (KeyMap.read_as).
    at = keymap.read_as(release)
    passthrough = tuple(sorted({f.key for f in facts.passthrough + tuple(u for u in facts.undeclared if u.whole)
                                if f.holds(at, variant)}))
    holding = [f for f in facts.undeclared if f.holds(at, variant)]
    undeclared = {f.key for f in holding}
    # A key is engine-bound only when every fact that reads it is: one fact with
    # no engines means it is read whatever the rollout engine.
    undeclared_engines = {key: tuple(sorted({e for f in holding if f.key == key for e in f.engines}))
                          for key in sorted(undeclared) if all(f.engines for f in holding if f.key == key)}
    problems: list[str] = [f"{f.key}: `engines` is for an [[undeclared]] key verl reads itself, not a dict read whole"
                           for f in facts.passthrough + tuple(u for u in facts.undeclared if u.whole) if f.engines]
    targets: dict[str, Target] = {}
    absent: dict[str, str] = {}
    own = _own_config(found, keyset)
    for name, setting in keymap.setting.items():
        entry = setting.at(release, variant)
        if entry is None:
            why = setting.absent_why(release, variant)
            if why:
                absent[name] = why
            continue
        key = entry.key
        if entry.engines and not entry.unread:
            problems.append(f"{name}: `engines` says with which rollout engines a key is unread; it needs `unread`")
        if setting.kind == "table":
            children = sorted(k[len(key) + 1:] for k in keyset.keys if k.startswith(key + "."))
            # Sub-tables that take new entries: empty dicts, and dicts verl reads whole.
            opened = sorted({k[len(key) + 1:] if k != key else "" for k, info in keyset.keys.items()
                             if info.open and (k == key or k.startswith(key + "."))}
                            | {p[len(key) + 1:] for p in passthrough if p.startswith(key + ".")})
            reads_whole = key in passthrough or any(key.startswith(p + ".") for p in passthrough)
            if not (children or opened or reads_whole or entry.undeclared or keyset.has(key) or key in undeclared):
                if own:
                    absent[name] = f"{own} has no table '{key}'"
                    continue
                problems.append(f"{name}: verl {release} ({variant}) has no table '{key}' and the map "
                                "gives no reason verl reads it")
            targets[name] = Target(key=key, plus=not keyset.has(key) and not children, spelling=entry.spelling,
                                   kind="table", declared=tuple(c for c in children
                                                                 if not keyset.keys[f"{key}.{c}"].open),
                                   open=tuple(opened),
                                   passthrough=reads_whole or bool(entry.undeclared) or key in undeclared,
                                   interpolation=getattr(keyset.keys.get(key), "interpolation", None) or "")
            continue
        info = keyset.keys.get(key)
        if info is not None and not info.open:
            targets[name] = Target(key=key, spelling=entry.spelling, default=info.default,
                                   interpolation=info.interpolation or "", unread=entry.unread,
                                   unread_engines=entry.engines)
        elif (entry.undeclared or key in undeclared or keyset.open_parent(key)
              or any(key.startswith(p + ".") for p in passthrough)):
            targets[name] = Target(key=key, plus=True, spelling=entry.spelling)
        elif own:
            absent[name] = f"{own} declares no '{key}'"
        else:
            problems.append(f"{name}: verl {release} ({variant}) declares no '{key}' and no open table or "
                            "pass-through dict above it")
    if problems:
        raise LockError("\n".join(problems))
    ignored = tuple(i for i in keymap.ignored if in_range(at, i.releases) and variant in i.variants)
    return Lock(LOCK_SCHEMA, release, variant, sel.config_name, tuple(sel.select), targets, absent,
                passthrough, tuple(sorted(undeclared)), ignored, undeclared_engines, entry_point)


def _own_config(found, keyset) -> str:
    """Who an entry point's config is (``found``: its entry, None for main_ppo), where it does not extend the
    release's trainer config but a copy of verl's in its own folder (no search path, keymap/entries.toml): a
    setting whose key that copy lacks has no home in its lock (absent, with this said), where main_ppo's lock
    of the release has one. "" otherwise: a key the config lacks is the key map's to explain."""
    if found is None or found.searchpath or found.trainer_config:
        return ""
    return (f"the config of entry point '{found.name}' ({keyset.config_name}: a copy of verl's trainer config in "
            "its own folder, not the release's)")


def encode_lock(lock: Lock) -> bytes:
    """Canonical JSON of a lock (sorted keys, one target per line)."""
    import json

    data = msgspec.to_builtins(lock, order="sorted")
    targets = data.pop("targets")
    head = json.dumps(data, sort_keys=True, ensure_ascii=False, indent=1)
    body = ",\n".join(f" {json.dumps(k, ensure_ascii=False)}: {json.dumps(v, sort_keys=True, ensure_ascii=False)}"
                      for k, v in sorted(targets.items()))
    return (head[:-2] + ',\n "targets": {\n' + body + "\n }\n}\n").encode()


# ----------------------------------------------------------- map questions


def describe_releases(releases: list[str], keymap: KeyMap | None = None) -> str:
    """``["0.7.1", "0.8.0", "0.9.0", "0.9.1"]`` -> ``"from verl 0.7.1"``, in words a user reads."""
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


def releases_with(setting: str, variant: Variant, keymap: KeyMap | None = None) -> list[str]:
    """The releases of the map in which ``setting`` has a key for ``variant``."""
    keymap = keymap or load_keymap()
    entry = keymap.setting.get(setting)
    if entry is None:
        return []
    return [r for r in keymap.releases if entry.at(r, variant) is not None]


def settings_writing(key: str, keymap: KeyMap | None = None) -> list[str]:
    """The settings that write ``key`` in some release and variant (tables match their entries)."""
    keymap = keymap or load_keymap()
    found = []
    for name, setting in keymap.setting.items():
        for _, entry in setting.entries():
            if entry.key and (entry.key == key or (setting.kind == "table" and key.startswith(entry.key + "."))):
                found.append(name)
                break
    return found
