"""Reviewing bundles: diff two (or a set), check committed bundles are current, the JSON Schema.
"""

# The package's face (tutorrl/_face.py): the names other packages may import,
# each loaded on first use; the TYPE_CHECKING imports are for editors.
from typing import TYPE_CHECKING

from tutorrl._face import attach

if TYPE_CHECKING:
    from tutorrl.review.check import CheckReport, run_check
    from tutorrl.review.comparison import Compared, compare
    from tutorrl.review.model import Diff, diff_sides
    from tutorrl.review.schema import schema_json
    from tutorrl.review.sides import load_side

_EXPORTS = {
    "check": ("CheckReport", "run_check"),
    "comparison": ("Compared", "compare"),
    "model": ("Diff", "diff_sides"),
    "schema": ("schema_json",),
    "sides": ("load_side",),
}
__getattr__, __dir__ = attach(__name__, _EXPORTS)

__all__ = [
    "CheckReport",
    "Compared",
    "Diff",
    "compare",
    "diff_sides",
    "load_side",
    "run_check",
    "schema_json",
]
