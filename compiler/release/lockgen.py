"""``tutorrl keys lock``: regenerate (or check) the committed per-release locks."""

from __future__ import annotations

import msgspec

from tutorrl.compiler.release.keymap import LockError, VARIANTS, build_lock, encode_lock, load_keymap, lock_path
from tutorrl.errors import InputError, Problem


def expected_locks() -> dict:
    """Every lock the key map implies for the package's releases, as ``{path: bytes}``; raises
    InputError naming each contradiction. A release the user added (``tutorrl keys add``) has
    its locks in the data folder, written by that command, never here."""
    keymap = load_keymap()
    out, problems = {}, []
    from tutorrl.compiler.release.entries import load_entries

    entries = list(load_entries().values())
    for release in keymap.packaged():
        for variant in VARIANTS:
            for entry in entries:
                if not entry.exists_at(release, variant):
                    continue
                try:
                    out[lock_path(release, variant, entry.name)] = encode_lock(
                        build_lock(release, variant, keymap, entry=entry.name))
                except LockError as exc:
                    problems += [Problem(line, file="keymap/verl.toml") for line in str(exc).splitlines()]
    if problems:
        raise InputError(problems, summary=f"{len(problems)} settings need a key-map entry")
    return out


class LockResult(msgspec.Struct, frozen=True):
    """What ``tutorrl keys lock`` found (and, unless ``check``, wrote): lock files changed and stale, by name."""

    checked: bool
    locks: int
    changed: list[str]
    stale: list[str]

    @property
    def current(self) -> bool:
        return not self.changed and not self.stale


def lock_keys(check: bool = False) -> LockResult:
    """Every lock regenerated from the key map; written (stale ones removed) unless ``check``."""
    locks = expected_locks()
    folder = next(iter(locks)).parent
    stale = sorted(p.name for p in folder.glob("verl-*.json") if p not in locks)
    changed = []
    for path, data in sorted(locks.items()):
        old = path.read_bytes() if path.exists() else None
        if old != data:
            changed.append(path.name)
            if not check:
                path.write_bytes(data)
    if not check:
        for name in stale:
            (folder / name).unlink()
    return LockResult(check, len(locks), changed, stale)
