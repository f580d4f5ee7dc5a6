"""The spec language: what a user writes, read and checked.

The msgspec structs of an experiment spec (each field documented where it is
declared), the TOML loader with its located errors, key positions, the
reward plug-in seam, settings (the release-independent form of a spec), and
the layers a spec is written in (bases, sweeps, ``--set``). Nothing here
knows a verl key: that is :mod:`tutorrl.compiler.release`'s.
"""


# The package's face (tutorrl/_face.py): the names other packages may import,
# each loaded on first use; the TYPE_CHECKING imports are for editors.
from typing import TYPE_CHECKING

from tutorrl._face import attach

if TYPE_CHECKING:
    from tutorrl.compiler.spec.flat import flatten_table, settings, variant_of
    from tutorrl.compiler.spec.load import PLACEHOLDER, parse_spec, read_spec_bytes
    from tutorrl.compiler.spec.rewards import available, load_plugin, plugin_fill, plugin_of
    from tutorrl.compiler.spec.structs import Spec, get_field, to_builtins
    from tutorrl.compiler.spec.sweep import Sweep, order_key, shown


_EXPORTS: dict[str, tuple[str, ...]] = {
    "flat": ("flatten_table", "settings", "variant_of"),
    "load": ("PLACEHOLDER", "parse_spec", "read_spec_bytes"),
    "rewards": ("available", "load_plugin", "plugin_fill", "plugin_of"),
    "structs": ("Spec", "get_field", "to_builtins"),
    "sweep": ("Sweep", "order_key", "shown"),
}
__getattr__, __dir__ = attach(__name__, _EXPORTS)

__all__ = [
    "PLACEHOLDER",
    "Spec",
    "Sweep",
    "available",
    "flatten_table",
    "get_field",
    "load_plugin",
    "order_key",
    "parse_spec",
    "plugin_fill",
    "plugin_of",
    "read_spec_bytes",
    "settings",
    "shown",
    "to_builtins",
    "variant_of",
]
