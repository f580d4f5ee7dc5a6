"""``tutorrl migrate``: what moving a spec from one verl release to another changes.

Users used to find this out from Hydra tracebacks one key at a time. Here the
key map of both releases is laid side by side for the settings the spec
actually writes: where each key moved, where the value is spelled differently,
where Hydra's ``+`` comes or goes, which settings have no home in the target
(and what that costs), how the variant's config is selected, and which of the
spec's ``extra_overrides`` the target release would refuse.

Pure apart from reading the spec: the answer comes from the key map and the
packaged key sets, never from an installed verl.
"""

from __future__ import annotations

import msgspec

from tutorrl.compiler.hydra import render_value
from tutorrl.compiler.keymap import (ReleaseMap, Target, absent_reason, describe_releases, load_keymap,
                                     release_map, releases_with)
from tutorrl.compiler.resolve import DERIVED, map_name, resolve, settings, spec_field, variant_of
from tutorrl.compiler.spec import Spec
from tutorrl.errors import Problem, SpecError


class Place(msgspec.Struct, frozen=True, omit_defaults=True):
    """Where one setting goes in one release, and the overrides it becomes there."""

    keys: list[str]
    append: bool
    spelling: str
    overrides: list[str]


class Change(msgspec.Struct, frozen=True, omit_defaults=True):
    setting: str
    spec_field: str
    # same | moved | respelled | plus-changed | lost | dropped | gained
    status: str
    changes: list[str]
    before: Place | None = None
    after: Place | None = None
    note: str = ""


class Selection(msgspec.Struct, frozen=True):
    config_name: str
    select: list[str]


class Blocker(msgspec.Struct, frozen=True, omit_defaults=True):
    spec_field: str
    message: str
    hint: str = ""


class Migration(msgspec.Struct, frozen=True):
    source: str = msgspec.field(name="from")
    target: str = msgspec.field(name="to")
    variant: str = ""
    selection_before: Selection | None = None
    selection_after: Selection | None = None
    settings: list[Change] = []
    blockers: list[Blocker] = []

    @property
    def compiles(self) -> bool:
        return not self.blockers


def _override_texts(setting: str, value: object, target: Target, release: str) -> list[str]:
    plus = "+" if target.append else ""
    if target.spelling == "module-file":
        return [f"{plus}{key}=<file of module {value}, found by launch.sh with the job's Python>"
                for key in target.keys]
    if target.spelling == "pkg":
        value = f"pkg://{value}"
    return [f"{plus}{key}={render_value(value)}" for key in target.keys]


def _place(setting: str, value: object, rmap: ReleaseMap) -> Place | None:
    target = rmap.target(setting)
    if target is None:
        return None
    return Place(list(target.keys), target.append, target.spelling,
                 _override_texts(setting, value, target, rmap.release))


_SPELLING_WORDS = {
    "plain": "the value as written",
    "pkg": "pkg://<module> (verl imports the module)",
    "module-file": "the module's file path (launch.sh looks it up with the job's Python)",
}


def _compare(setting: str, before: Place | None, after: Place | None, source: ReleaseMap,
             target: ReleaseMap) -> Change:
    field = spec_field(setting)
    name = map_name(setting)
    if before is None and after is None:
        return Change(setting, field, "same", [])
    if after is None:
        where = describe_releases(releases_with(name, target.variant))
        why = absent_reason(name, target.release, target.variant) or ""
        if setting in DERIVED:
            return Change(setting, field, "dropped",
                          [f"verl {target.release} has no key for it; tutorrl derives it from {field} "
                           f"and leaves it out (it exists {where})"], before, None, why)
        return Change(setting, field, "lost",
                      [f"verl {target.release} has no key for it (it exists {where}): "
                       f"remove {field} from the spec or target another release"], before, None, why)
    if before is None:
        why = absent_reason(name, source.release, source.variant) or ""
        return Change(setting, field, "gained",
                      [f"verl {source.release} has no key for it; verl {target.release} reads "
                       f"{', '.join(after.keys)}"], None, after, why)
    changes: list[str] = []
    status = "same"
    if before.keys != after.keys:
        status = "moved"
        changes.append(f"key: {', '.join(before.keys)} -> {', '.join(after.keys)}")
        for key in before.keys:
            ignored = target.ignored_by(key)
            if ignored is not None:
                changes.append(f"the old key is a trap in verl {target.release}: {ignored.reason}")
    if before.spelling != after.spelling:
        status = "respelled" if status == "same" else status
        changes.append(f"value: {_SPELLING_WORDS[before.spelling]} -> {_SPELLING_WORDS[after.spelling]}")
    if before.append != after.append:
        status = "plus-changed" if status == "same" else status
        changes.append("now declared by verl: drop the '+'" if before.append
                       else "no longer declared by verl: needs '+'")
    return Change(setting, field, status, changes, before, after)


def migrate_spec(spec: Spec, source: str, target: str) -> Migration:
    """Compare ``spec`` compiled for ``source`` with it compiled for ``target``."""
    supported = load_keymap().releases
    for release, flag in ((source, "--from"), (target, "--to")):
        if release not in supported:
            raise SpecError([Problem(f"{flag} {release}: verl {release} is not supported",
                                     hint=f"supported releases: {', '.join(supported)}")])
    variant = variant_of(spec)
    before_map, after_map = release_map(source, variant), release_map(target, variant)
    changes = []
    for setting, value in settings(spec):
        changes.append(_compare(setting, _place(setting, value, before_map), _place(setting, value, after_map),
                                before_map, after_map))
    from tutorrl.compiler.keysets import load_keyset

    retargeted = msgspec.structs.replace(spec, experiment=msgspec.structs.replace(spec.experiment, verl=target))
    _, findings = resolve(retargeted, after_map, load_keyset(target, variant))
    blockers = [Blocker(field, message, hint or "") for field, message, hint in findings]
    return Migration(source, target, variant,
                     Selection(before_map.config_name, list(before_map.select)),
                     Selection(after_map.config_name, list(after_map.select)),
                     changes, blockers)


def render_text(m: Migration, spec_name: str) -> str:
    lines = [f"{spec_name}: verl {m.source} -> {m.target} ({m.variant})", ""]
    sb, sa = m.selection_before, m.selection_after
    if (sb.config_name, sb.select) != (sa.config_name, sa.select):
        lines.append("variant selection:")
        lines.append(f"  --config-name {sb.config_name} {' '.join(sb.select)}".rstrip()
                     + f" -> --config-name {sa.config_name} {' '.join(sa.select)}".rstrip())
        lines.append("")
    changed = [c for c in m.settings if c.status != "same"]
    if changed:
        lines.append("settings that change:")
        for c in changed:
            lines.append(f"  {c.setting} [{c.status}]" + (f" (spec: {c.spec_field})" if c.spec_field != c.setting else ""))
            for text in c.changes:
                lines.append(f"    {text}")
            for label, place in (("before", c.before), ("after", c.after)):
                if place is not None:
                    for text in place.overrides:
                        lines.append(f"    {label}: {text}")
            if c.note:
                lines.append(f"    why: {c.note}")
        lines.append("")
    same = sum(1 for c in m.settings if c.status == "same")
    lines.append(f"{same} other settings keep their key, spelling and '+'.")
    lines.append("")
    if m.blockers:
        lines.append(f"before this spec compiles for verl {m.target}:")
        for b in m.blockers:
            lines.append(f"  {b.spec_field}: {b.message}" + (f" ({b.hint})" if b.hint else ""))
    else:
        lines.append(f"the spec compiles for verl {m.target} once experiment.verl = \"{m.target}\".")
    return "\n".join(lines) + "\n"


def render_json(m: Migration) -> str:
    doc = msgspec.to_builtins(m)
    doc["compiles"] = m.compiles
    return msgspec.json.format(msgspec.json.encode(doc), indent=2).decode() + "\n"


def cmd_migrate(args) -> int:
    from tutorrl.compiler.load import parse_spec, read_spec_bytes
    from tutorrl.compiler.normalize import normalize

    spec, _ = parse_spec(read_spec_bytes(args.spec, args.spec), args.spec)
    spec = normalize(spec)
    migration = migrate_spec(spec, args.source or spec.experiment.verl, args.target)
    print(render_json(migration) if args.format == "json" else render_text(migration, args.spec), end="")
    return 0
