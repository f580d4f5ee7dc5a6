"""A package's face: the names it offers other packages, each loaded on first use.

Every package keeps its face in its ``__init__.py`` as a table of which
module defines each name; :func:`attach` turns the table into the module's
``__getattr__`` and ``__dir__`` (PEP 562), so importing a package runs no
module of it until a name is asked for. ``tests/cli/test_import_graph.py``
holds the rule that packages meet only through these faces.
"""

import sys


def attach(package: str, exports: dict[str, tuple[str, ...]]):
    """``(__getattr__, __dir__)`` for ``package``, whose ``exports`` maps a
    module (relative to the package) to the names it defines."""
    where = {name: f"{package}.{module}" for module, names in exports.items() for name in names}

    def __getattr__(name: str):
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        # __import__ + sys.modules: importlib.import_module costs a cold start more.
        __import__(module)
        value = getattr(sys.modules[module], name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return __getattr__, __dir__
