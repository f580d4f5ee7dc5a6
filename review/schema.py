"""JSON Schema of spec files, for editors (Taplo / Even Better TOML) and tools.

Generated from the very structs the compiler validates with, so the editor and
``tutorrl compile`` cannot disagree about a field's type, range or choices.
msgspec's output is adapted for TOML: TOML has no null, so the ``| None``
branches (which mean "leave it out") are dropped, and the root is inlined
because some editors do not follow a root ``$ref``. Cross-field rules (batch
sizes divide, GPU layouts fit) stay in the compiler: a schema cannot say them.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from tutorrl.compiler.spec import Spec

DRAFT = "https://json-schema.org/draft/2020-12/schema"
TITLE = "tutorrl experiment spec"


def _strip_null(node: Any) -> Any:
    if isinstance(node, list):
        return [_strip_null(n) for n in node]
    if not isinstance(node, dict):
        return node
    node = {k: _strip_null(v) for k, v in node.items()}
    if "anyOf" in node:
        branches = [b for b in node["anyOf"] if b != {"type": "null"}]
        if len(branches) == 1:
            del node["anyOf"]
            # The one branch left carries the constraints; the wrapper keeps
            # its description (msgspec puts it outside the anyOf).
            node = {**branches[0], **node}
        else:
            node["anyOf"] = branches
    if node.get("default", 0) is None:
        del node["default"]
    if node.get("type") == "object" and "properties" in node:
        # forbid_unknown_fields on every struct: an editor must flag typos too.
        node.setdefault("additionalProperties", False)
        if not node.get("required"):
            node.pop("required", None)
    return node


def spec_schema() -> dict:
    base = msgspec.json.schema(Spec)
    defs = _strip_null(base["$defs"])
    root = defs.pop("Spec")
    root.pop("title", None)
    root.pop("description", None)
    return {
        "$schema": DRAFT,
        "title": TITLE,
        "description": "One tutorrl experiment (a spec TOML file), compiled by `tutorrl compile` into a verl launch bundle.",
        **root,
        "$defs": defs,
    }


def schema_json() -> str:
    return json.dumps(spec_schema(), indent=2, ensure_ascii=False) + "\n"
