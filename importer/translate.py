"""A verl launch (config selection + Hydra overrides) -> a tutorrl spec, and why each override went where.

Pure apart from parsing with Hydra's own ``OverridesParser`` (so a value means
what Hydra would read): every override is looked up in the target release's
lock -- the same data the compiler writes with -- and becomes

* ``field``: the spec field that writes its key (a table field takes each
  entry of a dict verl reads whole);
* ``extra``: ``[verl] extra_overrides``, as written, when the spec has no field
  for the key or cannot hold the value (an interpolation, ``null``, a deletion,
  a value outside the field's type) -- still checked by the compiler;
* ``unread``: a key the release accepts and never reads, kept as written in
  ``[verl] unread_overrides`` (so the spec launches what the script did) and
  named with the key that is read (a launch that sets it never did what it
  said on the release's own verl; a fork may read it);
* ``dropped``: an override a later one of the same setting replaces;
* ``refused``: what the compiler would refuse, with its message.

The spec is then validated with the compiler's own loader; an override whose
value the field refuses moves to ``extra_overrides`` with the reason. Shell
variables a script left unset arrive as ``__UNSET_NAME__`` placeholders and
stay in the spec, where the compiler refuses them until they are filled in.
"""

from __future__ import annotations

import os
import re
from typing import Any, Literal

import msgspec

from tutorrl.compiler.release import EVIDENCE_CALLBACK, Lock, load_lock
from tutorrl.compiler.spec import PLACEHOLDER as _PLACEHOLDER_TEXT

How = Literal["field", "extra", "unread", "dropped", "refused", "selection"]
# In the compiler's refusal of a '+' key the dataclass verl builds has no field for.
STOPS_VERL = "refuses fields it does not declare"
# The root an imported recipe spec names its checkout's folder by (specs/dapo_example.toml's).
RECIPE_ROOT = "RECIPE_ROOT"
# How the note of an override the translation left out of the launch begins (a retired key at the value the
# release always has, a moved key's repeat): the report lists it once, with what the launch carried.
LEFT_OUT = "left out: "
PLACEHOLDER = re.compile(_PLACEHOLDER_TEXT)


class Mapped(msgspec.Struct, frozen=True, omit_defaults=True):
    """Where one override of the launch went."""

    override: str
    how: How
    field: str = ""
    note: str = ""


class Translation(msgspec.Struct, frozen=True):
    release: str
    variant: str
    config_name: str | None
    config_path: str | None
    spec: dict
    mapped: list[Mapped]
    placeholders: list[str]
    # The entry point the launch starts (entries.toml's name; "" for main_ppo): its own lock and key set.
    entry: str = ""
    # The launch's overrides as translated: each key its entry point's own config moved carried (entries.toml's
    # ``moved``), with what the move adds; and a note per carried or added override.
    launch: list[str] = []
    carried: dict[str, str] = {}


def variant_of(config_name: str | None, overrides) -> str:
    """FSDP or Megatron: the launch's config name, or its model_engine choice, says which."""
    if config_name and "megatron" in config_name:
        return "megatron"
    return "megatron" if any(o.lstrip("+") == "model_engine=megatron" for o in overrides) else "fsdp"


def translate(overrides: list[str], release: str, *, config_name: str | None = None,
              config_path: str | None = None, variant: str | None = None, moves: bool = False,
              entry: str = "", recipe: str = "") -> Translation:
    """The spec for a launch of ``release`` (raises SpecError for an unsupported release); ``entry``: the
    entry point it starts (a name of entries.toml, "" for main_ppo), whose own lock and key set it reads.

    ``moves``: a key the release lacks goes to its setting's key here even when the release would take it as
    written and never read it (what :func:`meant_settings` offers; never the spec itself)."""
    variant = variant or variant_of(config_name, overrides)
    lock = load_lock(release, variant, entry or None)
    from tutorrl.compiler.release import load_keyset

    keyset = load_keyset(release, variant, entry or "ppo")
    from tutorrl.importer.overrides import parse

    moved_notes: dict[str, str] = {}
    if entry and entry != "ppo":
        overrides, moved_notes = carry_entry_moves(list(overrides), entry, keyset)
    overrides, left_out = leave_out_retired(list(overrides), release, variant, keyset)
    spec: dict = {"experiment": {"verl": release, **({"entry": entry} if entry and entry != "ppo" else {})}}
    if recipe:
        # A recipe entry's checkout (absolute, this machine's): a root whose default is the folder above it,
        # as a spec author names the recipe (launch.sh puts that folder, or for an entry whose import root is
        # the checkout, the checkout itself on PYTHONPATH).
        from tutorrl.compiler.release import find_entry

        parent, name = os.path.split(os.path.normpath(recipe))
        found = find_entry(entry)
        spec["experiment"]["recipe"] = {"path": f"${RECIPE_ROOT}/{name}",
                                        **({"git": found.repository} if found is not None and found.repository else {})}
        spec["roots"] = {RECIPE_ROOT: {"default": parent}}
    if variant == "megatron":
        spec["actor"] = {"strategy": "megatron"}
    from tutorrl.compiler.pipeline import interpolated, interpolated_into

    # Keys another value of the launch interpolates (``${data.fork_temp}``): read through it.
    referenced = interpolated(list(overrides))
    mapped: list[Mapped] = []
    placed: dict[str, int] = {}  # field -> index in mapped (a later override of the same key wins)
    extra: list[str] = []
    unread: list[str] = []

    if config_name is not None and config_name.removesuffix(".yaml") != lock.config_name:
        spec["experiment"]["config_name"] = config_name.removesuffix(".yaml")
    if config_path is not None:
        spec["experiment"]["config_path"] = config_path

    by_key = {t.key: (name, t) for name, t in lock.targets.items() if t.kind == "value"}
    tables = sorted(((t.key, name, t) for name, t in lock.targets.items() if t.kind == "table"),
                    key=lambda x: -len(x[0]))
    for text in overrides:
        if text in lock.select:
            mapped.append(Mapped(text, "selection", note="selects verl's Megatron config"))
            continue
        try:
            parsed = parse(text)
        except Exception as exc:  # Hydra's grammar errors come in several types
            mapped.append(Mapped(text, "refused", note=f"Hydra cannot parse it: {_first_line(exc)}"))
            continue
        key = parsed.key_or_group
        kind = parsed.type.name  # CHANGE | ADD | FORCE_ADD | DEL
        ignored = lock.ignored_by(key)
        if ignored is not None and not interpolated_into(key, referenced):
            unread.append(text)
            mapped.append(Mapped(text, "unread", note=f"verl {release} accepts '{key}' and never reads it: "
                                 f"{ignored.reason}" + (f"; {ignored.advice(key)}" if ignored.advice(key) else "")))
            continue
        if kind == "DEL" or parsed.is_sweep_override() or parsed.package is not None:
            extra.append(text)
            mapped.append(Mapped(text, "extra", note="a deletion, sweep or package override has no spec field"))
            continue
        value = parsed.value()
        home = _home(key, value, by_key, tables)
        moved = ""
        if (home is None and not keyset.has(key) and not _reads_as_written(key, lock)
                and (moves or not _accepted_unread(text, lock, keyset, referenced))):
            # Only a key this release lacks is a moved one: a key it declares
            # under another setting's old name is its own key, and so is one it
            # reads undeclared (0.7.1 migrates reward_model.reward_kwargs itself).
            # And one the release takes as written and never reads is the launch's
            # own, ignored: moved, the spec would switch on under the new name what
            # the launch ran without (0.9.0's +reward_model.reward_kwargs.* beside an
            # equally unread reward_model.reward_manager). It stays as written
            # (unread_overrides, with its warning); meant_settings offers the home.
            home, moved = _moved_home(key, value, lock, by_key, tables)
        if home is None:
            if kind == "ADD" and keyset.refuses_append(key):
                # Hydra refuses '+' on a key the config declares (a launch written before the release declared
                # it); the launch meant to set it, as a spec field's '+' is computed from the release's key set.
                extra.append(text[1:])
                mapped.append(Mapped(text, "extra", note=f"the '+' is dropped: verl {release} declares '{key}' and "
                                     "Hydra refuses '+' on a key the config has"))
                continue
            extra.append(text)
            mapped.append(Mapped(text, "extra", note="no spec field for this key"))
            continue
        field, path, spec_value, why = home
        if why:
            extra.append(text)
            mapped.append(Mapped(text, "extra", field=field, note=why))
            continue
        note = moved
        if not moved and kind != "CHANGE" and not _plus_matches(kind, key, lock):
            note = "the '+' is computed from the release's key set"
        _put(spec, path, spec_value)
        slot = ".".join(path)
        if slot in placed:
            earlier = mapped[placed[slot]]
            mapped[placed[slot]] = msgspec.structs.replace(earlier, how="dropped", note="set again later in the launch; "
                                                           "Hydra keeps the last value")
        placed[slot] = len(mapped)
        mapped.append(Mapped(text, "field", field=slot, note=note))

    if moved_notes:
        mapped = [msgspec.structs.replace(m, note=moved_notes[m.override] + (f"; {m.note}" if m.note else ""))
                  if m.override in moved_notes else m for m in mapped]
    left_out.update({text: note for text, note in moved_notes.items() if note.startswith(LEFT_OUT)})
    mapped += [Mapped(text, "dropped", note=note) for text, note in left_out.items()]
    if extra or unread:
        spec["verl"] = {k: v for k, v in (("extra_overrides", extra), ("unread_overrides", unread)) if v}
    placeholders = sorted({m for m in PLACEHOLDER.findall(repr(spec))})
    return Translation(release, variant, config_name, config_path, spec, mapped, placeholders,
                       "" if entry == "ppo" else entry, list(overrides), {**moved_notes, **left_out})


def carry_entry_moves(overrides: list[str], entry: str, keyset) -> tuple[list[str], dict[str, str]]:
    """The launch's overrides with each key the entry point's own config moved (entries.toml's ``moved``)
    carried to where its pinned code reads it, and what each move adds that the launch does not set; with a
    note per carried or added override.

    verl-recipe moved DAPO's overlong buffer (``reward_model.overlong_buffer.*`` to
    ``reward.reward_kwargs.overlong_buffer_cfg.*``) after 11 of its launches were written: as written, verl
    refuses them; carried, they run what they meant.
    """
    from tutorrl.compiler.release import find_entry

    found = find_entry(entry)
    if found is None or not found.moved:
        return overrides, {}
    written = {o.partition("=")[0].lstrip("+~") for o in overrides}
    out: list[str] = []
    notes: dict[str, str] = {}
    added: set[str] = set()
    for text in overrides:
        head, sep, value = text.partition("=")
        key = head.lstrip("+~")
        moved = found.moved_key(key) if sep and head[:len(head) - len(key)] in ("", "+", "++") else None
        if moved is None:
            out.append(text)
            continue
        new, fact = moved
        # The '+' is the new config's: Hydra takes a plain override only of a key the config declares.
        carried = f"{'' if keyset.has(new) else '+'}{new}={value}"
        if carried in overrides:
            # The launch sets the new key to the same value as well (entropy's set both): once is what it says.
            notes[text] = f"{LEFT_OUT}the launch sets '{carried}' too; {fact.why}"
            continue
        out.append(carried)
        notes[carried] = f"carried from '{key}': {fact.why}"
        for key_added, value_added in sorted(fact.adds.items()):
            if key_added in written or key_added in added:
                continue
            added.add(key_added)
            text_added = f"{'' if keyset.has(key_added) else '+'}{key_added}={value_added}"
            out.append(text_added)
            notes[text_added] = (f"added with the move of '{key}': {entry}'s code before the move derived it "
                                 "itself; its config now takes it as a key")
    return out, notes


def leave_out_retired(overrides: list[str], release: str, variant: str, keyset) -> tuple[list[str], dict[str, str]]:
    """The launch's overrides without each that sets a key the release removed to the value whose behaviour
    it kept as its only one (the key map's ``[[retired]]``), and a note per override left out.

    verl-recipe's QAT launches set ``trainer.use_legacy_worker_impl=disable`` beside keys only verl 0.8.0 has,
    which removed that switch: as written no release takes them; without it, 0.8.0 runs what they asked for.
    A key the release (or the entry's own config) still declares is kept, whatever its value.
    """
    from tutorrl.compiler.release import load_keymap
    from tutorrl.importer.overrides import parse

    keymap = load_keymap()
    if not keymap.retired:
        return overrides, {}
    out: list[str] = []
    notes: dict[str, str] = {}
    for text in overrides:
        head, sep, _ = text.partition("=")
        key = head.lstrip("+")
        fact = keymap.retired_at(key, release, variant) if sep and not head.startswith("~") else None
        if fact is None or keyset.has(key) or not _same_value(text, f"{key}={fact.always}", parse):
            out.append(text)
            continue
        notes[text] = f"{LEFT_OUT}{fact.reason}; '{fact.always}' asks for what it always does"
    return out, notes


def _same_value(text: str, other: str, parse) -> bool:
    try:
        return parse(text.lstrip("+")).value() == parse(other).value()
    except Exception:  # Hydra's grammar errors come in several types; an unreadable value is not the same
        return False


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _plus_matches(kind: str, key: str, lock: Lock) -> bool:
    for target in lock.targets.values():
        if target.kind == "value" and target.key == key:
            return (kind != "CHANGE") == target.plus
    return True  # table entries: the compiler decides per entry


def _expressible(value: Any) -> str:
    """Why a Hydra value cannot be a spec value ('' when it can)."""
    if value is None:
        return "null (verl's 'unset') has no spec spelling; kept as written"
    text = repr(value)
    if "${" in text:
        return "an interpolation is resolved by OmegaConf at run time; kept as written"
    if isinstance(value, float) and value != value:
        return "nan cannot be written in a spec"
    return ""


def _home(key: str, value: Any, by_key: dict, tables: list):
    """(field, spec path, spec value, why-not) for ``key``, or None when no field writes it."""
    if key in by_key:
        name, target = by_key[key]
        why = _expressible(value)
        if why:
            return name, name.split("."), None, why
        if target.spelling == "pkg":
            if isinstance(value, str) and value.startswith("pkg://"):
                return "reward.module", ["reward", "module"], value[len("pkg://"):], ""
            return "reward.path", ["reward", "path"], value, ""
        if target.spelling == "module-file":
            # A file path: the spec's reward.path writes the same key plainly.
            return "reward.path", ["reward", "path"], value, ""
        if target.spelling == "evidence-callback":
            if value == EVIDENCE_CALLBACK:
                return name, name.split("."), True, ""
            return name, name.split("."), None, "another checkpoint callback class; kept as written"
        if name == "actor.strategy" and value == "megatron":
            return None
        return name, name.split("."), value, ""
    for base, name, _target in tables:
        if key.startswith(base + "."):
            why = _expressible(value)
            sub = key[len(base) + 1:].split(".")
            if why:
                return name, name.split(".") + sub, None, why
            return name, name.split(".") + sub, value, ""
    return None


def _accepted_unread(text: str, lock: Lock, keyset, referenced) -> bool:
    """Whether the release takes ``text`` as written and never reads it (the compiler's own judgement)."""
    from tutorrl.compiler.pipeline import check_extra, never_read

    _, problem = check_extra(text, lock, keyset, {}, None, referenced)
    return never_read(problem)


def _reads_as_written(key: str, lock: Lock) -> bool:
    """Whether the release reads ``key`` though no yaml declares it (itself, or a dict above it read whole)."""
    return key in lock.undeclared or lock.passthrough_above(key) is not None


def _moved_home(key: str, value: Any, lock: Lock, by_key: dict, tables: list):
    """The field of a key another release uses for a setting this release has under another key."""
    from tutorrl.compiler.release import load_keymap, settings_writing

    keymap = load_keymap()
    for setting in settings_writing(key):
        target = lock.targets.get(setting)
        if target is None:
            continue
        if target.kind == "table":
            base = next(e.key for _, e in keymap.setting[setting].entries() if e.key and key.startswith(e.key + "."))
            new = f"{target.key}.{key[len(base) + 1:]}"
        else:
            new = target.key
        home = _home(new, value, by_key, tables)
        if home is not None:
            return home, f"the key moved: verl {lock.release} calls it '{new}'"
    return None, ""


def _put(spec: dict, path: list[str], value: Any) -> None:
    node = spec
    for part in path[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ValueError(f"{'.'.join(path)} is both a value and a table")
    node[path[-1]] = value


def validate(translation: Translation) -> Translation:
    """Move every override whose value the spec field refuses to extra_overrides, with the reason.

    Placeholder problems stay: the compiler refuses them until the user fills them in.
    """
    import tomli_w

    from tutorrl.compiler.spec import parse_spec
    from tutorrl.errors import SpecError

    spec = _copy(translation.spec)
    mapped = list(translation.mapped)
    for _ in range(len(mapped) + 1):
        try:
            parse_spec(tomli_w.dumps(spec).encode(), "imported.toml")
            break
        except SpecError as err:
            moved = False
            for problem in err.problems:
                key = problem.key or ""
                index = _owner(mapped, key)
                if index is None or PLACEHOLDER.search(repr(_get(spec, key))):
                    continue
                m = mapped[index]
                _remove(spec, m.field.split("."))
                spec.setdefault("verl", {}).setdefault("extra_overrides", []).append(m.override)
                mapped[index] = msgspec.structs.replace(m, how="extra", note=f"{m.field} refuses it: {problem.message}")
                moved = True
            if not moved:
                break
    spec, mapped = _drop_unread(translation, spec, mapped)
    return msgspec.structs.replace(translation, spec=spec, mapped=mapped)


def _key_of(text: str) -> str:
    return text.split("=", 1)[0].lstrip("+~")


def _drop_unread(translation: Translation, spec: dict, mapped: list[Mapped]):
    """Raw overrides verl would accept and never read move to ``unread_overrides``, named, as the compiler refuses
    them in extra_overrides; those verl would stop on (a field the dataclass it builds the section into lacks) are
    left out, as refused."""
    from tutorrl.compiler.release import load_keyset
    from tutorrl.compiler.pipeline import check_extra
    from tutorrl.compiler.pipeline import interpolated, never_read

    extra = spec.get("verl", {}).get("extra_overrides", [])
    if not extra and not spec.get("verl", {}).get("unread_overrides"):
        return spec, mapped
    lock = load_lock(translation.release, translation.variant, translation.entry or None)
    keyset = load_keyset(translation.release, translation.variant, translation.entry or "ppo")
    # The engine the compile will judge by: the launch's rollout.name, else the release's default.
    engine = spec.get("rollout", {}).get("engine") or (lock.targets["rollout.engine"].default
                                                       if "rollout.engine" in lock.targets else None)
    keep, unread = [], list(spec["verl"].get("unread_overrides", []))
    # A key another value of the launch interpolates is read through it.
    referenced = interpolated([m.override for m in mapped])
    other_engine = _other_model_engine(extra)
    for text in extra:
        _, problem = check_extra(text, lock, keyset, {}, engine, referenced)
        if other_engine and problem is not None and STOPS_VERL in problem[0]:
            # The dataclass named is the FSDP config's; the launch's engine builds its own (MindSpeed's
            # declares mcore_kwargs): kept as written, and the compiler says what it cannot check.
            index = next(i for i, m in enumerate(mapped) if m.override == text)
            mapped[index] = msgspec.structs.replace(
                mapped[index], note=f"the launch selects verl's {other_engine} engine (model_engine={other_engine}), "
                                    "which tutorrl has no key set for (fsdp and megatron only); kept as written")
            keep.append(text)
        elif never_read(problem):
            index = next(i for i, m in enumerate(mapped) if m.override == text)
            mapped[index] = msgspec.structs.replace(mapped[index], how="unread", note=problem[0])
            unread.append(text)
        elif problem is not None and STOPS_VERL in problem[0]:
            index = next(i for i, m in enumerate(mapped) if m.override == text)
            mapped[index] = msgspec.structs.replace(mapped[index], how="refused",
                                                    note=f"{problem[0]}; the spec leaves it out")
        else:
            keep.append(text)
    # In the launch's order, as a reader of the script would look for them; a key set
    # twice is the later value, as Hydra keeps it (a spec field does the same).
    order = {m.override: i for i, m in enumerate(mapped)}
    unread.sort(key=lambda t: order.get(t, len(order)))
    last = {_key_of(t): i for i, t in enumerate(unread)}
    for text in [t for i, t in enumerate(unread) if last[_key_of(t)] != i]:
        index = next(i for i, m in enumerate(mapped) if m.override == text and m.how == "unread")
        mapped[index] = msgspec.structs.replace(mapped[index], how="dropped",
                                                note="set again later in the launch; Hydra keeps the last value")
    unread = [t for i, t in enumerate(unread) if last[_key_of(t)] == i]
    spec["verl"] = {k: v for k, v in (("extra_overrides", keep), ("unread_overrides", unread)) if v}
    if not spec["verl"]:
        spec.pop("verl")
    return spec, mapped


#: verl's model engines (the ``model_engine`` config group) tutorrl has key sets for: its fsdp and megatron variants.
KNOWN_ENGINES = ("dp", "megatron")


def _other_model_engine(overrides: list[str]) -> str | None:
    """The model engine a launch selects that tutorrl has no key set for (verl 0.9's veomni, mindspeed,
    torchtitan), or None."""
    for text in overrides:
        head, _, value = text.lstrip("+").partition("=")
        if head == "model_engine" and value not in KNOWN_ENGINES:
            return value
    return None


def _owner(mapped: list[Mapped], key: str) -> int | None:
    best = None
    for i, m in enumerate(mapped):
        if m.how == "field" and (key == m.field or key.startswith(m.field + ".") or m.field.startswith(key + ".")):
            best = i
    return best


def _get(spec: dict, dotted: str):
    node: Any = spec
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _remove(spec: dict, path: list[str]) -> None:
    nodes = [spec]
    for part in path[:-1]:
        nodes.append(nodes[-1].get(part, {}))
    nodes[-1].pop(path[-1], None)
    for depth in range(len(path) - 1, 0, -1):
        if not nodes[depth]:
            nodes[depth - 1].pop(path[depth - 1], None)


def _copy(value):
    import copy

    return copy.deepcopy(value)


# Sections in the order the spec declares them, for readable output.
_ORDER = ["experiment", "roots", "data", "model", "algorithm", "actor", "ref", "rollout", "critic", "trainer",
          "resources", "reward", "env", "verl"]


def render_spec(translation: Translation, source: str) -> str:
    """The spec as TOML: a header naming the source and release, sections in spec order."""
    import tomli_w

    from tutorrl.compiler.pipeline import spec_settings

    order = {name: i for i, name in enumerate(spec_settings())}
    spec = translation.spec

    def sort(section: str, table: dict, prefix: str) -> dict:
        def rank(item):
            name = f"{prefix}{item[0]}"
            return order.get(name, min((v for k, v in order.items() if k.startswith(name + ".")), default=10**6))
        out = {}
        for k, v in sorted(table.items(), key=rank):
            out[k] = sort(section, v, f"{prefix}{k}.") if isinstance(v, dict) and not _is_table_field(
                f"{prefix}{k}") else v
        return out

    ordered = {s: sort(s, spec[s], f"{s}.") for s in _ORDER if s in spec}
    lines = [f"# Imported by `tutorrl import` from {source}, for verl {translation.release} ({translation.variant}).",
             "# Each setting is the launch's own value; everything it did not say is left to verl's defaults."]
    if translation.placeholders:
        lines.append("# Fill in the __UNSET_*__ placeholders (shell variables the script read but never set):")
        lines.append("# tutorrl compile refuses the spec until they are gone.")
    body = tomli_w.dumps(ordered, multiline_strings=False)
    if "roots" in ordered:
        # `[roots] NAME = { default = "..." }`, as the README writes a root.
        entries = "".join(f"{name} = {{ default = {tomli_w.dumps({'d': r['default']})[4:].strip()} }}\n"
                          for name, r in ordered["roots"].items())
        body = re.sub(r"(\[roots\.[A-Za-z0-9_]+\]\ndefault = [^\n]*\n\n)+", lambda _: f"[roots]\n{entries}\n", body,
                      count=1)
    meant = meant_settings(translation)
    if meant:
        # Offered, not set: the spec is the launch as verl runs it, so the round
        # trip holds; these lines are what the script meant, where verl reads it.
        body += (f"\n# The launch sets keys verl {translation.release} never reads ([verl] unread_overrides keeps them; "
                 "verl runs without them).\n"
                 "# What they meant, in the settings this release reads; add them (and delete those unread overrides) to have "
                 "it done:\n")
        body += "".join(f"#   [{field.split('.', 1)[0]}] {field.split('.', 1)[1]} = {shown}    (for {override})\n"
                        for field, shown, override in meant)
    return "\n".join(lines) + "\n\n" + body


def meant_settings(translation: Translation) -> list[tuple[str, str, str]]:
    """(spec field, its value as TOML, the override) for each dropped override the release reads under another key.

    verl 0.9 declares ``reward_model.reward_manager`` and never reads it; it
    reads ``reward.reward_manager.name``, which the spec's ``reward.manager`` writes.
    """
    import tomli_w

    lock = load_lock(translation.release, translation.variant, translation.entry or None)
    out = []
    for m in translation.mapped:
        if m.how != "unread":
            continue
        head, sep, value = m.override.partition("=")
        key = head.lstrip("+~")
        ignored = lock.ignored_by(key)
        new = next((n + key[len(o):] for o, n in (ignored.instead.items() if ignored else ()) if key.startswith(o)),
                   None)
        if not sep:
            continue
        if new is None:
            # A key this release lacks, where another release's key map has the setting (the same
            # move translate makes for a key Hydra would refuse as written).
            there = translate([m.override], translation.release, variant=translation.variant, moves=True,
                              entry=translation.entry)
        else:
            there = translate([f"{head[:len(head) - len(key)]}{new}={value}"], translation.release,
                              variant=translation.variant, entry=translation.entry)
        home = there.mapped[-1]
        if home.how == "field":
            shown = tomli_w.dumps({"v": _get(there.spec, home.field)})[4:].strip()
            out.append((home.field, shown, m.override))
    return out


def _is_table_field(name: str) -> bool:
    from tutorrl.compiler.release import load_keymap

    setting = load_keymap().setting.get(name)
    return setting is not None and setting.kind == "table"


def rootify(translation: Translation, places: list) -> Translation:
    """Values under a machine-specific folder become roots, as a spec author writes them.

    ``places``: (name, folder) pairs, the longest folder first; ``HOME`` names
    the importing user's home (``$HOME/data/...`` becomes root ``HOME_DATA``
    with that folder as its default), any other name is the root's own
    (``SCRIPT_DIR``: the script's folder). Only a spec field's own value (a
    path or a list of paths, outside tables verl reads whole) can start with a
    root; anything else keeps the literal value.
    """
    import re as _re

    if not places:
        return translation
    spec = _copy(translation.spec)
    roots: dict[str, str] = {}

    def root_of(value: str):
        for name, folder in places:
            folder = folder.rstrip("/") or "/"
            if folder == "/" or not (value == folder or value.startswith(folder + "/")):
                continue
            rest = value[len(folder):]
            if name == "HOME":
                first = rest.lstrip("/").split("/", 1)[0]
                if first and _re.fullmatch(r"[A-Za-z0-9_]+", first) and "/" in rest.lstrip("/"):
                    name, folder, rest = f"HOME_{first.upper()}", f"{folder}/{first}", rest[len(first) + 1:]
                else:
                    name = "HOME_DIR"
            if roots.get(name, folder) != folder:
                return None
            roots[name] = folder
            return f"${name}{rest}"
        return None

    for m in translation.mapped:
        if m.how != "field" or _under_table(m.field):
            continue
        value = _get(spec, m.field)
        if isinstance(value, str):
            new = root_of(value)
            if new is not None:
                _put(spec, m.field.split("."), new)
        elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            news = [root_of(v) for v in value]
            _put(spec, m.field.split("."), [n if n is not None else v for n, v in zip(news, value)])
    if not roots:
        return translation
    roots = {**{name: r["default"] for name, r in spec.get("roots", {}).items()}, **roots}
    spec["roots"] = {name: {"default": folder} for name, folder in sorted(roots.items())}
    return msgspec.structs.replace(translation, spec=spec)


def _under_table(name: str) -> bool:
    parts = name.split(".")
    return any(_is_table_field(".".join(parts[:i])) for i in range(1, len(parts) + 1))
