"""Spec -> settings: the release-independent form every later step reads.

A setting's name is the dotted path of its spec field; its value is what the
user wrote. Unset fields (``None``) are not settings at all -- verl's default
applies -- which is what keeps a launch exactly what the spec says. Table
fields (dicts verl reads whole) are one setting whose value is the dict.
"""

from __future__ import annotations

import msgspec

from tutorrl.compiler.spec.structs import Spec

Variant = str  # "fsdp" | "megatron"

# Spec fields that are tutorrl's own, not verl settings: they choose the
# release and config, the GPUs outside verl's pool, the reward plug-in, the
# environment and the raw escape hatch.
NOT_SETTINGS = frozenset({
    "experiment.verl", "experiment.config_name", "experiment.config_path", "experiment.entry", "experiment.recipe",
    "resources.reward_gpus", "reward.plugin", "reward.options", "env", "verl", "evidence", "run", "roots",
})


def variant_of(spec: Spec) -> Variant:
    """FSDP or Megatron: which of verl's trainer configs the spec composes."""
    return "megatron" if spec.actor.strategy == "megatron" else "fsdp"


def settings(spec: Spec) -> list[tuple[str, object]]:
    """The spec as ``(setting, value)`` pairs, in spec order."""
    out: list[tuple[str, object]] = []
    _walk(spec, "", out)
    # The Megatron strategy is said by choosing verl's Megatron config.
    return [(s, v) for s, v in out if not (s == "actor.strategy" and v == "megatron")]


def _walk(struct: msgspec.Struct, prefix: str, out: list) -> None:
    for name in struct.__struct_fields__:
        path = prefix + name
        if path in NOT_SETTINGS:
            continue
        value = getattr(struct, name)
        if value is None:
            continue
        if isinstance(value, msgspec.Struct):
            _walk(value, path + ".", out)
        else:
            out.append((path, value))


def flatten_table(table: dict, prefix: str = "") -> list[tuple[str, object]]:
    """``{"a": {"b": 1}, "c": 2}`` -> ``[("a.b", 1), ("c", 2)]``, sorted."""
    out: list[tuple[str, object]] = []
    for key in sorted(table):
        value = table[key]
        if isinstance(value, dict) and value:
            out += flatten_table(value, f"{prefix}{key}.")
        else:
            out.append((prefix + key, value))
    return out
