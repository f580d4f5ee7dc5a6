"""The pipeline: a spec through a release's knowledge to a bundle, and back.

compile (parse, normalise, rules, resolve, assemble), the values verl will
see (effective), roots, a spec's family (bases, sweep points), migration
between releases, and verifying a bundle by re-deriving it.
"""


# The package's face (tutorrl/_face.py): the names other packages may import,
# each loaded on first use; the TYPE_CHECKING imports are for editors.
from typing import TYPE_CHECKING

from tutorrl._face import attach

if TYPE_CHECKING:
    from tutorrl.compiler.pipeline.assemble import spec_settings
    from tutorrl.compiler.pipeline.compile import compile_bytes, resolve_bytes
    from tutorrl.compiler.pipeline.effective_values import Effective, effective, gpu_pool
    from tutorrl.compiler.pipeline.family import CompiledPoint, bases_of, compile_family, compile_raw, compile_spec, compose, might_compose, read_chain
    from tutorrl.compiler.pipeline.from_files import CompiledFiles, compile_files
    from tutorrl.compiler.pipeline.migrate import Migrated, migrate_file
    from tutorrl.compiler.pipeline.resolve import check_extra, interpolated, interpolated_into, never_read
    from tutorrl.compiler.pipeline.roots import expand, reference, references
    from tutorrl.compiler.pipeline.rules import RESERVED_ENV_PREFIX, bash_changes, looks_secret, takes_over
    from tutorrl.compiler.pipeline.verify import LoadedBundle, require_bundle_folder, verify_bundle


_EXPORTS: dict[str, tuple[str, ...]] = {
    "assemble": ("spec_settings",),
    "compile": ("compile_bytes", "resolve_bytes"),
    "effective_values": ("Effective", "effective", "gpu_pool"),
    "family": ("CompiledPoint", "bases_of", "compile_family", "compile_raw", "compile_spec", "compose", "might_compose", "read_chain"),
    "from_files": ("CompiledFiles", "compile_files"),
    "migrate": ("Migrated", "migrate_file"),
    "resolve": ("check_extra", "interpolated", "interpolated_into", "never_read"),
    "roots": ("expand", "reference", "references"),
    "rules": ("RESERVED_ENV_PREFIX", "bash_changes", "looks_secret", "takes_over"),
    "verify": ("LoadedBundle", "require_bundle_folder", "verify_bundle"),
}
__getattr__, __dir__ = attach(__name__, _EXPORTS)

__all__ = [
    "CompiledFiles",
    "CompiledPoint",
    "Effective",
    "LoadedBundle",
    "Migrated",
    "RESERVED_ENV_PREFIX",
    "bases_of",
    "bash_changes",
    "check_extra",
    "compile_bytes",
    "compile_family",
    "compile_files",
    "compile_raw",
    "compile_spec",
    "compose",
    "effective",
    "expand",
    "gpu_pool",
    "interpolated",
    "interpolated_into",
    "looks_secret",
    "might_compose",
    "migrate_file",
    "never_read",
    "read_chain",
    "reference",
    "references",
    "require_bundle_folder",
    "resolve_bytes",
    "spec_settings",
    "takes_over",
    "verify_bundle",
]
