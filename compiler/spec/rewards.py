"""The reward plug-in seam.

The core spec speaks verl's reward vocabulary only (module, function, kwargs,
workers, manager, reward model). Anything a team builds on top -- a reward
model on a GPU of its own, a prompted judge, domain constants -- is a
*plug-in*: a Python object registered under the entry-point group
``tutorrl.rewards``, selected with ``[reward] plugin = "<name>"`` and
configured under ``[reward.options]``, which are checked against the
plug-in's own msgspec struct with the same located errors as the core spec.

A plug-in only ever *fills in the spec*: its :meth:`RewardPlugin.normalize`
returns core fields (reward module, function, kwargs, workers, environment),
so the bundle's normalised ``spec.toml`` shows everything it decided, and the
plug-in's name and version are recorded in the manifest.
"""

from __future__ import annotations

import functools
from typing import Protocol, runtime_checkable

import msgspec

from tutorrl.errors import Finding, Problem, SpecError

GROUP = "tutorrl.rewards"

# What a plug-in's rules return: plain tuples, so a plug-in imports nothing of tutorrl to say them.
PluginFinding = tuple[str, str, "str | None"]


@runtime_checkable
class RewardPlugin(Protocol):
    """What a reward plug-in provides. Paths in findings are relative to ``reward.options``."""

    name: str
    version: str
    Options: type[msgspec.Struct]

    def normalize(self, spec, options) -> dict:
        """Core spec fields to fill, as ``{"reward.module": ..., "reward.kwargs": {...}, "env.set": {...}}``.

        Fields the user set win; the plug-in only fills what is unset.
        """

    def rules(self, spec, options) -> list[PluginFinding]:
        """Cross-field problems, as ``(dotted key from the spec root, message, hint)``."""

    def paths(self, options) -> list[tuple[str, str]]:
        """Local files the reward reads, as ``(dotted key, path)``, for the run preflight."""


# The plug-ins this distribution registers (pyproject.toml, group
# tutorrl.rewards), resolved without scanning every installed distribution's
# metadata -- importlib.metadata would cost every compile. A test keeps
# this equal to the registered entry points; any other name is looked up there.
BUILTIN = {
    "chess-simulator": "tutorrl.plugins.chess:SIMULATOR",
    "chess-prompted": "tutorrl.plugins.chess:PROMPTED",
}


class _Builtin:
    def __init__(self, name: str, value: str):
        self.name, self.value = name, value

    def load(self):
        import sys

        module, _, attr = self.value.partition(":")
        # __import__ + sys.modules: importlib's own import is a cold compile's cost.
        __import__(module)
        return getattr(sys.modules[module], attr)


@functools.cache
def _entry_points() -> dict[str, object]:
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=GROUP)}


def available() -> list[str]:
    return sorted(set(_entry_points()) | set(BUILTIN))


def plugin_of(spec) -> tuple[RewardPlugin, msgspec.Struct]:
    """The spec's plug-in and its typed options (the spec names one: ``reward.plugin`` is set)."""
    plugin = load_plugin(spec.reward.plugin)
    return plugin, msgspec.convert(spec.reward.options or {}, plugin.Options)


@functools.cache
def load_plugin(name: str) -> RewardPlugin:
    """The plug-in registered as ``name``; a clear error when none is."""
    entry = _Builtin(name, BUILTIN[name]) if name in BUILTIN else _entry_points().get(name)
    if entry is None:
        import difflib

        near = difflib.get_close_matches(name, available(), n=1, cutoff=0.5)
        raise SpecError([Problem(
            f"no reward plug-in named '{name}' is installed (entry-point group {GROUP})",
            key="reward.plugin",
            hint=f"did you mean '{near[0]}'?" if near else (
                f"installed: {', '.join(available())}" if available() else "install the package that provides it"))])
    try:
        plugin = entry.load()
    except Exception as exc:  # a third party's import: any fault in it is named, never a traceback
        raise SpecError([Problem(f"the reward plug-in '{name}' ({entry.value}) could not be loaded: {_said(exc)}",
                                 key="reward.plugin", hint=_THEIRS)]) from None
    options = getattr(plugin, "Options", None)
    if not isinstance(plugin, RewardPlugin) or not (isinstance(options, type) and issubclass(options, msgspec.Struct)):
        raise SpecError([Problem(f"the entry point '{name}' ({entry.value}) is not a tutorrl reward plug-in",
                                 key="reward.plugin")])
    return plugin


# What a broken plug-in's message ends with: the fault is not in the user's spec.
_THEIRS = "a fault in the plug-in, not in the spec: tell its authors"


def _said(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _failed(plugin, what: str, why: str) -> SpecError:
    return SpecError([Problem(f"reward plug-in '{plugin.name}' {plugin.version} {what}: {why}", key="reward.plugin",
                              hint=_THEIRS)])


def plugin_fill(plugin: RewardPlugin, spec, options) -> dict:
    """``plugin.normalize``'s answer, checked for shape: ``{"section.field": value}``.

    A plug-in is a third party's code: whatever it raises (tutorrl's own
    errors aside) or returns that is not a table of fields is a located
    problem that names it, never a traceback.
    """
    try:
        fill = plugin.normalize(spec, options)
    except SpecError:
        raise
    except Exception as exc:
        raise _failed(plugin, "failed to fill the spec", _said(exc)) from None
    if not isinstance(fill, dict) or not all(isinstance(k, str) for k in fill):
        raise _failed(plugin, "failed to fill the spec", f"normalize returned {type(fill).__name__}, not a table "
                      "of \"section.field\" names")
    return fill


def plugin_rules(plugin: RewardPlugin, spec, options) -> list[Finding]:
    """``plugin.rules``' ``(key, message, hint)`` tuples as errors; a broken plug-in is named, as in :func:`plugin_fill`."""
    try:
        found = list(plugin.rules(spec, options))
    except SpecError:
        raise
    except Exception as exc:
        raise _failed(plugin, "failed to check the spec", _said(exc)) from None
    out = []
    for item in found:
        if not (isinstance(item, (tuple, list)) and len(item) == 3 and isinstance(item[0], str) and item[0]
                and isinstance(item[1], str) and (item[2] is None or isinstance(item[2], str))):
            raise _failed(plugin, "failed to check the spec", f"a finding is {item!r:.80}, not (key, message, hint)")
        out.append(Finding(*item))
    return out
