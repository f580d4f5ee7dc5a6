"""``tutorrl export``: a bundle as another launcher's job (KubeRay, SkyPilot, Slurm).

The face (tutorrl/_face.py): what ``tutorrl.api.export`` calls, loaded on first use."""

from typing import TYPE_CHECKING

from tutorrl._face import attach

if TYPE_CHECKING:
    from tutorrl.export.make import Exported, export
    from tutorrl.export.options import ExportOptions

_EXPORTS: dict[str, tuple[str, ...]] = {
    "make": ("Exported", "export"),
    "options": ("ExportOptions",),
}
__getattr__, __dir__ = attach(__name__, _EXPORTS)

__all__ = [
    "ExportOptions",
    "Exported",
    "export",
]
