"""Reading existing verl launches: run a launch script under real bash in a jail
and capture what it launches (:mod:`tutorrl.importer.capture`), then write it as a spec
(:mod:`tutorrl.importer.launch`).

The face (tutorrl/_face.py): what ``tutorrl.api.import_script`` calls, loaded on first use."""

from typing import TYPE_CHECKING

from tutorrl._face import attach

if TYPE_CHECKING:
    from tutorrl.importer.launch import ImportOptions, Imported, import_script

_EXPORTS: dict[str, tuple[str, ...]] = {
    "launch": ("ImportOptions", "Imported", "import_script"),
}
__getattr__, __dir__ = attach(__name__, _EXPORTS)

__all__ = [
    "ImportOptions",
    "Imported",
    "import_script",
]
