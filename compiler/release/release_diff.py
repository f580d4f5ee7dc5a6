"""What a verl release changes against the release before it, for ``tutorrl keys add``.

Keys added, removed and moved (a removed key and an added one with the same
last name and the same default, the only such pair: verl moving a key, as the
key map's timelines record by hand), defaults changed, dataclass fields
gained or lost, and the spec settings the key map cannot place in the new
release -- each needs a timeline entry (``since."X.Y.Z"`` in keymap/verl.toml).
Pure: key sets and built sections in, lines out.
"""

from __future__ import annotations

from typing import Any, cast

import msgspec

from tutorrl.compiler.release.built import Built
from tutorrl.compiler.release.keymap import Entry, KeyMap, LockError, Variant, build_lock
from tutorrl.compiler.release.keysets import KeySet


class KeyDiff(msgspec.Struct, frozen=True):
    added: list[str]
    removed: list[str]
    moved: dict[str, str]  # old key -> new key
    defaults: dict[str, tuple[Any, Any]]  # key -> (before, after)


def _shared_tail(a: str, b: str) -> int:
    n = 0
    for x, y in zip(reversed(a.split(".")), reversed(b.split("."))):
        if x != y:
            break
        n += 1
    return n


def key_diff(before: KeySet, after: KeySet) -> KeyDiff:
    old, new = set(before.keys), set(after.keys)
    removed, added = sorted(old - new), sorted(new - old)
    moved: dict[str, str] = {}
    for key in removed:
        leaf, info = key.rsplit(".", 1)[-1], before.keys[key]
        same = [k for k in added if k.rsplit(".", 1)[-1] == leaf and after.keys[k].default == info.default
                and after.keys[k].type == info.type]
        if not same:
            continue
        best = max(_shared_tail(key, k) for k in same)
        top = [k for k in same if _shared_tail(key, k) == best]
        # Only an unambiguous pair is called a move; the other direction must agree too.
        back = [r for r in removed if r.rsplit(".", 1)[-1] == leaf and before.keys[r].default == after.keys[top[0]].default
                and before.keys[r].type == after.keys[top[0]].type]
        if len(top) == 1 and len(back) == 1 and top[0] not in moved.values():
            moved[key] = top[0]
    defaults = {k: (before.keys[k].default, after.keys[k].default) for k in sorted(old & new)
                if (before.keys[k].default, before.keys[k].type) != (after.keys[k].default, after.keys[k].type)}
    return KeyDiff([k for k in added if k not in moved.values()], [k for k in removed if k not in moved],
                   moved, defaults)


def built_diff(before: Built, after: Built) -> list[str]:
    """One line per dataclass-built section whose class or fields changed."""
    out = []
    for section in sorted(set(before.sections) | set(after.sections)):
        a, b = before.sections.get(section), after.sections.get(section)
        if a is None and b is not None:
            out.append(f"{section}: now built into {b.name} ({len(b.fields)} fields)")
        elif b is None and a is not None:
            out.append(f"{section}: no longer built into {a.name}")
        elif a is not None and b is not None and (a.fields != b.fields or a.cls != b.cls):
            gained, lost = sorted(set(b.fields) - set(a.fields)), sorted(set(a.fields) - set(b.fields))
            out.append(f"{section} ({b.name}): " + "; ".join(
                ([f"fields added: {', '.join(gained)}"] if gained else [])
                + ([f"fields removed: {', '.join(lost)}"] if lost else [])
                + ([f"class {a.cls} -> {b.cls}"] if a.cls != b.cls else [])))
    return out


class Unplaced(msgspec.Struct, frozen=True):
    setting: str
    variant: str
    key: str
    moved_to: str = ""

    def why(self, release: str) -> str:
        where = f"; it likely moved to '{self.moved_to}'" if self.moved_to else ""
        key = self.moved_to or "<its new key>"
        return (f"verl {release} ({self.variant}) has no '{self.key}'{where}: the key map needs a timeline entry "
                f"for {self.setting} -- `tutorrl keys add {release} --move {self.setting}={key}` (after "
                f"`tutorrl keys remove {release}`), or since.\"{release}\" = \"{key}\" in keymap/verl.toml in a "
                f"checkout; until then a spec that sets it does not compile for {release}")


def _without(items, variant: Variant) -> list[Entry]:
    """A release's timeline entries with ``variant`` taken out of each (those left with none dropped)."""
    out = []
    for item in items if isinstance(items, list) else [items]:
        entry = Entry(key=item) if isinstance(item, str) else item
        rest = tuple(v for v in entry.variants if v != variant)
        if rest:
            out.append(msgspec.structs.replace(entry, variants=rest))
    return out


def place(release: str, variant_name: str, keymap: KeyMap, keyset: KeySet, moved: dict[str, str]):
    """(the lock, the settings the map cannot place): a setting whose key the release lacks is
    made absent in this release, with the reason and the entry that would place it."""
    variant = cast(Variant, variant_name)  # one of keysets.VARIANTS
    unplaced: list[Unplaced] = []
    for _ in range(3):
        try:
            return build_lock(release, variant, keymap, keyset), unplaced
        except LockError as exc:
            names = [line.split(":", 1)[0] for line in str(exc).splitlines()]
            settings = dict(keymap.setting)
            for name in names:
                setting = settings.get(name)
                entry = setting.at(release, variant) if setting is not None else None
                if setting is None or entry is None or any(u.setting == name for u in unplaced):
                    raise
                gone = Unplaced(name, variant, entry.key or "", moved.get(entry.key or "", ""))
                unplaced.append(gone)
                since = dict(setting.since)
                since[release] = _without(since.get(release, []), variant) + [
                    Entry(absent=gone.why(release), variants=(variant,))]
                settings[name] = msgspec.structs.replace(setting, since=since)
            keymap = msgspec.structs.replace(keymap, setting=settings)
    raise LockError(f"verl {release} ({variant}): the key map could not be placed")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def report(base: str, release: str, diffs: dict[str, KeyDiff], built: dict[str, list[str]],
           unplaced: list[Unplaced], limit: int | None = 12) -> list[str]:
    """The release diff as lines; ``limit`` keys per list (None: all)."""
    lines = [f"verl {release} against verl {base}:"]

    def listed(title: str, items: list[str]) -> None:
        lines.append(f"  {title}: {len(items)}")
        shown = items if limit is None else items[:limit]
        lines.extend(f"    {item}" for item in shown)
        if len(shown) < len(items):
            lines.append(f"    ... {len(items) - len(shown)} more")

    for variant, diff in diffs.items():
        lines.append(f" {variant}:")
        listed("keys added", diff.added)
        listed("keys removed", diff.removed)
        listed("keys moved", [f"{a} -> {b}" for a, b in diff.moved.items()])
        listed("defaults changed", [f"{k}: {_shown(a)} -> {_shown(b)}" for k, (a, b) in diff.defaults.items()])
        listed("dataclass sections changed", built.get(variant, []))
    if unplaced:
        lines.append(f" spec settings that need a timeline entry: {len(unplaced)}")
        lines.extend(f"    {u.setting}: {u.why(release)}" for u in unplaced)
    else:
        lines.append(" spec settings that need a timeline entry: none (the key map places every setting)")
    return lines
