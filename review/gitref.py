"""A file as committed on a git ref (``git show REF:path``), for ``diff --against``."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tutorrl.errors import InputError, Problem


def _git(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=False)
    except FileNotFoundError:
        raise InputError([Problem("git is not installed; --against needs it")]) from None


def read_at_ref(path: str | Path, ref: str) -> bytes:
    """The bytes of ``path`` as committed on ``ref``; ``path`` is relative to the current folder."""
    p = Path(path)
    if ref.startswith("-"):
        # Would be taken as an option by git.
        raise InputError([Problem(f"'{ref}' is not a git ref", key="--against")])
    # Run git in the file's own folder so that "./name" resolves from there,
    # whatever the current directory and wherever the repository root is.
    folder = (p.parent if str(p.parent) else Path(".")).resolve()
    if not folder.is_dir():
        raise InputError([Problem("no such folder", file=str(p.parent))])
    inside = _git(["rev-parse", "--is-inside-work-tree"], folder)
    if inside.returncode != 0:
        raise InputError([Problem("not inside a git repository; --against needs one", file=str(path))])
    verified = _git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], folder)
    if verified.returncode != 0:
        raise InputError([Problem(f"git has no commit '{ref}'", key="--against")])
    shown = _git(["show", f"{ref}:./{p.name}"], folder)
    if shown.returncode != 0:
        raise InputError([Problem(f"does not exist on {ref} (a new spec has nothing to compare with)",
                                  file=str(path))])
    return shown.stdout
