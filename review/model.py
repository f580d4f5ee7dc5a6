"""The structured diff of two launches, in the terms a reviewer thinks in.

Everything is derived from what the compiler itself uses -- the release-
independent settings of :func:`tutorrl.compiler.spec.flat.settings` and the
lock of each side's own release -- so a spec retargeted to another verl
release shows its settings unchanged and the keys the release moved, rather
than a wall of changed override lines.

A setting is shown with the verl key it is written to; a *table* setting (a
dict verl reads whole, such as ``reward.kwargs``) is shown entry by entry,
each with its own key, as the compiler emits it. A setting the spec leaves
unset is verl's default, so a setting that appears or disappears carries that
default. The reward plug-in's options are shown one by one, and the settings
and environment it fills say so.
"""

from __future__ import annotations

import difflib
from typing import Any, Literal

import msgspec

from tutorrl.compiler.release import load_lock, skipped, spell
from tutorrl.compiler.spec import flatten_table, settings, to_builtins
from tutorrl.contract import CONTENT_FILES
from tutorrl.errors import SpecError
from tutorrl.review.sides import Side

Change = Literal["added", "removed", "changed"]
# Raw file diffs are a last resort; past this many lines a reviewer should
# open the files themselves.
MAX_FILE_DIFF_LINES = 200


class SideInfo(msgspec.Struct, frozen=True):
    label: str
    kind: str
    digest: str
    experiment: str
    verl: str
    variant: str
    compiler: str


class SettingChange(msgspec.Struct, frozen=True, omit_defaults=True):
    """A setting (or spec field) whose value differs; keys are where verl reads it.

    A table setting's entries are settings of their own (``reward.kwargs.device``).
    ``default`` is verl's default on the side that leaves the setting unset
    (``added``: what it was; ``removed``: what it becomes), when the lock knows it.
    """

    setting: str
    change: Change
    old: Any = None
    new: Any = None
    old_keys: list[str] = []
    new_keys: list[str] = []
    note: str = ""
    default: Any = None


class EnvChange(msgspec.Struct, frozen=True, omit_defaults=True):
    """An environment variable. ``passthrough`` entries never carry a value."""

    name: str
    kind: Literal["set", "passthrough"]
    change: Change
    old: str | None = None
    new: str | None = None
    note: str = ""


class Move(msgspec.Struct, frozen=True, omit_defaults=True):
    """A setting written to different verl keys (or spelled differently) on each side.

    ``table`` names the table setting an entry belongs to (``reward.kwargs``).
    """

    setting: str
    old_keys: list[str]
    new_keys: list[str]
    old_spelling: str = "plain"
    new_spelling: str = "plain"
    table: str = ""


class ReleaseChange(msgspec.Struct, frozen=True, omit_defaults=True):
    old: str
    new: str
    old_variant: str
    new_variant: str
    # verl's --config-name (the spec's experiment.config_name, else the release's) and --config-path.
    old_config: str = ""
    new_config: str = ""
    old_config_path: str = ""
    new_config_path: str = ""
    old_select: list[str] = []
    new_select: list[str] = []
    # The module launch.sh starts when it is not verl.trainer.main_ppo (the spec's experiment.entry).
    old_entry: str = ""
    new_entry: str = ""
    moved: list[Move] = []
    # Sides whose release this tutorrl's key map does not know: keys unknown.
    unmapped: list[str] = []


class OverrideChange(msgspec.Struct, frozen=True):
    text: str
    change: Literal["added", "removed"]


class Diff(msgspec.Struct, frozen=True, omit_defaults=True):
    old: SideInfo
    new: SideInfo
    same: bool
    experiment: list[SettingChange] = []
    resources: list[SettingChange] = []
    reward: list[SettingChange] = []
    environment: list[EnvChange] = []
    release: ReleaseChange | None = None
    extra_overrides: list[OverrideChange] = []
    # [verl] unread_overrides: passed as written, never read by the release (a fork's keys).
    unread_overrides: list[OverrideChange] = []
    # Spec fields whose change reaches no verl key (e.g. evidence_callback = false, which emits nothing).
    spec_only: list[SettingChange] = []
    # Content files whose bytes differ; always listed, so tools need not re-hash.
    files: list[str] = []
    # Unified diffs, only when nothing above explains why the bundles differ
    # (typically: a new compiler writes launch.sh differently).
    file_diffs: dict[str, str] = {}

    @property
    def explained(self) -> bool:
        return bool(self.experiment or self.resources or self.reward or self.environment or self.release
                     or self.extra_overrides or self.unread_overrides or self.spec_only)


# ---------------------------------------------------------------- one side


class _Row(msgspec.Struct, frozen=True):
    """One setting (or table entry) of one side, as the compiler writes it."""

    value: Any
    keys: tuple[str, ...]  # as written, with "+" when appended; () when unmapped or not passed
    spelling: str = "plain"
    table: str = ""  # the table setting this is an entry of
    reaches: bool = True  # False: the spelling passes nothing to verl (evidence_callback = false)


class _Keys:
    """One side's release, variant, lock and the rows of its spec; keys are empty when the release is unknown."""

    def __init__(self, side: Side):
        spec = side.spec
        self.spec = spec
        self.release = side.manifest.verl
        self.variant = side.manifest.variant
        try:
            self.rmap = load_lock(self.release, self.variant, spec.experiment.entry)
        except SpecError:
            # A bundle compiled for a release this tutorrl no longer maps (or
            # not yet): its values still compare, its keys cannot be named.
            self.rmap = None
        self.config_name = spec.experiment.config_name or (self.rmap.config_name if self.rmap else "")
        self.config_path = spec.experiment.config_path or ""
        from tutorrl.compiler.release import find_entry

        found = find_entry(spec.experiment.entry)
        self.entry = "" if found is None or found.default else found.module
        self.rows = self._rows()
        self.plugin, self.filled, self.filled_env = _plugin_fills(spec)

    def _rows(self) -> dict[str, _Row]:
        rows: dict[str, _Row] = {}
        for setting, value in settings(self.spec):
            target = self.rmap.targets.get(setting) if self.rmap else None
            if isinstance(value, dict):
                for sub, item in flatten_table(value):
                    keys: tuple[str, ...] = ()
                    if target is not None:
                        keys = (target.spelled(sub),)
                    rows[f"{setting}.{sub}"] = _Row(item, keys, target.spelling if target else "plain", setting)
                continue
            if target is None:
                rows[setting] = _Row(value, ())
                continue
            reaches = not skipped(spell(value, target.spelling))
            keys = (target.spelled(),) if reaches else ()
            rows[setting] = _Row(value, keys, target.spelling, reaches=reaches)
        return rows

    def default(self, setting: str) -> Any:
        """verl's default for a setting this side leaves unset (None: unknown or none)."""
        if self.rmap is None or setting not in self.rmap.targets:
            return None
        from tutorrl.compiler.pipeline import Effective

        value = Effective(self.spec, self.rmap)(setting)
        return None if isinstance(value, dict) else value

    @property
    def select(self) -> list[str]:
        return list(self.rmap.select) if self.rmap else []


def _plugin_fills(spec) -> tuple[str, dict[str, Any], dict[str, str]]:
    """(plug-in, {setting or table entry: value}, {env name: value}) of what the
    reward plug-in fills and the normalised spec holds.

    The normalised spec does not record who wrote a field, so the plug-in is
    asked again (its ``normalize`` is a pure function of the spec); a field the
    user set to a value of their own is not the plug-in's.
    """
    name = spec.reward.plugin
    if name is None:
        return "", {}, {}
    from tutorrl.compiler.spec import plugin_fill, plugin_of
    from tutorrl.compiler.spec import get_field

    try:
        plugin, options = plugin_of(spec)
        fill = plugin_fill(plugin, spec, options)  # a broken plug-in is a SpecError, never a traceback
    except (SpecError, msgspec.ValidationError):
        # Not installed here (a bundle from elsewhere): its values still compare.
        return name, {}, {}
    filled: dict[str, Any] = {}
    env: dict[str, str] = {}
    for field, value in fill.items():
        if field == "env.set":
            env = {k: v for k, v in value.items() if spec.env.set.get(k) == v}
        elif _same(get_field(spec, field), value):
            if isinstance(value, dict):
                filled.update({f"{field}.{sub}": v for sub, v in flatten_table(value)})
            else:
                filled[field] = value
    return name, filled, env


# ---------------------------------------------------------------- the diff

def _same(a: Any, b: Any) -> bool:
    # 1 and 1.0 (and True) compare equal in Python but launch differently.
    # Table order carries no meaning (the compiler sorts tables).
    return msgspec.json.encode(a, order="sorted") == msgspec.json.encode(b, order="sorted")


def _group(setting: str) -> str:
    if setting.startswith("resources."):
        return "resources"
    if setting.startswith("reward."):
        return "reward"
    return "experiment"


def _change(a: Any, b: Any) -> Change:
    return "changed" if a is not None and b is not None else ("added" if a is None else "removed")


def _filled_note(name: str, ok: _Keys, nk: _Keys) -> str:
    """Whose value each side holds: the reward plug-in's, or the spec's own."""
    a = ok.plugin if name in ok.filled else ""
    b = nk.plugin if name in nk.filled else ""
    if b:
        return f"filled by reward plug-in {b}" + (f" (was {a})" if a and a != b else "")
    if a:
        return f"filled by reward plug-in {a}" if name not in nk.rows else f"was filled by reward plug-in {a}"
    return ""


def _unread_note(name: str, k: _Keys) -> str:
    """That the new side's release takes the setting's key and does not use it (the key map's `unread`;
    not where that depends on the rollout engine, which the compile itself says)."""
    target = k.rmap.targets.get(name) if k.rmap is not None else None
    unread = target is not None and target.unread and not target.unread_engines
    return f"has no effect in verl {k.release} ({k.variant})" if unread else ""


def _setting_changes(ok: _Keys, nk: _Keys) -> tuple[list[SettingChange], list[SettingChange]]:
    """(changes that reach verl, changes that reach no verl key on either side)."""
    a, b = ok.rows, nk.rows
    verl: list[SettingChange] = []
    spec_only: list[SettingChange] = []
    for name in list(a) + [s for s in b if s not in a]:
        ra, rb = a.get(name), b.get(name)
        if ra is not None and rb is not None and _same(ra.value, rb.value):
            continue
        change = _change(ra, rb)
        rows = [r for r in (ra, rb) if r is not None]
        if not any(r.reaches for r in rows):
            spec_only.append(SettingChange(name, change, ra.value if ra else None, rb.value if rb else None,
                                           note="not passed to verl"))
            continue
        unset_side = ok if ra is None else (nk if rb is None else None)
        table = next(r.table for r in rows)
        default = unset_side.default(name) if unset_side is not None and not table else None
        verl.append(SettingChange(
            setting=name, change=change, old=ra.value if ra else None, new=rb.value if rb else None,
            old_keys=list(ra.keys) if ra else [], new_keys=list(rb.keys) if rb else [],
            note="; ".join(n for n in (_filled_note(name, ok, nk), _unread_note(name, nk) if rb else "") if n),
            default=default))
    return verl, spec_only


def _total(k: _Keys) -> int | None:
    """Every GPU the launch needs (compiler/pipeline/effective_values.py: the same total the run preflight checks)."""
    from tutorrl.compiler.pipeline import gpu_pool

    return gpu_pool(k.spec).total


def _resource_changes(changes: list[SettingChange], ok: _Keys, nk: _Keys) -> list[SettingChange]:
    out = [c for c in changes if _group(c.setting) == "resources"]
    a, b = ok.spec.resources.reward_gpus, nk.spec.resources.reward_gpus
    if not _same(a, b):
        # Not a verl key: the GPUs are kept out of verl's pool for the reward (unset: none).
        out.append(SettingChange("resources.reward_gpus", _change(a, b), a, b, note="outside verl's trainer pool",
                                 default=0 if a is None or b is None else None))
    ta, tb = _total(ok), _total(nk)
    if ta is not None and tb is not None and ta != tb:
        out.append(SettingChange("resources.total_gpus", "changed", ta, tb,
                                 note="nodes x trainer GPUs per node + reward GPUs, verl's defaults where unset"))
    return out


def _reward_plugin_changes(ok: _Keys, nk: _Keys) -> list[SettingChange]:
    """The plug-in and each of its options (normalised: every default spelled out)."""
    out = []
    a, b = ok.spec.reward.plugin, nk.spec.reward.plugin
    if a != b:
        out.append(SettingChange("reward.plugin", _change(a, b), a, b,
                                 note="tutorrl's reward plug-in; what it fills is listed below"))
    oa = _flatten(ok.spec.reward.options or {}, "reward.options.")
    ob = _flatten(nk.spec.reward.options or {}, "reward.options.")
    for name in list(oa) + [n for n in ob if n not in oa]:
        x, y = oa.get(name), ob.get(name)
        if name in oa and name in ob and _same(x, y):
            continue
        change: Change = "changed" if name in oa and name in ob else ("removed" if name in oa else "added")
        owner = b if name in ob else a
        out.append(SettingChange(name, change, x, y, note=f"option of reward plug-in {owner}"))
    return out


def _env_changes(old: Side, new: Side, ok: _Keys, nk: _Keys) -> list[EnvChange]:
    # The job's env_vars are what verl's workers actually get; env.set values
    # are never secrets (the compiler refuses secret-looking names there), so
    # they may be shown.
    a = old.job.get("runtime_env", {}).get("env_vars", {})
    b = new.job.get("runtime_env", {}).get("env_vars", {})
    out: list[EnvChange] = []
    for name in sorted(set(a) | set(b)):
        if name in a and name in b and a[name] == b[name]:
            continue
        change: Change = "changed" if name in a and name in b else ("removed" if name in a else "added")
        side, k = (old, ok) if change == "removed" else (new, nk)
        if name in k.filled_env:
            note = f"set by reward plug-in {k.plugin}"
        elif name not in side.spec.env.set:
            note = "set by tutorrl"
        else:
            note = ""
        out.append(EnvChange(name, "set", change, a.get(name), b.get(name), note))
    pa, pb = set(old.spec.env.passthrough), set(new.spec.env.passthrough)
    out += [EnvChange(name, "passthrough", "added") for name in sorted(pb - pa)]
    out += [EnvChange(name, "passthrough", "removed") for name in sorted(pa - pb)]
    return out


def _release_change(old: Side, new: Side, ok: _Keys, nk: _Keys) -> ReleaseChange | None:
    moved = []
    if ok.rmap is not None and nk.rmap is not None:
        for name, ra in ok.rows.items():
            rb = nk.rows.get(name)
            if rb is None:
                continue
            # No keys: the release has no key for it or the value passes
            # nothing -- a move from or to nowhere.
            if (ra.keys, ra.spelling) != (rb.keys, rb.spelling):
                moved.append(Move(name, list(ra.keys), list(rb.keys), ra.spelling, rb.spelling, rb.table))
    unmapped = [f"{side.label} (verl {k.release})" for side, k in ((old, ok), (new, nk)) if k.rmap is None]
    if _where(ok) == _where(nk) and not moved and not unmapped:
        return None
    return ReleaseChange(ok.release, nk.release, ok.variant, nk.variant, ok.config_name, nk.config_name,
                         ok.config_path, nk.config_path, ok.select, nk.select, ok.entry, nk.entry, moved, unmapped)


def _where(k: _Keys) -> tuple:
    return k.release, k.variant, k.config_name, k.config_path, k.select, k.entry


def _override_changes(old: Side, new: Side, field: str = "extra_overrides") -> list[OverrideChange]:
    a, b = list(getattr(old.spec.verl, field)), list(getattr(new.spec.verl, field))
    out = [OverrideChange(t, "removed") for t in a if t not in b]
    out += [OverrideChange(t, "added") for t in b if t not in a]
    if not out and a != b:
        # Same overrides, new order: Hydra applies them in order, so it matters.
        out = [OverrideChange(t, "removed") for t in a] + [OverrideChange(t, "added") for t in b]
    return out


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: value}


# Spec fields the sections above speak for, even though no setting bears their name:
# the release, its config and variant, the plug-in and its options, resources, environment, raw overrides.
_COVERED_PREFIXES = ("experiment.verl", "experiment.config_name", "experiment.config_path", "experiment.entry",
                     "actor.strategy",
                     "reward.plugin", "reward.options.", "resources.", "env.", "verl.extra_overrides",
                     "verl.unread_overrides")
# Said in the diff though verl never sees it: it lets raw overrides run or install code in every Ray worker.
_SAID = {"verl.allow_runtime_env": "the Ray runtime_env keys raw overrides may set",
         "verl.allow_worker_code": "the keys naming code verl imports in its workers that raw overrides may set"}


def _unexplained(old: Side, new: Side, explained: set[str]) -> list[SettingChange]:
    """Any other spec field that differs: none should, but a diff never hides a difference."""
    a, b = _flatten(to_builtins(old.spec)), _flatten(to_builtins(new.spec))
    out = []
    for name in list(a) + [n for n in b if n not in a]:
        if name in a and name in b and _same(a[name], b[name]):
            continue
        if name in explained or name.startswith(_COVERED_PREFIXES):
            continue
        change: Change = "changed" if name in a and name in b else ("removed" if name in a else "added")
        out.append(SettingChange(name, change, a.get(name), b.get(name), note=_SAID.get(name, "not passed to verl")))
    return out


def _file_diffs(old: Side, new: Side, names: list[str]) -> dict[str, str]:
    out = {}
    for name in names:
        lines = list(difflib.unified_diff(
            old.files[name].decode("utf-8", "replace").splitlines(),
            new.files[name].decode("utf-8", "replace").splitlines(),
            f"{old.label}/{name}", f"{new.label}/{name}", lineterm=""))
        if len(lines) > MAX_FILE_DIFF_LINES:
            lines = lines[:MAX_FILE_DIFF_LINES] + [f"... {len(lines) - MAX_FILE_DIFF_LINES} more lines"]
        out[name] = "\n".join(lines)
    return out


def info(side: Side) -> SideInfo:
    m = side.manifest
    return SideInfo(side.label, side.kind, m.digest, m.experiment, m.verl, m.variant, m.compiler)


def diff_sides(old: Side, new: Side) -> Diff:
    """What changes, for a reviewer, when ``old`` is replaced by ``new``."""
    if old.digest == new.digest:
        return Diff(info(old), info(new), same=True)
    ok, nk = _Keys(old), _Keys(new)
    changes, spec_only = _setting_changes(ok, nk)
    explained = {c.setting for c in (*changes, *spec_only)}
    files = [n for n in CONTENT_FILES if old.files[n] != new.files[n]]
    diff = Diff(
        info(old), info(new), same=False,
        experiment=[c for c in changes if _group(c.setting) == "experiment"],
        resources=_resource_changes(changes, ok, nk),
        reward=_reward_plugin_changes(ok, nk) + [c for c in changes if _group(c.setting) == "reward"],
        environment=_env_changes(old, new, ok, nk),
        release=_release_change(old, new, ok, nk),
        extra_overrides=_override_changes(old, new),
        unread_overrides=_override_changes(old, new, "unread_overrides"),
        spec_only=spec_only + _unexplained(old, new, explained),
        files=files,
    )
    if not diff.explained:
        diff = msgspec.structs.replace(diff, file_diffs=_file_diffs(old, new, files))
    return diff
