"""What is being committed: files as they stand in the git index.

``tutorrl check --staged`` (the pre-commit hook) must judge the commit, not
the work tree: a spec edited and staged while its recompiled bundle sits
unstaged on disk would pass a work-tree check and still commit a stale pair.
Paths are relative to the current folder, as git prints them by default.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from tutorrl.errors import TutorrlError

REGULAR_MODES = ("100644", "100755")


@dataclass(frozen=True)
class IndexEntry:
    path: str  # relative to the current folder
    mode: str
    sha: str


def _git(args: list[str], stdin: bytes | None = None) -> bytes:
    try:
        proc = subprocess.run(["git", *args], input=stdin, capture_output=True, check=False)
    except FileNotFoundError:
        raise TutorrlError("git is not installed; --staged reads the git index") from None
    if proc.returncode != 0:
        message = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise TutorrlError(f"git {args[0]} failed: {message[-1] if message else f'exit {proc.returncode}'}")
    return proc.stdout


def require_repository() -> None:
    try:
        _git(["rev-parse", "--is-inside-work-tree"])
    except TutorrlError:
        raise TutorrlError("not inside a git repository; --staged checks what `git commit` would commit") from None


def staged_entries(folder: str | Path) -> list[IndexEntry]:
    """Every index entry under ``folder``; an unresolved merge conflict is an error."""
    out = _git(["ls-files", "--stage", "-z", "--", str(folder)])
    entries: list[IndexEntry] = []
    conflicted: set[str] = set()
    for record in out.split(b"\0"):
        if not record:
            continue
        meta, _, raw_path = record.partition(b"\t")
        mode, sha, stage = meta.decode().split()
        path = raw_path.decode("utf-8", "surrogateescape")
        if stage != "0":
            conflicted.add(path)
            continue
        entries.append(IndexEntry(path, mode, sha))
    if conflicted:
        raise TutorrlError("unmerged in the index (resolve the conflict, then `git add` them): "
                           + ", ".join(sorted(conflicted)))
    return entries


def read_blobs(shas: list[str]) -> dict[str, bytes]:
    """The contents of ``shas``, in one ``git cat-file --batch``."""
    wanted = sorted(set(shas))
    if not wanted:
        return {}
    out = _git(["cat-file", "--batch"], stdin="".join(f"{s}\n" for s in wanted).encode())
    blobs: dict[str, bytes] = {}
    pos = 0
    for sha in wanted:
        end = out.index(b"\n", pos)
        header = out[pos:end].decode().split()
        if len(header) != 3:
            raise TutorrlError(f"git cat-file: object {sha} is missing from the repository")
        size = int(header[2])
        blobs[sha] = out[end + 1:end + 1 + size]
        pos = end + 1 + size + 1
    return blobs


def tracked(path: str | Path) -> bool | None:
    """Whether git tracks anything under ``path``; None outside a repository."""
    try:
        return bool(_git(["ls-files", "-z", "--", str(path)]))
    except TutorrlError:
        return None


def tracked_children(folder: str | Path) -> set[str] | None:
    """The names directly under ``folder`` that git tracks anything under, in
    one ``git ls-files`` (:func:`tracked` asks once per path); None outside a repository."""
    import os

    try:
        out = _git(["ls-files", "-z", "--", str(folder)])
    except TutorrlError:
        return None
    names = set()
    for path in out.decode("utf-8", "surrogateescape").split("\0"):
        if path:
            first = os.path.relpath(path, folder).split(os.sep, 1)[0]
            if first not in ("", ".", ".."):
                names.add(first)
    return names
