"""Field documentation of msgspec structs, read from their source.

Spec fields (and reward plug-in options) are documented as torchtitan
documents its config: by a string literal right beneath the field::

    train_batch_size: PosInt | None = None
    \"\"\"Prompts per training step.\"\"\"

Python drops such strings when it compiles the class, so they cost the
compile path nothing; this module recovers them from the source with
:mod:`ast` for the tools that show them (``tutorrl schema``). A field without one has no
description; the spec's own fields all have one (a test checks), a plug-in's
are its author's to write. Source that cannot be read (a plug-in shipped as
bytecode only) gives no descriptions rather than an error.
"""

from __future__ import annotations

import ast
import functools
import inspect
import sys

import msgspec


@functools.cache
def _module_classes(module_name: str) -> dict[str, ast.ClassDef]:
    try:
        source = inspect.getsource(sys.modules[module_name])
    except (KeyError, OSError, TypeError):
        return {}
    tree = ast.parse(source)
    classes: dict[str, ast.ClassDef] = {}

    def walk(body, prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                qualname = prefix + node.name
                classes[qualname] = node
                walk(node.body, qualname + ".")

    walk(tree.body, "")
    return classes


def _paragraphs(doc: str) -> str:
    # A docstring wrapped to the line length reads as the one sentence it is.
    return "\n\n".join(" ".join(p.split()) for p in inspect.cleandoc(doc).split("\n\n"))


def _own_docs(cls: type) -> dict[str, str]:
    node = _module_classes(cls.__module__).get(cls.__qualname__)
    if node is None:
        return {}
    docs = {}
    body = node.body
    for stmt, after in zip(body, body[1:]):
        if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)):
            docs[stmt.target.id] = _paragraphs(after.value.value)
    return docs


def field_docs(cls: type[msgspec.Struct]) -> dict[str, str]:
    """Each field's documentation, by its name in TOML (``encode_name``).

    Inherited fields keep the documentation of the class that declares them.
    """
    docs: dict[str, str] = {}
    for base in reversed(cls.__mro__):
        if isinstance(base, type) and issubclass(base, msgspec.Struct) and base is not msgspec.Struct:
            docs.update(_own_docs(base))
    return {info.encode_name: docs[info.name] for info in msgspec.structs.fields(cls) if docs.get(info.name)}
