"""JSON Schema of spec files, for editors (Taplo / Even Better TOML) and tools.

Generated from the very structs the compiler validates with, so the editor and
``tutorrl compile`` cannot disagree about a field's type, range or choices.
msgspec's output is adapted for TOML and for editors:

* TOML has no null, so the ``| None`` branches (which mean "leave it out",
  i.e. verl's default) are dropped;
* the root is inlined, because some editors do not follow a root ``$ref``;
* patterns end in ``$`` instead of Python's ``\\Z``: JSON Schema patterns are
  ECMA-262 regular expressions, where ``\\Z`` is a literal ``Z`` and ``$``
  (without the multiline flag) is the end of the input -- what ``\\Z`` means
  to the compiler.

``[reward.options]`` is checked against the options struct of the plug-in that
``reward.plugin`` names, for every reward plug-in installed where the schema is
generated (``$defs`` ``reward-plugin:<name>.<struct>``, chosen with ``if``/``then``),
and ``reward.plugin`` offers exactly those plug-ins -- as ``tutorrl compile``
in the same environment would. Cross-field rules (batch sizes divide, GPU
layouts fit) stay in the compiler: a schema cannot say them.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import msgspec.inspect

from tutorrl.compiler.spec import Spec
from tutorrl.review.fielddocs import field_docs

DRAFT = "https://json-schema.org/draft/2020-12/schema"
# The schema's identity (editors key their caches on it; its internal $refs
# resolve against it). One name for the spec format, whichever plug-ins are installed.
SCHEMA_ID = "https://tutorrl.dev/schema/spec.json"
TITLE = "tutorrl experiment spec"
PLUGIN_DEF = "reward-plugin:{name}"


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
    if isinstance(node.get("pattern"), str):
        node["pattern"] = ecma_pattern(node["pattern"])
    if node.get("type") == "object" and "properties" in node:
        # forbid_unknown_fields on every struct: an editor must flag typos too.
        node.setdefault("additionalProperties", False)
        if not node.get("required"):
            node.pop("required", None)
    elif node.get("type") == "object" and "additionalProperties" not in node:
        # A free-form table (reward.kwargs, rollout.engine_kwargs, reward.options
        # before its plug-in's if/then, ...): said open in so many words, since
        # strict editors (tombi) take an object that does not say so for closed,
        # and warned on every key of every committed example.
        node["additionalProperties"] = True
    return node


def ecma_pattern(pattern: str) -> str:
    """A compiler (Python) pattern as JSON Schema reads it: ``\\Z`` -> ``$``."""
    if pattern.endswith("\\Z") and not pattern.endswith("\\\\Z"):
        return pattern[:-2] + "$"
    return pattern


def _struct_classes(root: type) -> dict[str, type]:
    """Every struct class reachable from ``root``, by its name (msgspec's ``$defs`` key)."""
    found: dict[str, type] = {}

    def walk(node: Any) -> None:
        if isinstance(node, tuple):
            for item in node:
                walk(item)
        elif isinstance(node, msgspec.inspect.StructType):
            if node.cls.__name__ not in found:
                found[node.cls.__name__] = node.cls
                for info in node.fields:
                    walk(info.type)
        elif isinstance(node, msgspec.inspect.Type):
            for name in node.__struct_fields__:
                walk(getattr(node, name))

    walk(msgspec.inspect.type_info(root))
    return found


def _describe_fields(defs: dict, root: type, prefix: str = "") -> None:
    """Put each field's documentation (the string beneath it in the source) on its property."""
    for name, cls in _struct_classes(root).items():
        properties = defs[prefix + name].get("properties", {})
        for field, doc in field_docs(cls).items():
            properties[field]["description"] = doc


def _plugins() -> list[tuple[str, Any]]:
    from tutorrl.compiler.spec import available, load_plugin

    return [(name, load_plugin(name)) for name in available()]


def _plugin_defs(defs: dict, reward: dict) -> None:
    """Each installed plug-in's options, selected by ``reward.plugin``."""
    plugins = _plugins()
    if not plugins:
        return
    branches = []
    for name, plugin in plugins:
        prefix = PLUGIN_DEF.format(name=name)
        (ref,), components = msgspec.json.schema_components(
            [plugin.Options], ref_template="#/$defs/" + prefix + ".{name}")
        for title, component in _strip_null(components).items():
            defs[f"{prefix}.{title}"] = component
        _describe_fields(defs, plugin.Options, prefix + ".")
        options = defs[ref["$ref"].rsplit("/", 1)[1]]
        options["description"] = (f"Options of the reward plug-in {name} ({plugin.version})"
                                  + (f": {options['description']}" if options.get("description") else "."))
        branches.append({
            "if": {"properties": {"plugin": {"const": name}}, "required": ["plugin"]},
            "then": {"properties": {"options": ref}},
        })
    reward["properties"]["plugin"]["enum"] = [name for name, _ in plugins]
    reward["properties"]["plugin"]["description"] += " Installed here: " + ", ".join(n for n, _ in plugins) + "."
    reward["allOf"] = branches


def _composition(defs: dict, root: dict) -> None:
    """``[experiment] extends`` and ``[sweep]``: what a spec is composed of, which the
    compiler reads before the spec's own structs (tutorrl.compiler.spec.compose, .sweep)."""
    from tutorrl.compiler.spec import Sweep

    experiment = defs["Experiment"]
    experiment["properties"]["extends"] = {
        "type": "string", "minLength": 1,
        "description": ("A base spec this one extends, as a path relative to this file: its tables merge with "
                        "this spec's key by key, an array here replaces the base's. A base may extend another; "
                        "a cycle is refused."),
    }
    # A spec that extends a base may take its release from it.
    experiment.pop("required", None)
    experiment["anyOf"] = [{"required": ["verl"]}, {"required": ["extends"]}]
    (ref,), components = msgspec.json.schema_components([Sweep], ref_template="#/$defs/{name}")
    sweep = _strip_null(components["Sweep"])
    for field, doc in field_docs(Sweep).items():
        part = sweep["properties"][field]
        part["description"] = doc
        # Keys are dotted spec settings; each takes a non-empty array of values.
        part["propertyNames"] = {"pattern": r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$"}
        part["additionalProperties"] = {**part.get("additionalProperties", {}), "minItems": 1}
        part.pop("default", None)
    sweep.pop("title", None)
    sweep["description"] = ("The launches this spec names: one bundle per point, each experiment named after its "
                            "point. " + (sweep.get("description") or ""))
    sweep["additionalProperties"] = False
    defs["Sweep"] = sweep
    root["properties"]["sweep"] = {"$ref": "#/$defs/Sweep"}


def spec_schema() -> dict:
    base = msgspec.json.schema(Spec)
    defs = _strip_null(base["$defs"])
    _describe_fields(defs, Spec)
    root = defs.pop("Spec")
    root.pop("title", None)
    root.pop("description", None)
    reward = defs["Reward"]
    # Options without a plug-in are refused by the compiler (reward.options).
    reward["dependentRequired"] = {"options": ["plugin"]}
    _plugin_defs(defs, reward)
    _composition(defs, root)
    return {
        "$schema": DRAFT,
        "$id": SCHEMA_ID,
        "title": TITLE,
        "description": ("One tutorrl experiment (a spec TOML file), compiled by `tutorrl compile` into a verl "
                        "launch bundle. Only experiment.verl is required: every verl setting left out keeps "
                        "verl's own default for that release."),
        **root,
        "$defs": dict(sorted(defs.items())),
    }


def schema_json() -> str:
    return json.dumps(spec_schema(), indent=2, ensure_ascii=False) + "\n"
