"""The bundle format: a launch as content-hashed files on disk.

The manifest and its digest, the atomic store, and the text templates the
launch files are filled from. The file and variable names are the contract's
(:mod:`tutorrl.contract`).
"""


# The package's face (tutorrl/_face.py): the names other packages may import,
# each loaded on first use; the TYPE_CHECKING imports are for editors.
from typing import TYPE_CHECKING

from tutorrl._face import attach

if TYPE_CHECKING:
    from tutorrl.compiler.bundle.manifest import CompiledBundle, Manifest, bundle_id
    from tutorrl.compiler.bundle.store import WriteResult, recorded_still_true, write_bundle


_EXPORTS: dict[str, tuple[str, ...]] = {
    "manifest": ("CompiledBundle", "Manifest", "bundle_id"),
    "store": ("WriteResult", "recorded_still_true", "write_bundle"),
}
__getattr__, __dir__ = attach(__name__, _EXPORTS)

__all__ = [
    "CompiledBundle",
    "Manifest",
    "WriteResult",
    "bundle_id",
    "recorded_still_true",
    "write_bundle",
]
