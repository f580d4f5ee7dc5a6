"""Normalising a spec: the reward plug-in fills its fields, and order that carries no meaning is removed.

After this, the spec says everything the plug-in decided (the bundle's
``spec.toml`` is the normalised spec), and reordering a spec's tables or
environment names changes nothing.
"""

from __future__ import annotations

import msgspec

from tutorrl.compiler.spec.structs import Env, Reward, Spec


def normalize(spec: Spec) -> Spec:
    if spec.reward.plugin is not None:
        spec = _apply_plugin(spec)
    env = Env(set=dict(sorted(spec.env.set.items())), passthrough=sorted(spec.env.passthrough),
              allow=sorted(spec.env.allow))
    return _sorted_tables(msgspec.structs.replace(spec, env=env, experiment=_entry_named(spec.experiment)))


def _entry_named(experiment):
    """The entry point by its name (a module path of a known entry becomes the name), and main_ppo
    unsaid: a spec that writes ``entry = "ppo"`` compiles to the bundle of one that does not."""
    if experiment.entry is None:
        return experiment
    from tutorrl.compiler.release import find_entry

    found = find_entry(experiment.entry)
    if found is None:
        return experiment  # refused where its lock is loaded
    return msgspec.structs.replace(experiment, entry=None if found.default else found.name)


def _apply_plugin(spec: Spec) -> Spec:
    from tutorrl.compiler.spec.load import check_values
    from tutorrl.compiler.spec.rewards import plugin_fill, plugin_of
    from tutorrl.errors import Problem, SpecError

    plugin, options = plugin_of(spec)
    reward = msgspec.structs.replace(spec.reward, options=msgspec.to_builtins(options))
    env = spec.env
    fill = plugin_fill(plugin, spec, options)
    # What the plug-in contributes (the user's values win), checked below as
    # the user's own values are: a plug-in once filled a module name, numbers
    # and newlines no user could have written.
    contributed: dict = {}
    refused: list[Problem] = []
    # The reward fields a plug-in fills; the plug-in's own name and options are the user's.
    fillable = set(Reward.__struct_fields__) - {"plugin", "options"}
    for field, value in fill.items():
        section, _, name = field.partition(".")
        if section == "reward" and name in fillable:
            mine = getattr(reward, name)
            if mine is None:
                contributed.setdefault("reward", {})[name] = value
            elif isinstance(mine, dict) and isinstance(value, dict):
                # A table the plug-in fills: the user's entries win one by one.
                contributed.setdefault("reward", {})[name] = {k: v for k, v in value.items() if k not in mine}
            # else: what the user set wins
        elif field == "env.set":
            contributed["env"] = {"set": {k: v for k, v in value.items() if k not in env.set}
                                  if isinstance(value, dict) else value}
        else:
            refused.append(Problem(f"reward plug-in '{plugin.name}' {plugin.version} may not fill {field} (it fills "
                                   "reward.* fields and env.set)", key="reward.plugin",
                                   hint="a fault in the plug-in, not in the spec: tell its authors"))

    def locate(path, message, hint=None):
        return Problem(f"filled by reward plug-in '{plugin.name}' {plugin.version}: {message}",
                       key=".".join(path) or None, hint=hint)

    problems, converted = check_values(contributed, locate)
    refused += problems
    if refused:
        raise SpecError(refused)
    for name in contributed.get("reward", {}):
        mine, value = getattr(reward, name), getattr(converted["reward"], name)
        reward = msgspec.structs.replace(reward, **{name: {**value, **mine} if isinstance(mine, dict) else value})
    if "env" in contributed:
        env = msgspec.structs.replace(env, set={**converted["env"].set, **env.set})
    return msgspec.structs.replace(spec, reward=reward, env=env)


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
