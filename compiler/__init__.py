"""The compiler: spec file -> content-hashed launch bundle.

Public surface: :func:`compile_spec`, :func:`write_bundle`,
:func:`verify_bundle`, and the types they return. Everything else in this
package is an implementation detail.
"""

from tutorrl.compiler.bundle import CompiledBundle, Manifest, WriteResult, write_bundle
from tutorrl.compiler.compile import compile_bytes, compile_spec
from tutorrl.compiler.verify import LoadedBundle, verify_bundle

__all__ = [
    "CompiledBundle",
    "LoadedBundle",
    "Manifest",
    "WriteResult",
    "compile_bytes",
    "compile_spec",
    "verify_bundle",
    "write_bundle",
]
