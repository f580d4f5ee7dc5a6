"""Settings x the release's lock -> the exact verl overrides.

Pure: :func:`resolve` looks every setting of a normalised spec up in the lock
of its release and variant, spells each value for that release, computes
Hydra's ``+`` from the lock (never from the user), and checks the user's
``extra_overrides`` against the release's key set. A setting with no key in
the target release is an error naming the releases where it does exist.
"""

from __future__ import annotations

import re

import msgspec

from tutorrl.compiler.release import (
    Lock,
    describe_releases,
    load_keymap,
    load_lock,
    render_value,
    settings_writing,
    skipped,
    spell,
)
from tutorrl.compiler.release.spelling import is_runtime
from tutorrl.compiler.release.keymap import releases_with
from tutorrl.compiler.spec import Spec, flatten_table, settings
from tutorrl.errors import Finding



class _once:
    """A value computed on first read and kept in the instance's ``__dict__``.

    functools.cached_property does the same under a lock taken on every first
    read before Python 3.12, which a 1,000-spec ``tutorrl check`` feels. An
    Override is built and read by one thread."""

    def __init__(self, compute):
        self.compute, self.name, self.__doc__ = compute, compute.__name__, compute.__doc__

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        # A non-data descriptor: once kept, the instance's own entry is read first.
        value = obj.__dict__[self.name] = self.compute(obj)
        return value


# dict=True: room for `text`, computed once (the bundle and the argument-length check both read it).
class Override(msgspec.Struct, frozen=True, dict=True):
    """One ``key=value`` for verl, and the spec setting it came from."""

    setting: str
    key: str
    value: object
    append: bool = False
    # Raw user text (extra_overrides, config-group choices) is passed as written.
    raw: str | None = None
    spelling: str = "plain"
    # ``++``: an entry of a table that interpolates another (Target.forced says why).
    force: bool = False

    @property
    def runtime(self) -> bool:
        return is_runtime(self.spelling)

    @property
    def spelled(self) -> str:
        """The override's left side: ``++key`` forced, ``+key`` for an append, else ``key``."""
        return ("++" if self.force else "+" if self.append else "") + self.key

    @_once
    def text(self) -> str:
        if self.raw is not None:
            return self.raw
        if self.runtime:
            raise ValueError(f"the value of {self.key} is only known when launch.sh runs")
        return f"{self.spelled}={render_value(self.value)}"


class Resolved(msgspec.Struct, frozen=True):
    config_name: str
    config_path: str | None
    overrides: tuple[Override, ...]


def resolve(spec: Spec, lock: Lock, keyset=None, *, keep_refused: bool = False) -> tuple[Resolved, list[Finding]]:
    """Overrides for ``spec`` under ``lock``, and every problem found.

    ``keyset`` (the release's ``KeySet``) is only needed to check
    ``extra_overrides`` and is loaded by the caller when there are any.
    ``keep_refused``: a raw override refused is still in the launch, as written
    (the import's proof of a spec the compiler refuses; compile_bytes never).
    """
    findings: list[Finding] = []
    overrides: list[Override] = [Override("variant", sel.partition("=")[0], sel.partition("=")[2], raw=sel)
                                 for sel in lock.select]
    emitted: dict[str, str] = {}
    for setting, value in settings(spec):
        target = lock.targets.get(setting)
        if target is None:
            findings.append(missing_setting(setting, lock))
            continue
        if target.kind == "table":
            for sub, item in flatten_table(value):
                key, plus = target.written(sub)
                if plus and not (target.passthrough or _under_open(sub, target.open)):
                    findings.append(Finding(f"{setting}.{sub}",
                                     f"{config_of(lock)} declares no '{key}', and nothing in verl "
                                     f"reads '{target.key}' whole: verl would accept the entry and never read it"
                                     + _read_whole_elsewhere(key, lock),
                                     _near_entry(sub, target.declared)))
                    continue
                if key in emitted:
                    findings.append(Finding(f"{setting}.{sub}", f"'{key}' is also set by the spec's {emitted[key]}", None))
                    continue
                emitted[key] = setting
                overrides.append(Override(setting, key, item, plus, force=target.forced(sub)))
            continue
        value = spell(value, target.spelling)
        if skipped(value):
            continue
        if target.key in emitted:
            findings.append(Finding(setting, f"'{target.key}' is also set by the spec's {emitted[target.key]}", None))
            continue
        emitted[target.key] = setting
        overrides.append(Override(setting, target.key, value, target.plus, spelling=target.spelling))
    # verl reads an engine's own sampling fields only with that engine (keymap/passthrough.toml).
    engine = spec.rollout.engine or (lock.targets["rollout.engine"].default if "rollout.engine" in lock.targets
                                     else None)
    raw = list(spec.verl.extra_overrides) + list(spec.verl.unread_overrides)
    # Only raw overrides ask which keys are interpolated (most specs have none: no second walk).
    referenced = interpolated([value for _, value in settings(spec)] + raw) if raw else frozenset()
    allowed = frozenset(spec.verl.allow_runtime_env) | frozenset(spec.verl.allow_worker_code)
    for index, text in enumerate(spec.verl.extra_overrides):
        override, problem = check_extra(text, lock, keyset, emitted, engine, referenced, allowed)
        if problem:
            findings.append(Finding(f"verl.extra_overrides.{index}", *problem))
            if keep_refused:
                overrides.append(_as_written("verl.extra_overrides", text))
        else:
            overrides.append(override)
            home = spec_home(override.key, lock)
            if home is not None and _spec_could_say(text, lock.targets[home[0]]):
                # verl reads it either way; the spec field would let diff and
                # migrate explain it, so say so without refusing.
                findings.append(Finding(f"verl.extra_overrides.{index}", f"'{override.key}' has a home in the spec: {home[1]}",
                                 f"set {home[1]} instead, so diff and migrate can explain it", "warning"))
    overrides += _unread(spec, lock, keyset, emitted, engine, findings, keep_refused, referenced)
    config_name = spec.experiment.config_name or lock.config_name
    return Resolved(config_name, spec.experiment.config_path, tuple(overrides)), findings


# What check_extra says of a key the release accepts and never reads (an
# undeclared '+' key with nothing reading it, a key read only by another
# engine, a key the key map knows verl ignores): the one kind
# ``[verl] unread_overrides`` takes.
NEVER_READ = ("verl would accept it and never read it", "would be accepted and ignored by verl")


def never_read(problem: tuple[str, str | None] | None) -> bool:
    """Is ``problem`` (check_extra's) "the release accepts this and never reads it", and nothing worse?"""
    return problem is not None and any(mark in problem[0] for mark in NEVER_READ)


# Compiled by re's cache where first used: only a spec with raw overrides reaches them, and
# a module-level compile is paid by every cold compile.
_INTERPOLATION = r"\$\{([A-Za-z_][A-Za-z0-9_.\-]*)\}"


def interpolated(values) -> frozenset[str]:
    """The keys ``${key}`` interpolations in ``values`` (strings, lists, dicts, nested) name; not resolvers
    (``${oc.env:X}``) or relative ones (``${.x}``)."""
    out: set[str] = set()

    def walk(value) -> None:
        if isinstance(value, str):
            out.update(re.findall(_INTERPOLATION, value))
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)

    walk(values)
    return frozenset(out)


def interpolated_into(key: str, referenced: frozenset[str]) -> bool:
    """Does a value of the launch read ``key`` (``${key}``, ``${parent}``, or ``${key.child}``)?"""
    return any(key == r or key.startswith(r + ".") or r.startswith(key + ".") for r in referenced)


def _hydra_refusal(text: str, lock: Lock, keyset) -> tuple[str, str | None] | None:
    """What Hydra itself refuses of an override verl would never read: a plain override of a key
    the config lacks, a '+' on a key it has (not null). check_extra tells "never read" before
    asking, so unread_overrides asks here."""
    from tutorrl.compiler.pipeline.raw_overrides import OVERRIDE

    prefix, key, _ = OVERRIDE.match(text).groups()
    if keyset is None or prefix == "~":
        return None
    exists = keyset.has(key)
    if not prefix and not exists:
        return (f"verl {lock.release} declares no '{key}': Hydra refuses to override a key its config lacks",
                f"append it: '+{text}'")
    if prefix == "+" and keyset.refuses_append(key):
        return (f"'{key}' already exists in verl {lock.release}: Hydra refuses '+' on it", f"drop the '+': '{text[1:]}'")
    return None


def _as_written(setting: str, text: str) -> Override:
    from tutorrl.compiler.pipeline.raw_overrides import OVERRIDE

    match = OVERRIDE.match(text)
    prefix, key = match.group(1, 2) if match else ("", text)
    return Override(setting, key, None, prefix in ("+", "++"), raw=text)


def _unread(spec: Spec, lock: Lock, keyset, emitted: dict[str, str], engine: str | None,
            findings: list[Finding], keep_refused: bool = False,
            referenced: frozenset[str] = frozenset()) -> list[Override]:
    """``[verl] unread_overrides``: each passed as written where the release accepts it and never reads it.

    The list is the spec's statement that the verl it runs is not the release's
    own (a fork that reads these keys), so the release's reading is the test:
    a key it reads is refused here (extra_overrides checks it as verl reads it),
    and so is one it would refuse or stop on."""
    out: list[Override] = []
    passed = 0
    for index, text in enumerate(spec.verl.unread_overrides):
        where = f"verl.unread_overrides.{index}"
        override, problem = check_extra(text, lock, keyset, emitted, engine, referenced,
                                        frozenset(spec.verl.allow_runtime_env) | frozenset(spec.verl.allow_worker_code))
        if never_read(problem):
            problem = _hydra_refusal(text, lock, keyset) or problem
        if problem is None:
            findings.append(Finding(where, f"verl {lock.release} reads '{override.key}'",
                                    "move it to [verl] extra_overrides (or its spec field), where it is checked as "
                                    "verl reads it"))
        elif not never_read(problem):
            findings.append(Finding(where, *problem))
        else:
            out.append(_as_written("verl.unread_overrides", text))
            emitted[out[-1].key] = where
            passed += 1
            continue
        if keep_refused:
            out.append(_as_written("verl.unread_overrides", text))
    if passed:
        findings.append(Finding("verl.unread_overrides", f"verl {lock.release} never reads the {passed} "
                                f"override{'s' if passed > 1 else ''} in [verl] unread_overrides: "
                                f"{'they are' if passed > 1 else 'it is'} passed as written, for a verl that does (a fork)", None, "warning"))
    return out


def _under_open(sub: str, opened: tuple[str, ...]) -> bool:
    return "" in opened or any(sub.startswith(o + ".") for o in opened)


def _near_entry(sub: str, declared: tuple[str, ...]) -> str | None:
    import difflib

    near = difflib.get_close_matches(sub, list(declared), n=1, cutoff=0.6)
    return f"did you mean '{near[0]}'?" if near else None


def config_of(lock: Lock) -> str:
    """"verl 0.9.1 (fsdp)"; another entry point's "verl 0.9.1's fully_async (fsdp)": whose config a key is checked against."""
    return f"verl {lock.release}" + ("" if lock.entry == "ppo" else f"'s {lock.entry}") + f" ({lock.variant})"


def missing_setting(setting: str, lock: Lock) -> Finding:
    """The finding for a setting with no key in the lock's release: where it does exist, and why not here."""
    where = releases_with(setting, lock.variant)
    why = lock.absent.get(setting)
    if lock.entry != "ppo" and lock.release in where:
        # main_ppo's config of this release has its key; this entry point's own config does not.
        return Finding(setting, f"'{setting}' has no key in {config_of(lock)}", why)
    exists = describe_releases(where) if where else "in no supported verl release"
    hint = why or (f"target one of those releases in experiment.verl, or leave {setting} unset"
                   if where else None)
    return Finding(setting, f"'{setting}' exists {exists} ({lock.variant}); this spec targets {lock.release}", hint)


def moved_key(key: str, lock: Lock) -> str | None:
    """Advice for a key the release lacks that the key map knows under another release or as retired there
    (``[[retired]]``), or that the entry point's own config moved (entries.toml's ``moved``)."""
    if lock.entry != "ppo":
        from tutorrl.compiler.release import find_entry

        found = find_entry(lock.entry)
        moved = found.moved_key(key) if found is not None else None
        if moved is not None:
            new, fact = moved
            adds = "".join(f"; with it set '{k}={v}'" for k, v in sorted(fact.adds.items()))
            return f"{fact.why}: set '{new}'{adds}"
    keymap = load_keymap()
    retired = keymap.retired_at(key, lock.release, lock.variant)
    if retired is not None:
        return (f"{retired.reason}: leave it out, where it was '{retired.always}' (what verl {lock.release} always "
                "does); no other value can be honoured there")
    for setting in settings_writing(key):
        target = lock.targets.get(setting)
        if target is not None and target.kind == "table":
            base = next(e.key for _, e in keymap.setting[setting].entries()
                        if e.key and key.startswith(e.key + "."))
            tail = key[len(base) + 1:]
            return f"verl {lock.release} calls it '{target.spelled(tail)}'; set the spec's {setting}.{tail}"
        if target is not None:
            return f"verl {lock.release} calls it '{target.spelled()}'; set the spec's {setting}"
        where = releases_with(setting, lock.variant)
        if where:
            return f"it is the spec's '{setting}' setting, which exists {describe_releases(where)}"
    return None


def _entry_releases(entry: str) -> list[str]:
    """The releases of the key map at which entry point ``entry`` exists."""
    if entry == "ppo":
        return load_keymap().releases
    from tutorrl.compiler.release import find_entry

    return [r for r in load_keymap().releases if find_entry(entry).exists_at(r)]


def releases_declaring(key: str, variant: str, entry: str = "ppo") -> list[str]:
    """Releases whose key set (of entry point ``entry``) declares ``key``. Only on the error path: it
    reads every key set."""
    from tutorrl.compiler.release import load_keyset
    from tutorrl.compiler.release.keysets import available_keysets

    found = []
    for release in _entry_releases(entry):
        if (release, variant) in available_keysets() and load_keyset(release, variant, entry).has(key):
            found.append(release)
    return found


def releases_reading_undeclared(key: str, variant: str, engine: str | None = None, entry: str = "ppo") -> list[str]:
    """Releases whose lock records ``key`` as read though no yaml declares it (keymap/passthrough.toml),
    with rollout engine ``engine`` when one is given."""
    return [release for release in _entry_releases(entry)
            if load_lock(release, variant, entry).reads_undeclared(key, engine)]


def _elsewhere(key: str, lock: Lock, engine: str | None = None) -> str:
    where = releases_declaring(key, lock.variant, lock.entry)
    if where:
        return f" (it is declared {describe_releases(where)})"
    read = releases_reading_undeclared(key, lock.variant, engine, lock.entry)
    return f" (it exists {describe_releases(read)}: verl reads it there, though no yaml declares it)" if read else ""



def _read_whole_elsewhere(key: str, lock: Lock) -> str:
    """Where a table entry verl does not read here is read: the releases that declare it, or that
    hand a dict above it on whole (keymap/passthrough.toml). Only on the error path: it reads every lock."""
    said = _elsewhere(key, lock)
    if said:
        return said
    whole = {release: load_lock(release, lock.variant, lock.entry).passthrough_above(key)
             for release in _entry_releases(lock.entry)}
    where = [release for release, above in whole.items() if above]
    if not where:
        return ""
    return f" (it exists {describe_releases(where)}: verl reads '{whole[where[-1]]}' whole there)"


def _spec_could_say(text: str, target) -> bool:
    """Whether the field could hold this override's value. It cannot for an
    interpolation or null (resolved or meant by verl), a deletion, or a field
    whose spelling is not the plain value (another callback class, say)."""
    value = text.partition("=")[2].strip()
    if text.startswith("~") or "${" in value or value in ("null", "None", ""):
        return False
    return target.spelling == "plain"


def spec_home(key: str, lock: Lock) -> tuple[str, str] | None:
    """(setting, field as a user writes it) that writes ``key`` in the lock's release, if any."""
    for setting, target in lock.targets.items():
        if target.key == key and target.kind == "value":
            return setting, setting
        if target.kind == "table" and key.startswith(target.key + "."):
            return setting, f"{setting}.{key[len(target.key) + 1:]}"
    return None


def _table_value(text: str, key: str, lock: Lock, keyset, emitted: dict[str, str]):
    """``KEY=VALUE`` where the release declares ``KEY`` as a table (its keys are verl's, not ``KEY``).

    Hydra composes it: a ``{...}`` value merges into the table, which verl
    reads. Any other value replaces the table, and verl, which reads the
    table's keys (``policy_loss.get("loss_mode")``), fails on it when it gets there.
    """
    value = text.partition("=")[2].strip()
    under = sorted(e for e in emitted if e.startswith(key + "."))
    if value.startswith("{"):
        if under:
            return None, (f"the spec's {emitted[under[0]]} sets '{under[0]}' under '{key}'",
                          "set that key in the spec, and the table's other keys here one by one")
        return Override("verl.extra_overrides", key, None, False, raw=text), None
    prefix = key + "."
    children = list(dict.fromkeys(k[len(prefix):].split(".")[0] for k in keyset.keys
                                  if k.startswith(prefix) and not k[len(prefix):].startswith("_")))
    # The key a scalar most likely meant: a child that names a choice (loss_mode, name, type).
    meant = next((c for c in children if c.endswith(("mode", "name", "type"))), children[0] if children else None)
    shown = ", ".join(children[:4]) + (", …" if len(children) > 4 else "")
    hint = f"set the key you mean under it, e.g. '{key}.{meant}={value}'" if meant else None
    home = spec_home(f"{key}.{meant}", lock) if meant else None
    if home is not None:
        hint += f" (the spec's {home[1]})"
    return None, (f"'{key}' is a table in verl {lock.release} ({shown}), not a value: {value!r} would replace "
                  "the whole table, and verl reads its keys, so it fails when it gets there", hint)


def _refused_by_dataclass(key: str, lock: Lock, engine: str | None = None) -> tuple[str, str] | None:
    """The problem when ``key`` lands in a section verl builds into a dataclass that has no such field.

    A field the class does declare is not proof that verl reads it (0.7.0's
    RolloutConfig declares repetition_penalty and the agent loop sends 1.0), so
    that case is left to the key map's facts."""
    import difflib

    from tutorrl.compiler.release import load_built

    refused = load_built(lock.release, lock.variant, lock.entry).refusal(key)
    if refused is None:
        return None
    section, info, name = refused
    fields = [f for f in info.fields if not f.startswith("_")]
    near = difflib.get_close_matches(name, fields, n=1, cutoff=0.6)
    return (f"{config_of(lock)} builds {info.name} from '{section}' and refuses fields it does "
            f"not declare: '{name}' would stop verl when it builds {info.name}" + _elsewhere(key, lock, engine),
            f"did you mean '{section}.{near[0]}'?" if near else
            f"{info.name} declares: " + ", ".join(fields[:8]) + (", …" if len(fields) > 8 else ""))


def _other_engines(key: str, lock: Lock, engine: str) -> tuple[str, str]:
    """The problem for a key the release reads only with rollout engines other than the spec's."""
    only = " or ".join(lock.undeclared_engines[key])
    return (f"verl {lock.release} reads '{key}' only with rollout.name={only}; this spec's rollout is {engine}: "
            "verl would accept it and never read it" + _elsewhere(key, lock, engine),
            f"set rollout.engine = {lock.undeclared_engines[key][0]!r}, or leave the key out")


def check_extra(text: str, lock: Lock, keyset, emitted: dict[str, str], engine: str | None = None,
                referenced: frozenset[str] = frozenset(), allow_runtime_env: frozenset[str] = frozenset()):
    """One raw override: ``(Override, None)`` when verl will read it as written, else ``(None, problem)``.

    ``engine`` is the rollout engine verl runs (the spec's rollout.engine, else the release's
    default); None when not known, and then a key any engine reads counts as read.
    ``referenced``: the keys other values of the launch interpolate (``${data.fork_temp}``);
    verl reads such a key through the value that names it.
    ``allow_runtime_env``: the spec's ``[verl] allow_runtime_env`` and ``allow_worker_code`` (raw_overrides.py)."""
    # Here, not at module level: its patterns are compiled on import, and a spec without
    # raw overrides never needs them.
    from tutorrl.compiler.pipeline.raw_overrides import OVERRIDE, screen_override

    match = OVERRIDE.match(text)
    if not match or (match.group(1) != "~" and match.group(3) is None):
        return None, ("not a Hydra override", "expected KEY=VALUE, +KEY=VALUE or ~KEY")
    prefix, key, _ = match.groups()
    prefix = prefix or ""
    if key in emitted:
        return None, (f"'{key}' is set by the spec's {emitted[key]}", "change it there, so the spec says what runs")
    screened = screen_override(text, allow_runtime_env)
    if screened is not None:
        return None, screened
    through = interpolated_into(key, referenced)
    ignored = lock.ignored_by(key)
    if ignored is not None and not through:
        return None, (f"'{key}' would be accepted and ignored by verl {lock.release}: {ignored.reason}",
                      ignored.advice(key))
    if keyset is not None:
        exists = keyset.has(key)
        # A key under a dict verl reads whole is read whatever its name; a spec
        # table field's own key is one (the field writes '+KEY.entry' there).
        # And a key another value interpolates is read through that value.
        read_whole = (through or lock.passthrough_above(key) is not None or lock.reads_undeclared(key, engine)
                      or any(t.kind == "table" and key.startswith(t.key + ".") for t in lock.targets.values()))
        if not exists and prefix != "~" and not read_whole and lock.reads_undeclared(key) \
                and keyset.open_parent(key) is None:
            return None, _other_engines(key, lock, engine)
        if prefix == "" and not exists and keyset.is_prefix(key):
            return _table_value(text, key, lock, keyset, emitted)
        if prefix == "" and not exists:
            if keyset.open_parent(key) or read_whole:
                return None, (f"'{key}' is not declared by verl {lock.release}", f"append it: '+{text}'")
            near = keyset.near(key)
            return None, (f"{config_of(lock)} has no key '{key}'"
                          + _elsewhere(key, lock, engine),
                          moved_key(key, lock) or (f"did you mean '{near[0]}'?" if near else None))
        if prefix == "~" and not exists:
            return None, (f"verl {lock.release} has no key '{key}' to delete", None)
        if prefix == "+" and exists:
            if not keyset.refuses_append(key):
                return Override("verl.extra_overrides", key, None, True, raw=text), None
            return None, (f"'{key}' already exists in verl {lock.release}", f"drop the '+': '{text[1:]}'")
        if prefix in ("+", "++") and not exists:
            refused = _refused_by_dataclass(key, lock, engine)
            if refused is not None:
                return None, refused
        if prefix in ("+", "++") and not exists and keyset.open_parent(key) is None and not read_whole:
            return None, (f"verl {lock.release} declares no '{key}' and no open table or pass-through dict above it: "
                          "verl would accept it and never read it" + _elsewhere(key, lock, engine),
                          moved_key(key, lock))
        if exists and prefix != "~":
            # Here, not at module level: its patterns are compiled on import, and a spec without
            # extra_overrides never needs them.
            from tutorrl.compiler.pipeline.value_types import type_refusal

            info = keyset.keys[key]
            wrong = type_refusal(key, text.partition("=")[2], info.type, info.default, lock.release)
            from tutorrl.compiler.spec.load import PLACEHOLDER

            # An import's stand-in for a variable the script never set: refused by the placeholder screen.
            if wrong is not None and not re.search(PLACEHOLDER, text):
                return None, wrong
    return Override("verl.extra_overrides", key, None, prefix in ("+", "++"), raw=text), None
