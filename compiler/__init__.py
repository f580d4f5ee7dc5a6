"""The compiler: spec file -> content-hashed launch bundle.

Three materials and the pipeline between them, one sub-package each:

* :mod:`~tutorrl.compiler.spec` -- the spec language (structs, loader, layers);
* :mod:`~tutorrl.compiler.release` -- what tutorrl knows of verl's releases
  (key map, locks, key sets, Hydra spelling);
* :mod:`~tutorrl.compiler.bundle` -- the bundle format (manifest, store, templates);
* :mod:`~tutorrl.compiler.pipeline` -- spec to bundle and back (compile,
  resolve, rules, effective values, roots, family, migrate, verify).

Public surface: :func:`compile_spec`, :func:`write_bundle`,
:func:`verify_bundle`, and the types they return. ``commands.py`` and
``keys_commands.py`` register the command-line verbs.
"""

# Loaded on first use (PEP 562): `tutorrl compile` needs compile and the
# store, not verify; each import is part of every cold compile's time.
from typing import TYPE_CHECKING

from tutorrl._face import attach

if TYPE_CHECKING:
    from tutorrl.compiler.bundle import CompiledBundle, WriteResult, write_bundle
    from tutorrl.compiler.pipeline import (
        CompiledFiles,
        LoadedBundle,
        compile_bytes,
        compile_family,
        compile_files,
        compile_spec,
        verify_bundle,
    )

_EXPORTS = {
    "bundle": ("CompiledBundle", "WriteResult", "write_bundle"),
    "pipeline": ("CompiledFiles", "LoadedBundle", "compile_bytes", "compile_family", "compile_files", "compile_spec",
                 "verify_bundle"),
}
__getattr__, __dir__ = attach(__name__, _EXPORTS)

__all__ = [
    "CompiledBundle",
    "CompiledFiles",
    "LoadedBundle",
    "WriteResult",
    "compile_bytes",
    "compile_family",
    "compile_files",
    "compile_spec",
    "verify_bundle",
    "write_bundle",
]
