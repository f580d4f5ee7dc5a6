"""What tutorrl knows about verl's releases.

The key map (where each setting lives per release, as data in ``keymap/``
with its generated per-release locks), the key sets read out of each
release's wheel (``keysets/``), and how a value is spelled for Hydra and for
a release. Depends on nothing else in the compiler.
"""


# The package's face (tutorrl/_face.py): the names other packages may import,
# each loaded on first use; the TYPE_CHECKING imports are for editors.
from typing import TYPE_CHECKING

from tutorrl._face import attach

if TYPE_CHECKING:
    from tutorrl.compiler.release.added import packaged_releases, user_releases
    from tutorrl.compiler.release.adding import release_files
    from tutorrl.compiler.release.built import load_built
    from tutorrl.compiler.release.entries import find_entry, load_entries, not_entry
    from tutorrl.compiler.release.hydra import render_value
    from tutorrl.compiler.release.keymap import Lock, describe_releases, forget_user_releases, load_keymap, load_lock, settings_writing
    from tutorrl.compiler.release.keyset_import import ImportedKeySet, KeySets, extract_config, fetch_wheel, import_keysets, list_keysets
    from tutorrl.compiler.release.keysets import load_keyset
    from tutorrl.compiler.release.lockgen import LockResult, lock_keys
    from tutorrl.compiler.release.spelling import EVIDENCE_CALLBACK, skipped, spell


_EXPORTS: dict[str, tuple[str, ...]] = {
    "added": ("packaged_releases", "user_releases"),
    "adding": ("release_files",),
    "built": ("load_built",),
    "entries": ("find_entry", "load_entries", "not_entry"),
    "hydra": ("render_value",),
    "keymap": ("Lock", "describe_releases", "forget_user_releases", "load_keymap", "load_lock", "settings_writing"),
    "keyset_import": ("ImportedKeySet", "KeySets", "extract_config", "fetch_wheel", "import_keysets", "list_keysets"),
    "keysets": ("load_keyset",),
    "lockgen": ("LockResult", "lock_keys"),
    "spelling": ("EVIDENCE_CALLBACK", "skipped", "spell"),
}
__getattr__, __dir__ = attach(__name__, _EXPORTS)

__all__ = [
    "EVIDENCE_CALLBACK",
    "ImportedKeySet",
    "KeySets",
    "Lock",
    "LockResult",
    "describe_releases",
    "extract_config",
    "fetch_wheel",
    "find_entry",
    "forget_user_releases",
    "import_keysets",
    "list_keysets",
    "load_built",
    "load_entries",
    "load_keymap",
    "load_keyset",
    "load_lock",
    "lock_keys",
    "not_entry",
    "packaged_releases",
    "release_files",
    "render_value",
    "settings_writing",
    "skipped",
    "spell",
    "user_releases",
]
