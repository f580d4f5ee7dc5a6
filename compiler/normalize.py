"""Normalising a spec: the reward plug-in fills its fields, and order that carries no meaning is removed.

After this, the spec says everything the plug-in decided (the bundle's
``spec.toml`` is the normalised spec), and reordering a spec's tables or
environment names changes nothing.
"""

from __future__ import annotations

import msgspec

from tutorrl.compiler.spec import Env, Spec


def normalize(spec: Spec) -> Spec:
    if spec.reward.plugin is not None:
        spec = _apply_plugin(spec)
    env = Env(set=dict(sorted(spec.env.set.items())), passthrough=sorted(spec.env.passthrough),
              allow=sorted(spec.env.allow))
    return _sorted_tables(msgspec.structs.replace(spec, env=env))


def _apply_plugin(spec: Spec) -> Spec:
    from tutorrl.compiler.rewards import plugin_of

    plugin, options = plugin_of(spec)
    reward = msgspec.structs.replace(spec.reward, options=msgspec.to_builtins(options))
    env = spec.env
    resources = spec.resources
    for field, value in plugin.normalize(spec, options).items():
        section, _, name = field.partition(".")
        if section == "reward":
            mine = getattr(reward, name)
            if mine is None:
                reward = msgspec.structs.replace(reward, **{name: value})
            elif isinstance(mine, dict) and isinstance(value, dict):
                # A table the plug-in fills: the user's entries win one by one.
                reward = msgspec.structs.replace(reward, **{name: {**value, **mine}})
            # else: what the user set wins
        elif field == "env.set":
            env = msgspec.structs.replace(env, set={**value, **env.set})
        else:
            raise ValueError(f"reward plug-in {plugin.name} may not fill {field}")
    return msgspec.structs.replace(spec, reward=reward, env=env, resources=resources)


def _sorted_tables(struct):
    changes = {}
    for name in struct.__struct_fields__:
        value = getattr(struct, name)
        if isinstance(value, msgspec.Struct):
            new = _sorted_tables(value)
            if new is not value:
                changes[name] = new
        elif isinstance(value, dict):
            changes[name] = _sort_dict(value)
    return msgspec.structs.replace(struct, **changes) if changes else struct


def _sort_dict(value):
    if isinstance(value, dict):
        return {k: _sort_dict(value[k]) for k in sorted(value)}
    return value
