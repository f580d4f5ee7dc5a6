"""tutorrl: compile RL post-training specs into verl launch bundles and run them on Ray.

Two public surfaces: the ``tutorrl`` command (``tutorrl.cli``), and the
Python API below (``tutorrl.compile``, ``write``, ``verify``, ``run``, ... one
function or more for every command; documented in ``docs/api.md``, defined in
:mod:`tutorrl.api`), which the command is made of. Its errors are in
:mod:`tutorrl.errors`; the bundle's file and variable names in
:mod:`tutorrl.contract`. Everything else is internal.
"""

__version__ = "0.1.0"

# In a source checkout tutorrl's sub-packages are the folders beside this one
# (pyproject's package-dir maps compiler/ to tutorrl.compiler, ...); installed,
# they are inside it. Run from a checkout's root, `python -m tutorrl` finds this
# folder first whatever is installed, so without this it found no
# tutorrl.compiler at all: look beside, where they are not inside.
import os as _os

_here = _os.path.dirname(__file__)
if not _os.path.isdir(_os.path.join(_here, "compiler")):
    __path__.append(_os.path.dirname(_here))  # noqa: F821 (a package's __path__)
del _os, _here

# The API, imported on first use (PEP 562): `tutorrl compile` starts through
# this file, and must not pay for what it does not call.
__all__ = ["ExportOptions", "ImportOptions", "Run", "RunOptions", "Verification", "add_checkpoint", "anchor", "check",
           "compare", "compile", "compile_family", "compile_files", "diff", "evidence_records", "export_bundle", "import_script", "keygen", "keys_add",
           "keys_import", "keys_list", "keys_lock", "keys_remove", "load", "logs", "migrate", "model", "run", "run_set",
           "runs", "schema", "status", "stop", "verify", "write"]
_API = {"RunOptions": "tutorrl.runtime.options"}


def __getattr__(name: str):
    if name not in __all__:
        raise AttributeError(f"module 'tutorrl' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_API.get(name, "tutorrl.api")), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
