"""How a record names a folder: relative to its bundle's folder, so bundle and checkpoints move together.

A module of its own because both the record writer (record.py) and the lineage
reader (lineage.py) need it, and the lineage is written by the record.
"""

from __future__ import annotations

import os
from pathlib import Path


def relative_to_bundle(path: str | os.PathLike, bundle_path: Path) -> str:
    """``path`` as a record names it: relative to the bundle's folder (both as the file system
    resolves them, so that ``..`` from the bundle leads where it did)."""
    return Path(os.path.relpath(os.path.realpath(path), os.path.realpath(bundle_path))).as_posix()


def recorded_root(root: str, bundle_path: Path) -> Path:
    """Where a record's checkpoint folder is: relative to its bundle's folder (earlier records
    name an absolute path, kept as it is)."""
    if os.path.isabs(root):
        return Path(root)
    # From the bundle's real folder, as `relative_to_bundle` measured it; the name shown is then
    # free of the "<bundle>/../.." detour.
    return Path(os.path.normpath(os.path.join(os.path.realpath(bundle_path), root)))
