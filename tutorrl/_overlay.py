"""Where the verl releases a user added live: the data folder outside the installed package.

``tutorrl keys add X.Y.Z`` reads a verl release's wheel and writes what the
package holds for its own releases -- key sets, dataclass fields, locks, a
stack record -- into ``<data>/verl/X.Y.Z/``, one folder per kind named as the
package names it (``keysets/``, ``built/``, ``lock/``, ``stacks/``), with
``release.toml`` saying what it was made from. ``<data>`` is
``$TUTORRL_DATA_DIR``, else ``$XDG_DATA_HOME/tutorrl``, else
``~/.local/share/tutorrl``; the installed package is never written.

A release's data is a set of files found by name in an ordered list of
folders: the package's folder of that kind first, then the added release's.
A release the package has is never looked up here at all (its files are the
package's, even one it lacks), so an added release never shadows a packaged
one. A folder appears whole or not at all (staged beside it, then renamed), so
a release is either added or absent.

Standard library only: on the compile path (one ``listdir`` when a release is
not the package's).
"""

from __future__ import annotations

import functools
import os
import re

from tutorrl.contract import DATA_DIR_ENV

# What marks a complete added release; written inside the staged folder before its rename.
MARKER = "release.toml"
# The kinds of release data, as the package's own folders are named.
KINDS = ("keysets", "built", "lock", "stacks")
# A release folder's name: what a spec's experiment.verl may say (compiler/spec/structs.py).
# Compiled by re's cache where first used: only a data folder with releases in it needs it.
_RELEASE = r"[0-9]+\.[0-9]+\.[0-9]+(\.post[0-9]+)?\Z"


def root() -> str:
    """The per-user data folder (it may not exist yet)."""
    given = os.environ.get(DATA_DIR_ENV)
    if given:
        return os.path.abspath(os.path.expanduser(given))
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "tutorrl")


def releases_dir() -> str:
    return os.path.join(root(), "verl")


def release_dir(release: str) -> str:
    return os.path.join(releases_dir(), release)


@functools.cache
def added() -> tuple[str, ...]:
    """Every complete release folder of the data folder, packaged or not (sorted by name)."""
    try:
        names = os.listdir(releases_dir())
    except (FileNotFoundError, NotADirectoryError):
        return ()
    return tuple(sorted(n for n in names if re.match(_RELEASE, n)
                        and os.path.isfile(os.path.join(releases_dir(), n, MARKER))))


def forget() -> None:
    """Read the data folder again on the next question (after an add or a remove in this process)."""
    added.cache_clear()


def folders(packaged: str, kind: str, release: str, user: bool) -> list[str]:
    """The folders ``release``'s files of ``kind`` are looked up in, in order: the package's,
    then (``user``: the release is an added one, not the package's) its folder here."""
    return [packaged] + ([os.path.join(release_dir(release), kind)] if user else [])


def find(packaged: str, kind: str, name: str, release: str, user: bool) -> str | None:
    """The first file called ``name`` in :func:`folders`; None when none has it."""
    for folder in folders(packaged, kind, release, user):
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            return path
    return None
