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
    from tutorrl.compiler.release.added import is_user_release, packaged_releases, user_releases
    from tutorrl.compiler.release.adding import release_files
    from tutorrl.compiler.release.built import load_built
    from tutorrl.compiler.release.entries import EntryPoint, find_entry, load_entries
    from tutorrl.compiler.release.hydra import launch_prelude, render_value
    from tutorrl.compiler.release.keymap import (
        Lock,
        Target,
        describe_releases,
        entry_at,
        forget_user_releases,
        load_keymap,
        load_lock,
        release_tuple,
        releases_with,
        settings_writing,
        supported_releases,
    )
    from tutorrl.compiler.release.keyset_import import ImportedKeySet, KeySets, extract_config, fetch_wheel, import_keysets, list_keysets
    from tutorrl.compiler.release.keysets import available_keysets, load_keyset
    from tutorrl.compiler.release.lockgen import LockResult, lock_keys
    from tutorrl.compiler.release.spelling import (
        EVIDENCE_CALLBACK,
        WORDS,
        is_runtime,
        launch_program,
        skipped,
        spell,
    )

_EXPORTS = {
    "added": ("is_user_release", "packaged_releases", "user_releases"),
    "adding": ("release_files",),
    "built": ("load_built",),
    "entries": ("EntryPoint", "find_entry", "load_entries"),
    "hydra": ("launch_prelude", "render_value"),
    "keymap": (
        "Lock",
        "Target",
        "describe_releases",
        "entry_at",
        "forget_user_releases",
        "load_keymap",
        "load_lock",
        "release_tuple",
        "releases_with",
        "settings_writing",
        "supported_releases",
    ),
    "keyset_import": ("ImportedKeySet", "KeySets", "extract_config", "fetch_wheel", "import_keysets", "list_keysets"),
    "keysets": ("available_keysets", "load_keyset"),
    "lockgen": ("LockResult", "lock_keys"),
    "spelling": ("EVIDENCE_CALLBACK", "WORDS", "is_runtime", "launch_program", "skipped", "spell"),
}
__getattr__, __dir__ = attach(__name__, _EXPORTS)

__all__ = [
    "EVIDENCE_CALLBACK",
    "EntryPoint",
    "ImportedKeySet",
    "KeySets",
    "LockResult",
    "Lock",
    "Target",
    "WORDS",
    "available_keysets",
    "describe_releases",
    "entry_at",
    "extract_config",
    "find_entry",
    "fetch_wheel",
    "forget_user_releases",
    "import_keysets",
    "is_runtime",
    "is_user_release",
    "launch_prelude",
    "launch_program",
    "list_keysets",
    "load_built",
    "load_entries",
    "load_keymap",
    "load_keyset",
    "load_lock",
    "lock_keys",
    "packaged_releases",
    "release_files",
    "release_tuple",
    "releases_with",
    "render_value",
    "settings_writing",
    "skipped",
    "spell",
    "supported_releases",
    "user_releases",
]
