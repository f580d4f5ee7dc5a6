"""The compiler: spec file -> content-hashed launch bundle.

Public surface: :func:`compile_spec`, :func:`write_bundle`,
:func:`verify_bundle`, and the types they return. Everything else in this
package is an implementation detail.
"""

# Imported on first use (PEP 562): `tutorrl compile` needs compile and
# bundle, not verify; each import is part of every cold compile's time.
_EXPORTS = {
    "CompiledBundle": "bundle",
    "Manifest": "bundle",
    "WriteResult": "bundle",
    "write_bundle": "bundle",
    "compile_bytes": "compile",
    "compile_spec": "family",
    "compile_family": "family",
    "LoadedBundle": "verify",
    "verify_bundle": "verify",
}


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    __import__(f"{__name__}.{module}")
    value = getattr(globals()[module], name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


__all__ = [
    "CompiledBundle",
    "LoadedBundle",
    "Manifest",
    "WriteResult",
    "compile_bytes",
    "compile_family",
    "compile_spec",
    "verify_bundle",
    "write_bundle",
]
