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
    from tutorrl.compiler.spec.compose import (
        Composed,
        EXTENDS,
        Layer,
        SET_NAME,
        SWEEP,
        WrittenAt,
        field_type,
        might_compose,
        path_problem,
        put,
        split_path,
        typed_value,
    )
    from tutorrl.compiler.spec.flat import NOT_SETTINGS, flatten_table, settings, variant_of
    from tutorrl.compiler.spec.load import Locator, parse_spec, parse_toml, read_spec_bytes, struct_in, validate_data
    from tutorrl.compiler.spec.normal_form import normalize
    from tutorrl.compiler.spec.rewards import available, load_plugin, plugin_fill, plugin_of, plugin_rules
    from tutorrl.compiler.spec.structs import Spec, get_field, to_builtins
    from tutorrl.compiler.spec.sweep import Point, Sweep, expand, order_key, shown

_EXPORTS = {
    "compose": (
        "Composed",
        "EXTENDS",
        "Layer",
        "SET_NAME",
        "SWEEP",
        "WrittenAt",
        "field_type",
        "might_compose",
        "path_problem",
        "put",
        "split_path",
        "typed_value",
    ),
    "flat": ("NOT_SETTINGS", "flatten_table", "settings", "variant_of"),
    "load": ("Locator", "parse_spec", "parse_toml", "read_spec_bytes", "struct_in", "validate_data"),
    "normal_form": ("normalize",),
    "rewards": ("available", "load_plugin", "plugin_fill", "plugin_of", "plugin_rules"),
    "structs": ("Spec", "get_field", "to_builtins"),
    "sweep": ("Point", "Sweep", "expand", "order_key", "shown"),
}
__getattr__, __dir__ = attach(__name__, _EXPORTS)

__all__ = [
    "Composed",
    "EXTENDS",
    "Layer",
    "Locator",
    "NOT_SETTINGS",
    "Point",
    "SET_NAME",
    "SWEEP",
    "Spec",
    "Sweep",
    "WrittenAt",
    "available",
    "expand",
    "field_type",
    "flatten_table",
    "get_field",
    "load_plugin",
    "might_compose",
    "normalize",
    "order_key",
    "parse_spec",
    "parse_toml",
    "path_problem",
    "plugin_fill",
    "plugin_of",
    "plugin_rules",
    "put",
    "read_spec_bytes",
    "settings",
    "shown",
    "split_path",
    "struct_in",
    "to_builtins",
    "typed_value",
    "validate_data",
    "variant_of",
]
