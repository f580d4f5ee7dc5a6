"""Which verl releases the user added (``tutorrl keys add``) that the package does not hold.

The package's releases are those it holds locks for; an added release is a
complete folder of the data folder (:mod:`tutorrl._overlay`) whose name is
none of them. A packaged release is never read from the data folder.
Standard library only: on the compile path.
"""

from __future__ import annotations

import functools
import os

from tutorrl import _overlay

_LOCKS = os.path.join(os.path.dirname(__file__), "keymap", "lock")


def release_order(release: str) -> tuple[int, ...]:
    """``"0.3.0.post1"`` -> ``(0, 3, 0, 1)``; ``"0.9.1"`` -> ``(0, 9, 1, 0)``."""
    main, _, post = release.partition(".post")
    return tuple(int(p) for p in main.split(".")) + (int(post or 0),)


def lock_pairs(folder: str) -> set[tuple[str, str]]:
    """(release, variant) of every ``verl-<release>-<variant>.json`` in ``folder``."""
    pairs: set[tuple[str, str]] = set()
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return pairs
    for name in names:
        # Another entry point's lock (verl-R-V@entry.json) adds no release.
        if name.startswith("verl-") and name.endswith(".json") and "@" not in name:
            release, _, variant = name[len("verl-"):-len(".json")].rpartition("-")
            pairs.add((release, variant))
    return pairs


@functools.cache
def packaged_releases() -> tuple[str, ...]:
    """The releases the package holds locks for (an added release never joins them)."""
    return tuple(sorted({r for r, _ in lock_pairs(_LOCKS)}, key=release_order))


@functools.cache
def user_releases() -> tuple[str, ...]:
    """The releases `tutorrl keys add` added that the package does not hold, in release order."""
    packaged = set(packaged_releases())
    return tuple(sorted((r for r in _overlay.added() if r not in packaged), key=release_order))


def is_user_release(release: str) -> bool:
    return release in user_releases()


def shadowed() -> tuple[str, ...]:
    """Added releases the package now holds itself: their folders are never read."""
    packaged = set(packaged_releases())
    return tuple(r for r in _overlay.added() if r in packaged)


def forget() -> None:
    _overlay.forget()
    user_releases.cache_clear()
