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

from tutorrl.compiler.pipeline.resolve import resolve
from tutorrl.compiler.release import Lock, describe_releases, load_lock, render_value, skipped, spell
from tutorrl.compiler.release.keymap import Target, releases_with, supported_releases
from tutorrl.compiler.release.spelling import WORDS
from tutorrl.compiler.spec import Spec, flatten_table, settings, variant_of
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


def _override_texts(value: object, target: Target) -> list[str]:
    if target.kind == "table":
        return [f"{target.spelled(sub)}={render_value(v)}" for sub, v in flatten_table(value)]
    if target.spelling == "module-file":
        return [f"{target.spelled()}=<file of module {value}, found by launch.sh with the job's Python>"]
    value = spell(value, target.spelling)
    if skipped(value):
        return []
    return [f"{target.spelled()}={render_value(value)}"]


def _place(setting: str, value: object, lock: Lock) -> Place | None:
    target = lock.targets.get(setting)
    if target is None:
        return None
    return Place([target.key], target.plus, target.spelling, _override_texts(value, target))


def _compare(setting: str, before: Place | None, after: Place | None, source: Lock, target: Lock) -> Change:
    if before is None and after is None:
        return Change(setting, setting, "same", [])
    if after is None:
        where = describe_releases(releases_with(setting, target.variant))
        why = target.absent.get(setting, "")
        return Change(setting, setting, "lost",
                      [f"verl {target.release} has no key for it (it exists {where}): "
                       f"remove {setting} from the spec or target another release"], before, None, why)
    if before is None:
        why = source.absent.get(setting, "")
        return Change(setting, setting, "gained",
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
        changes.append(f"value: {WORDS[before.spelling]} -> {WORDS[after.spelling]}")
    if before.append != after.append:
        status = "plus-changed" if status == "same" else status
        changes.append("now declared by verl: drop the '+'" if before.append
                       else "no longer declared by verl: needs '+'")
    return Change(setting, setting, status, changes, before, after)


def migrate_spec(spec: Spec, source: str, target: str, *, as_written: Spec | None = None,
                 locate=None) -> Migration:
    """Compare ``spec`` compiled for ``source`` with it compiled for ``target``.

    ``spec`` is normalised; ``as_written`` is the spec before normalising (and
    ``locate`` its locator), which is compiled in memory for ``target``: the
    blockers are every problem that compile finds, so "compiles" is a fact,
    not a reading of the key maps alone.
    """
    supported = supported_releases()
    for release, flag in ((source, "--from"), (target, "--to")):
        if release not in supported:
            raise SpecError([Problem(f"{flag} {release}: verl {release} is not supported",
                                     hint=f"supported releases: {', '.join(supported)}")])
    variant = variant_of(spec)
    entry = spec.experiment.entry
    before_map = load_lock(source, variant, entry)
    missing: list[Blocker] = []
    try:
        after_map = load_lock(target, variant, entry)
    except SpecError as exc:
        # The entry point is not in the target release: that stops the compile. Its settings are still
        # compared where main_ppo's config (which every entry's config extends) puts them there.
        missing = [Blocker(p.key or "", p.message, p.hint or "") for p in exc.problems]
        after_map = load_lock(target, variant)
    changes = []
    for setting, value in settings(spec):
        changes.append(_compare(setting, _place(setting, value, before_map), _place(setting, value, after_map),
                                before_map, after_map))
    from tutorrl.compiler.release import load_keyset

    retargeted = msgspec.structs.replace(spec, experiment=msgspec.structs.replace(spec.experiment, verl=target))
    # Without the entry point there, its keys have nothing to be checked against: the entry is the blocker.
    findings = [] if missing else resolve(retargeted, after_map, load_keyset(target, variant, after_map.entry))[1]
    # A warning (a key that has a spec home, the unread overrides' count) does not stop a compile.
    blockers = missing + [Blocker(f.key, f.message, f.hint or "") for f in findings if f.severity == "error"]
    blockers += [b for b in _compile_blockers(as_written or spec, target, locate) if b not in blockers]
    config_name = spec.experiment.config_name
    selected = before_map if missing else after_map
    return Migration(source, target, variant,
                     Selection(config_name or before_map.config_name, list(before_map.select)),
                     Selection(config_name or selected.config_name, list(selected.select)),
                     changes, blockers)


def _compile_blockers(spec: Spec, target: str, locate) -> list[Blocker]:
    """What stops ``spec`` compiling once ``experiment.verl = target``: the compiler's own answer."""
    from tutorrl.compiler.pipeline.assemble import assemble
    from tutorrl.compiler.pipeline.compile import resolve_parsed

    if locate is None:
        from tutorrl.compiler.spec.load import Locator

        locate = Locator("spec", {})
    retargeted = msgspec.structs.replace(spec, experiment=msgspec.structs.replace(spec.experiment, verl=target))
    try:
        normalised, lock, resolved, warnings = resolve_parsed(retargeted, locate)
        assemble(normalised, resolved, lock, warnings=warnings)
    except SpecError as exc:
        return [Blocker(p.key or "", p.message, p.hint or "") for p in exc.problems]
    return []


class Migrated(msgspec.Struct, frozen=True):
    """What ``tutorrl migrate`` found for a spec file: the migration, the file, and the spec's entry point
    (None for main_ppo)."""

    migration: Migration
    spec: str
    entry: str | None


def migrate_file(path: str, target: str, source: str | None = None) -> Migrated:
    """What moves for the spec file at ``path`` from ``source`` (default: its own ``experiment.verl``) to ``target``."""
    from tutorrl.compiler.spec import parse_spec, read_spec_bytes
    from tutorrl.compiler.spec.normal_form import normalize

    as_written, locate = parse_spec(read_spec_bytes(path, path), path)
    spec = normalize(as_written)
    migration = migrate_spec(spec, source or spec.experiment.verl, target, as_written=as_written, locate=locate)
    return Migrated(migration, path, spec.experiment.entry)
