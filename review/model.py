"""The structured diff of two launches, in the terms a reviewer thinks in.

Everything is derived from what the compiler itself uses -- the release-
independent settings of :func:`tutorrl.compiler.resolve.settings` and the key
map of each side's own release -- so a spec retargeted to another verl release
shows its settings unchanged and the keys the release moved, rather than a
wall of changed override lines.
"""

from __future__ import annotations

import difflib
from typing import Any, Literal

import msgspec

from tutorrl.compiler import keymap as keymap_module
from tutorrl.compiler.bundle import CONTENT_FILES
from tutorrl.compiler.settings import settings
from tutorrl.compiler.spec import Spec, to_builtins
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
    """A setting (or spec field) whose value differs; keys are where verl reads it."""

    setting: str
    change: Change
    old: Any = None
    new: Any = None
    old_keys: list[str] = []
    new_keys: list[str] = []
    note: str = ""


class EnvChange(msgspec.Struct, frozen=True, omit_defaults=True):
    """An environment variable. ``passthrough`` entries never carry a value."""

    name: str
    kind: Literal["set", "passthrough"]
    change: Change
    old: str | None = None
    new: str | None = None
    note: str = ""


class Move(msgspec.Struct, frozen=True, omit_defaults=True):
    """A setting written to different verl keys (or spelled differently) on each side."""

    setting: str
    old_keys: list[str]
    new_keys: list[str]
    old_spelling: str = "plain"
    new_spelling: str = "plain"


class ReleaseChange(msgspec.Struct, frozen=True, omit_defaults=True):
    old: str
    new: str
    old_variant: str
    new_variant: str
    old_config: str = ""
    new_config: str = ""
    old_select: list[str] = []
    new_select: list[str] = []
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
    # Spec fields whose change reaches no verl setting (e.g. LoRA alpha at rank 0).
    spec_only: list[SettingChange] = []
    # Content files whose bytes differ; always listed, so tools need not re-hash.
    files: list[str] = []
    # Unified diffs, only when nothing above explains why the bundles differ
    # (typically: a new compiler writes launch.sh differently).
    file_diffs: dict[str, str] = {}

    @property
    def explained(self) -> bool:
        return bool(self.experiment or self.resources or self.reward or self.environment or self.release
                     or self.extra_overrides or self.spec_only)


# ---------------------------------------------------------------- key lookup

_Target = tuple[tuple[str, ...], str]  # (keys as written, with "+" when appended; spelling)


class _Keys:
    """Where each setting goes in one side's release; empty when the release is unknown."""

    def __init__(self, side: Side):
        self.release = side.manifest.verl
        self.variant = side.manifest.variant
        try:
            self.rmap = keymap_module.load_lock(self.release, self.variant)
        except SpecError:
            # A bundle compiled for a release this tutorrl no longer maps (or
            # not yet): its values still compare, its keys cannot be named.
            self.rmap = None

    def target(self, setting: str) -> _Target | None:
        if self.rmap is None:
            return None
        t = self.rmap.targets.get(setting)
        if t is None:
            return None
        return (("+" if t.plus else "") + t.key + (".*" if t.kind == "table" else ""),), t.spelling

    def keys(self, setting: str) -> list[str]:
        t = self.target(setting)
        return list(t[0]) if t else []

    @property
    def select(self) -> list[str]:
        return list(self.rmap.select) if self.rmap else []

    @property
    def config_name(self) -> str:
        return self.rmap.config_name if self.rmap else ""


# ---------------------------------------------------------------- the diff

def _same(a: Any, b: Any) -> bool:
    # 1 and 1.0 (and True) compare equal in Python but launch differently.
    return msgspec.json.encode(a) == msgspec.json.encode(b)


def _group(setting: str) -> str:
    if setting.startswith("resources."):
        return "resources"
    if setting.startswith("reward."):
        return "reward"
    return "experiment"


def _setting_changes(old: Side, new: Side, ok: _Keys, nk: _Keys) -> list[SettingChange]:
    a = dict(settings(old.spec))
    b = dict(settings(new.spec))
    order = list(a) + [s for s in b if s not in a]
    out = []
    for name in order:
        if name in a and name in b:
            if _same(a[name], b[name]):
                continue
            change: Change = "changed"
        else:
            change = "removed" if name in a else "added"
        out.append(SettingChange(
            setting=name, change=change, old=a.get(name), new=b.get(name),
            old_keys=ok.keys(name) if name in a else [], new_keys=nk.keys(name) if name in b else []))
    return out


def _total_gpus(spec: Spec) -> int | None:
    r = spec.resources
    # Unset means verl's defaults (one node of eight GPUs in every release).
    return (r.nodes or 1) * (r.trainer_gpus_per_node or 8) + (r.reward_gpus or 0)


def _resource_changes(old: Side, new: Side, ok: _Keys, nk: _Keys) -> list[SettingChange]:
    a, b = old.spec.resources, new.spec.resources
    rows = [
        ("resources.nodes", a.nodes, b.nodes, "resources.nodes", ""),
        ("resources.trainer_gpus_per_node", a.trainer_gpus_per_node, b.trainer_gpus_per_node,
         "resources.trainer_gpus_per_node", ""),
        # Not a verl key: the GPUs are kept out of verl's pool for the reward.
        ("resources.reward_gpus", a.reward_gpus, b.reward_gpus, None, "outside verl's trainer pool"),
        ("resources.total_gpus", _total_gpus(old.spec), _total_gpus(new.spec), None,
         "nodes x trainer GPUs per node + reward GPUs"),
    ]
    return [SettingChange(name, "changed", x, y,
                          ok.keys(setting) if setting else [], nk.keys(setting) if setting else [], note)
            for name, x, y, setting, note in rows if not _same(x, y)]


def _reward_plugin_change(old: Side, new: Side) -> list[SettingChange]:
    out = []
    for name in ("plugin", "options"):
        a, b = getattr(old.spec.reward, name), getattr(new.spec.reward, name)
        if not _same(a, b):
            out.append(SettingChange(f"reward.{name}", "changed" if a is not None and b is not None
                                     else ("added" if a is None else "removed"), a, b,
                                     note="tutorrl's reward plug-in; what it fills is listed with the other settings"))
    return out


def _env_changes(old: Side, new: Side) -> list[EnvChange]:
    # The job's env_vars are what verl's workers actually get, including what
    # the compiler adds; env.set values are never secrets (the compiler
    # refuses secret-looking names there), so they may be shown.
    a = old.job.get("runtime_env", {}).get("env_vars", {})
    b = new.job.get("runtime_env", {}).get("env_vars", {})
    out: list[EnvChange] = []
    for name in sorted(set(a) | set(b)):
        if name in a and name in b and a[name] == b[name]:
            continue
        change: Change = "changed" if name in a and name in b else ("removed" if name in a else "added")
        by_tutorrl = name not in (old.spec.env.set if change == "removed" else new.spec.env.set)
        out.append(EnvChange(name, "set", change, a.get(name), b.get(name),
                             "set by tutorrl" if by_tutorrl else ""))
    pa, pb = set(old.spec.env.passthrough), set(new.spec.env.passthrough)
    out += [EnvChange(name, "passthrough", "added") for name in sorted(pb - pa)]
    out += [EnvChange(name, "passthrough", "removed") for name in sorted(pa - pb)]
    return out


def _release_change(old: Side, new: Side, ok: _Keys, nk: _Keys) -> ReleaseChange | None:
    a = dict(settings(old.spec))
    b = dict(settings(new.spec))
    moved = []
    if ok.rmap is not None and nk.rmap is not None:
        for name in a:
            if name not in b:
                continue
            # No target: the release has no key for a derived setting, which
            # the compiler then leaves out -- a move from or to nowhere.
            ta, tb = ok.target(name) or ((), "plain"), nk.target(name) or ((), "plain")
            if ta != tb:
                moved.append(Move(name, list(ta[0]), list(tb[0]), ta[1], tb[1]))
    unmapped = [f"{side.label} (verl {k.release})" for side, k in ((old, ok), (new, nk)) if k.rmap is None]
    if _where(ok) == _where(nk) and not moved and not unmapped:
        return None
    return ReleaseChange(ok.release, nk.release, ok.variant, nk.variant, ok.config_name, nk.config_name,
                         ok.select, nk.select, moved, unmapped)


def _where(k: _Keys) -> tuple:
    return k.release, k.variant, k.config_name, k.select


def _override_changes(old: Side, new: Side) -> list[OverrideChange]:
    a, b = list(old.spec.verl.extra_overrides), list(new.spec.verl.extra_overrides)
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


# Spec fields the sections above speak for, even though no setting bears their name.
_COVERED_PREFIXES = ("experiment.verl", "actor.strategy", "reward.plugin", "reward.options", "resources.", "env.",
                     "verl.")


def _spec_only(old: Side, new: Side, explained: set[str]) -> list[SettingChange]:
    a, b = _flatten(to_builtins(old.spec)), _flatten(to_builtins(new.spec))
    out = []
    for name in list(a) + [n for n in b if n not in a]:
        if name in a and name in b and _same(a[name], b[name]):
            continue
        if name in explained or name.startswith(_COVERED_PREFIXES) or any(
                name.startswith(e + ".") for e in explained):
            continue
        change: Change = "changed" if name in a and name in b else ("removed" if name in a else "added")
        out.append(SettingChange(name, change, a.get(name), b.get(name), note="not passed to verl"))
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
    changes = _setting_changes(old, new, ok, nk)
    groups: dict[str, list[SettingChange]] = {"experiment": [], "resources": [], "reward": []}
    for c in changes:
        # Resource settings are shown once, from the spec's own fields below.
        if _group(c.setting) != "resources":
            groups[_group(c.setting)].append(c)
    files = [n for n in CONTENT_FILES if old.files[n] != new.files[n]]
    diff = Diff(
        info(old), info(new), same=False,
        experiment=groups["experiment"],
        resources=_resource_changes(old, new, ok, nk),
        reward=_reward_plugin_change(old, new) + groups["reward"],
        environment=_env_changes(old, new),
        release=_release_change(old, new, ok, nk),
        extra_overrides=_override_changes(old, new),
        spec_only=_spec_only(old, new, {c.setting for c in changes}),
        files=files,
    )
    if not diff.explained:
        diff = msgspec.structs.replace(diff, file_diffs=_file_diffs(old, new, files))
    return diff
