"""Importing a launch: capture the script, pick the release, translate, prove the round trip, write the spec.

:func:`import_script` is ``tutorrl import`` without the printing (``tutorrl.api.import_script``);
``importer/text.py`` writes its report."""

from __future__ import annotations

import gc
import math
import re
from pathlib import Path

import msgspec

from tutorrl.errors import InputError, Problem, RefusedError


class ImportReport(msgspec.Struct):
    source: str
    release: str
    variant: str
    release_reason: str
    spec_path: str | None
    mapped: list
    unset: dict
    placeholders: list[str]
    other_commands: list[str]
    exact: bool | None
    not_checked: str = ""
    differences: list = []
    normalised: list[str] = []
    other_releases: str = ""
    # What compiling the imported spec warns (settings with no effect, rules verl does not enforce).
    warnings: list[str] = []
    # How the script ran: the kernel's features and each confinement property
    # (confined, how); empty for an override list, which runs nothing.
    sandbox: str = ""
    confinement: dict = {}
    # Entries of the script's folder not copied into the sandbox (FIFOs, sockets, devices, unreadable).
    skipped: list[str] = []
    # What the round trip stood in for placeholders, the settings the release never reads, ...
    notes: list[str] = []
    # What the compiler refuses in the imported spec, each with its place (none when it compiles). The round trip
    # is proven with the spec as written all the same: these name what to change before it runs (verl refuses
    # the same at start).
    does_not_compile: list[str] = []
    # Roots the spec declares for machine-specific folders, with their defaults (this machine's).
    roots: dict = {}
    # Each clock read of the script and where its (frozen) answer went.
    clock: list[str] = []
    # The launch's overrides of keys its entry point's own config moved (entries.toml's ``moved``), as the
    # spec carries them: verl refuses the launch as written, so the round trip's reference is the carried one.
    carried: list[str] = []


def _parse_vars(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.isidentifier():
            raise InputError([Problem(f"--var {item!r}: expected NAME=VALUE")])
        out[name] = value
    return out


def _parse_timeout(text: str, most: float) -> float:
    # float() takes nan, inf and 1e400 (inf): each would be no limit at all.
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 < value <= most):
        raise InputError([Problem(f"--timeout {text!r}: give the seconds the script may run, a number above 0 "
                                  f"and at most {most:g} (nan, inf or 1e400 would be no limit at all)")])
    return value


class Prepared(msgspec.Struct):
    """One launch to import: what the script ran, in this machine's terms."""

    source: str
    config_name: str | None
    config_path: str | None
    overrides: list[str]
    unset: dict
    others: list[str]
    # (root name, this machine's folder): values under it become "$NAME/...", the folder its default.
    places: list = []
    # The clock reads: (what the script ran, what it answered).
    clock: list = []
    # The entry point launched (a name of entries.toml; "" for main_ppo).
    entry: str = ""
    # A recipe entry's checkout (its module's top package, or the folder holding it: the entry's import_root),
    # absolute; "" otherwise.
    recipe: str = ""


def _launches_from_args(args, meanwhile=None) -> tuple[list[Prepared], object]:
    """The launches to import (one per verl launch of the script), and the capture (None for an override list).

    ``meanwhile`` runs while the script does (or first, for an override list).
    """
    if args.script is None:
        raise InputError([Problem("give a launch script, or --verl RELEASE -- key=value ...")])
    script = Path(args.script)
    if args.overrides or "=" in args.script:
        # An override list: `tutorrl import --verl R -- a=1 b=2` puts a=1 in `script`.
        if meanwhile is not None:
            meanwhile()
        overrides = [args.script, *args.overrides]
        return [Prepared("the command line", args.config_name, None, overrides, {}, [])], None
    from tutorrl.importer.capture import MAX_TIMEOUT_S, capture

    timeout = _parse_timeout(str(args.timeout), MAX_TIMEOUT_S)
    if not script.exists():
        raise InputError([Problem("no such file", file=args.script)])
    if not script.is_file():
        raise InputError([Problem("not a regular file (a launch script is a bash file)", file=args.script)])
    cap = capture(script, vars=_parse_vars(args.var), timeout=timeout, args=list(args.arg),
                  require="all" if args.require_confinement else "core", meanwhile=meanwhile)
    if cap.timed_out:
        raise RefusedError(f"{args.script}: the script ran past {timeout:g} s and was stopped "
                           "(raise --timeout if it is only slow)")
    if not cap.launches:
        raise RefusedError(f"{args.script}: {no_launch(cap.commands)}")
    if len(cap.launches) > 1 and not _is_folder(args.output):
        lines = "; ".join(f"#{i + 1}: {len(l.overrides)} overrides" for i, l in enumerate(cap.launches))
        raise RefusedError(f"{args.script}: {len(cap.launches)} launches of verl.trainer.main_ppo ({lines}); "
                           "give -o DIR/ to import each launch as its own spec there")
    return prepare(cap, args.script, Path(args.script).resolve().parent), cap


def no_launch(commands) -> str:
    """Why a script gave nothing to import: the python modules it did start, by name, and where another
    entry point is chosen (the refusal says what was found, not only what was not)."""
    from tutorrl.importer.capture import python_started

    from tutorrl.compiler.release import load_entries, not_entry

    entries = {e.module: e for e in load_entries().values() if e.name != "ppo"}
    modules = [p for p in python_started(commands) if " -m " in p]
    if not modules:
        found = ", ".join(sorted({" ".join(c.argv[:2]) for c in commands})[:8]) or "nothing"
        return f"no launch of verl.trainer.main_ppo found (the script ran: {found})"

    def said(m: str) -> str:
        module = m.split(" -m ", 1)[1]
        entry = entries.get(module)
        if entry is not None:
            return f"{m} (verl's entry point '{entry.name}')"
        why = not_entry(module)
        return f"{m} (not an entry point: {why.why})" if why else m

    shown = [said(m) for m in modules[:6]]
    started = ", ".join(shown[:-1]) + " and " + shown[-1] if len(shown) > 1 else shown[0]
    wheel = ", ".join(e.name for e in entries.values() if e.source == "wheel")
    recipes = ", ".join(f"{e.name} ({e.module})" for e in entries.values() if e.source == "recipe")
    return (f"no launch tutorrl imports found: the script started {started}. `tutorrl import` reads launches of "
            f"verl.trainer.main_ppo, of the entry points in verl's wheel ({wheel}) and of the recipes it has key "
            f"sets for, with --recipe PATH ({recipes}); a module tutorrl does not know is added as a table of "
            "compiler/release/keymap/entries.toml (its module, config folder and config names), then its key sets "
            "(`tutorrl keys import` for verl's wheel, tools/recipe_keysets.py for a recipe) and `tutorrl keys lock`")


def _is_folder(output: str | None) -> bool:
    return output is not None and (output.endswith("/") or Path(output).is_dir())


def prepare(cap, source: str, script_dir: Path, home: str | None = None,
            workdir_root: str = "SCRIPT_DIR") -> list[Prepared]:
    """Each launch of a capture, with the sandbox's folders given back as this machine's.

    The sandbox stood in for HOME (``home``, default this user's) and for the
    working folder (a copy of the script's folder, ``script_dir``); values under
    either are machine-specific, so the spec names them by a root.
    """
    from tutorrl.importer.capture import FIXED_EPOCH

    home = home if home is not None else str(Path.home())
    places = [(cap.home, home, "HOME"), (cap.workdir, str(script_dir), workdir_root)]
    # The longer sandbox folder first: one may lie inside the other.
    places.sort(key=lambda p: -len(p[0] or ""))
    roots = [(name, actual) for _, actual, name in places if actual]
    taken = {name for name, _ in roots}
    for name, folder in _defaulted_folders(cap.script):
        if name not in taken and name not in cap.unset:
            roots.append((name, folder))
            taken.add(name)
    # rootify takes the longest folder first: a variable's folder may lie under the home.
    roots.sort(key=lambda r: -len(r[1]))

    def real(text: str) -> str:
        for sandbox, actual, _ in places:
            if sandbox:
                text = text.replace(sandbox, actual)
        return text

    others = [real(" ".join(c.argv)) for c in cap.commands if c.kind == "command"][:20]
    clock = []
    for c in cap.commands:
        if c.kind == "clock":
            clock.append((" ".join(c.argv), _clock_answer(c.argv, FIXED_EPOCH)))
    out = []
    for launch in cap.launches:
        out.append(Prepared(source, launch.config_name, _config_path(launch, real),
                            [real(o) for o in launch.overrides], dict(cap.unset), others, list(roots), clock,
                            _entry_name(launch)))
    return out


#: ``${NAME:-/abs/folder}`` (or ``${NAME-...}``) in a script: a folder the author let the environment choose.
_DEFAULTED = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*):?-(/[^\s$`\"'{}()|;&<>*?]*)\}")


def _defaulted_folders(script: str) -> list[tuple[str, str]]:
    """(variable, folder) for each ``${NAME:-/folder}`` the script's own text reads.

    The author wrote the folder as a default the environment may replace: a
    machine-specific place, which a spec names by a root of that name with
    that default. Only an absolute folder below ``/`` counts; a name given two
    different folders counts for neither.
    """
    try:
        text = Path(script).read_text(errors="replace")
    except OSError:
        return []
    from tutorrl.compiler.pipeline import RESERVED_ENV_PREFIX, bash_changes, looks_secret, takes_over

    found: dict[str, set[str]] = {}
    for name, folder in _DEFAULTED.findall(text):
        folder = folder.rstrip("/")
        # A name the compiler refuses as a root (bash's own, one that takes the launch over, a
        # secret's, tutorrl's) keeps its literal value: the spec must still compile.
        if folder and name != "HOME" and not (bash_changes(name) or takes_over(name)
                                              or looks_secret(name)
                                              or name.startswith(RESERVED_ENV_PREFIX)):
            found.setdefault(name, set()).add(folder)
    return [(name, next(iter(folders))) for name, folders in found.items() if len(folders) == 1]


def _clock_answer(argv: list[str], epoch: int) -> str:
    """What ``date`` printed for ``argv`` at the fixed instant ('' when only date itself can say)."""
    import time

    fmt = next((a[1:] for a in argv[1:] if a.startswith("+")), None)
    if fmt is None or "%N" in fmt:
        return ""
    try:
        return time.strftime(fmt, time.gmtime(epoch))
    except ValueError:
        return ""


def _config_path(launch, real) -> str | None:
    """The launch's --config-path as Hydra reads it; None for verl's own config folder.

    Hydra takes a relative ``--config-path`` relative to the file that declares
    ``@hydra.main``: for ``-m verl.trainer.main_ppo`` that is verl's
    ``verl/trainer/``, so ``config`` and ``./config`` are verl's own configs.
    """
    import os

    path = launch.config_path
    if path is None:
        return None
    if path.startswith("pkg://"):
        return path
    if os.path.isabs(path):
        # A verl checkout's own config folder is the config of the verl that runs.
        return None if os.path.normpath(path).endswith("/verl/trainer/config") else real(path)
    if launch.entry_kind == "script":
        entry = os.path.join(launch.cwd, launch.entry)
        return real(os.path.normpath(os.path.join(os.path.dirname(entry), path)))
    from tutorrl.importer.capture import entry_of

    found = entry_of(launch.entry_kind, launch.entry)  # relative to its module's folder; its own config: None
    if found is not None and not found.default:
        module_dir = found.module_dir()
        return None if os.path.normpath(os.path.join(module_dir, path)) == found.config_dir else os.path.normpath(path)
    if os.path.normpath(os.path.join("verl/trainer", path)) == "verl/trainer/config":
        return None
    return os.path.normpath(path)


def _entry_name(launch) -> str:
    from tutorrl.importer.capture import entry_of

    found = entry_of(launch.entry_kind, launch.entry)
    return "" if found is None or found.default else found.name


def choose_release(overrides: list[str], given: str | None, variant: str) -> tuple[str, str, str]:
    """(release, why, what the launch loses at the given release and where it would not).

    A key counts for a release when the release *reads* it: one it declares and
    never reads (``custom_reward_function`` of verl 0.9) composes and does
    nothing, so it is no reason to choose that release.
    """
    return _choose(overrides, given, variant)[:3]


def _choose(overrides: list[str], given: str | None, variant: str,
            entry: str = "") -> tuple[str, str, str, list[str]]:
    """:func:`choose_release`, and every release that reads as many of the keys (oldest first)."""
    from tutorrl.compiler.release import describe_releases, load_built, load_keymap, load_lock
    from tutorrl.compiler.release import load_keyset

    keys, spelled = [], []
    for text in overrides:
        head = text.split("=", 1)[0]
        key = head.lstrip("+~")
        if "=" in text and "." in key:
            keys.append(key)
            spelled.append((head[:len(head) - len(key)], key))
    releases = load_keymap().releases
    if entry:  # an entry point's launch: the releases that ship it, each with the entry's own key set
        from tutorrl.compiler.release import find_entry

        found = find_entry(entry)
        # Where its module starts; where none does, where its key sets are (the compile then says why).
        releases = [r for r in releases if found.runs_at(r)] or [r for r in releases if found.exists_at(r)]
    fit, unread, breaks, stops = {}, {}, {}, {}
    for release in releases:
        ks, lock = load_keyset(release, variant, entry or "ppo"), load_lock(release, variant, entry or None)
        declared = [k for k in keys if ks.has(k) or ks.open_parent(k) or lock.passthrough_above(k)
                    or k in lock.undeclared]
        unread[release] = [k for k in declared if lock.ignored_by(k) is not None]
        fit[release] = len(declared) - len(unread[release])
        # Overrides Hydra refuses as written there: '+' on a key the config has
        # (not null), or a plain override of a key it lacks; and '+' keys that
        # compose but stop verl when it builds their section into a dataclass.
        built = load_built(release, variant, entry or "ppo")
        stops[release] = sorted({k for prefix, k in spelled
                                 if prefix in ("+", "++") and not ks.has(k) and built.refusal(k) is not None})
        breaks[release] = len(stops[release]) + sum(
            1 for prefix, k in spelled
            if (prefix == "+" and ks.refuses_append(k))
            or (prefix == "" and not ks.has(k) and not ks.open_parent(k)))
    composing = [r for r in releases if breaks[r] == 0] if any(breaks[r] == 0 for r in releases) else releases
    best = max(fit[r] for r in composing) if fit else 0
    fitting = [r for r in composing if fit[r] == best]
    if given:
        if given not in releases:
            with_entry = f" with entry point {entry}" if entry else ""
            raise InputError([Problem(f"verl {given} is not supported{with_entry}",
                                      hint=f"supported releases: {', '.join(releases)}")])
        notes = []
        if fit[given] < best:
            notes.append(f"{best - fit[given]} more of the launch's {len(keys)} keys are read {describe_releases(fitting)}: "
                         f"import with --verl {fitting[-1]}, then `tutorrl migrate SPEC --to {given}`")
        return given, "given with --verl", "; ".join(notes), fitting
    why = (f"--verl not given: {best} of the launch's {len(keys)} keys are read {describe_releases(fitting)}"
           + (", where the launch as written composes" if len(composing) < len(releases) else "")
           + "; the newest of those")
    newest = releases[-1]
    if fitting[-1] != newest and stops[newest]:
        why += (f" (verl {newest} stops on {', '.join(stops[newest])}: it builds the section into a dataclass "
                "that declares no such field)")
    if fitting[-1] != newest and unread[newest]:
        why += (f" (verl {newest} declares and never reads {', '.join(sorted(set(unread[newest])))}: "
                "a launch there would ignore them)")
    return fitting[-1], why, "", fitting


def _standins(overrides: list[str], release: str, variant: str, entry: str = "") -> dict[str, str]:
    """A stand-in value for each placeholder, the same in both launches of the round trip.

    A placeholder that is the whole value of a number or boolean key stands for
    such a value (1, true); any other for text (``UNSET_NAME``).
    """
    from tutorrl.compiler.release import load_keyset
    from tutorrl.importer.translate import PLACEHOLDER

    keyset = load_keyset(release, variant, entry or "ppo")
    out: dict[str, str] = {}
    for text in overrides:
        key, _, value = text.partition("=")
        key = key.lstrip("+~")
        for name in PLACEHOLDER.findall(text):
            whole = value == f"__UNSET_{name}__"
            info = keyset.keys.get(key)
            kind = info.type if (whole and info is not None) else "str"
            stand = {"int": "1", "float": "1", "bool": "true"}.get(kind, f"UNSET_{name}")
            if out.get(name) not in ("1", "true"):
                out[name] = stand
    return out


def _fill(text: str, standins: dict[str, str]) -> str:
    for name, value in standins.items():
        text = text.replace(f"__UNSET_{name}__", value)
    return text


def _spec_text(overrides, release, variant, prep: Prepared):
    from tutorrl.importer.translate import render_spec, rootify, translate, validate

    translation = validate(translate(overrides, release, config_name=prep.config_name,
                                     config_path=prep.config_path, variant=variant, entry=prep.entry,
                                     recipe=prep.recipe))
    translation = rootify(translation, prep.places)
    return translation, render_spec(translation, prep.source)


def import_launch(prep: Prepared, verl: str | None = None, *, check: bool = True, root: Path | None = None,
                  default_config: str | None = None, recipe: str | None = None) -> tuple[str, ImportReport]:
    """One launch -> (the spec's text, the report): `tutorrl import`'s work, for the command and the corpus tool.
    ``recipe``: the checkout of the recipe a recipe entry's launch runs (refused without it)."""
    from tutorrl.importer.recipe import recipe_folder
    from tutorrl.importer.translate import variant_of

    if prep.entry:
        folder = recipe_folder(prep.entry, recipe, prep.source)
        if folder:
            prep = msgspec.structs.replace(prep, recipe=folder)

    variant = variant_of(prep.config_name, prep.overrides)
    release, why, elsewhere, fitting = _choose(prep.overrides, verl, variant, prep.entry)
    text, report = _import_at(prep, release, why, elsewhere, variant, check, root, default_config)
    if verl is None and check and report.does_not_compile:
        # The launch as verl runs it is the reference: where the newest release
        # that reads the keys refuses it at start and an older one that reads as
        # many runs it (verl 0.2 checks no mini-batch size), import for that one.
        for older in reversed(fitting[:-1]):
            other_text, other = _import_at(prep, older, why, elsewhere, variant, check, root, default_config)
            if other.exact is not None and not other.does_not_compile:
                other.release_reason = (
                    f"{why}: verl {release} refuses the imported spec ({'; '.join(report.does_not_compile)}); "
                    f"verl {older}, the newest of those that takes it, reads as many of the keys")
                return other_text, other
    return text, report


def _import_at(prep: Prepared, release: str, why: str, elsewhere: str, variant: str, check: bool,
               root: Path | None, default_config: str | None) -> tuple[str, ImportReport]:
    translation, text = _spec_text(prep.overrides, release, variant, prep)
    unread = [m for m in translation.mapped if m.how == "unread"]
    # verl refuses a launch of keys its entry's config moved as written: the round trip's reference is the
    # launch as translated, those keys carried.
    reference = translation.launch
    exact, not_checked, diffs, warnings, notes, refusals = None, "", [], [], [], []
    if not check:
        not_checked = "--no-check"
    else:
        from tutorrl.errors import SpecError
        from tutorrl.importer.roundtrip import round_trip

        # A placeholder is a value like any other: the same stand-in goes into
        # both launches, and everything else is proven.
        standins = _standins(prep.overrides, release, variant, prep.entry) if translation.placeholders else {}
        # A number stands in for a count the compiler's rules check (nodes x GPUs
        # divisible by the parallel sizes): the first of these that compiles, else
        # the first with the fewest refusals (so what the report lists is the
        # launch's own problem, not one a stand-in made).
        numbers = ["1", "2", "4", "8", "16", "32", "64"] if "1" in standins.values() else ["1"]
        result, error, best = None, None, None
        for number in numbers:
            these = {n: (number if v == "1" else v) for n, v in standins.items()}
            original = [_fill(o, these) for o in reference]
            check_text = _spec_text(original, release, variant, prep)[1] if these else text
            try:
                result = round_trip(check_text, original, config_name=prep.config_name or
                                    default_config or _default_config(release, variant, prep.entry),
                                    config_path=prep.config_path, root=root, entry=prep.entry)
            except SpecError as err:
                error, result = err, None
                continue
            if not result.refusals:
                break
            if best is None or len(result.refusals) < len(best[0].refusals):
                best = (result, these)
        else:
            if best is not None:
                result, these = best
        if result is not None:
            refusals = list(result.refusals)
        if standins:
            notes.append("placeholders stood in for the same value in both launches: "
                         + ", ".join(f"__UNSET_{n}__ = {v}" for n, v in sorted(these.items())))
        if result is None:
            err = error
            not_checked = "the imported spec does not compile: " + "; ".join(p.render() for p in err.problems)
        else:
            warnings = list(result.warnings)
            if result.original_error:
                not_checked = f"the original launch does not compose at verl {release}: {result.original_error}"
            elif result.imported_error:
                not_checked = f"the imported spec's launch does not compose: {result.imported_error}"
            else:
                # Exact only when the composed configs are identical: a setting
                # the release declares and never reads still differs.
                diffs = list(result.differences)
                exact = not diffs
    if unread:
        keys = sorted({m.override.lstrip("+~").split("=", 1)[0] for m in unread})
        notes.append(f"verl {release} never reads {', '.join(keys)}: the launch as written runs with them "
                     "ignored; the spec keeps them as written in [verl] unread_overrides, so it launches what the "
                     "script did (for a fork of verl that reads them; delete them for the release's own verl)")
        from tutorrl.importer.translate import meant_settings

        meant = meant_settings(translation)
        if meant:
            notes.append(f"what they meant, in settings verl {release} reads, is offered (commented) at the end of "
                         "the spec: " + ", ".join(f"{field} = {shown}" for field, shown, _ in meant))
        reads = choose_release(prep.overrides, None, variant)[0]
        if reads != release and not elsewhere:
            notes.append(f"verl {reads} reads them: import with --verl {reads} for the launch the script meant")
    normalised = [m.override for m in translation.mapped if m.note.startswith("the '+'")]
    report = ImportReport(prep.source, release, variant, why, None, translation.mapped, prep.unset,
                          translation.placeholders, prep.others, exact, not_checked, diffs, normalised, elsewhere,
                          warnings)
    from tutorrl.importer import composecache

    # A cache entry that failed its checks was composed again: said, so a tampered cache does not go unseen.
    notes += composecache.SAID
    composecache.SAID.clear()
    report.notes = notes
    report.does_not_compile = refusals
    report.roots = {name: r["default"] for name, r in translation.spec.get("roots", {}).items()}
    report.clock = [_clock_line(c, translation) for c in prep.clock]
    report.carried = [f"{text}  ({note})" for text, note in sorted(translation.carried.items())]
    return text, report


def _clock_line(read, translation) -> str:
    ran, answer = read
    where = [m.override for m in translation.mapped if answer and len(answer) >= 4 and answer in m.override]
    line = f"{ran}: the script read the clock; it was frozen at 2000-01-01 00:00:00 UTC"
    if answer:
        line += f" ({answer!r})"
    return line + (f", which went into {', '.join(where)}" if where else "")


def _output_name(folder: Path, stem: str, index: int, preps: list[Prepared]) -> Path:
    """``STEM-N[-WHAT].toml``: the launch's position, and the value that sets it apart from the others."""
    import re

    mine = dict(o.split("=", 1) for o in preps[index].overrides if "=" in o)
    theirs = [dict(o.split("=", 1) for o in p.overrides if "=" in o) for j, p in enumerate(preps) if j != index]
    differing = [k for k, v in mine.items() if any(t.get(k) != v for t in theirs)]
    named = [k for k in differing if k.endswith("experiment_name")] or differing
    what = ""
    if named:
        key = named[0]
        what = re.sub(r"[^A-Za-z0-9._]+", "_", f"{key.rsplit('.', 1)[-1]}_{mine[key]}").strip("_.")[:60]
    return folder / (f"{stem}-{index + 1}" + (f"-{what}" if what else "") + ".toml")


def _load_hydra() -> None:
    """Import what reading and composing a launch takes (Hydra's parser and composer, OmegaConf).

    Run while the script runs in its jail: ~80 ms of imports that would
    otherwise follow the capture's ~50 ms instead of overlapping it.
    """
    try:
        import hydra._internal.config_loader_impl  # noqa: F401  (Hydra decides what a launch means)
        import hydra.core.override_parser.overrides_parser  # noqa: F401
    except ImportError:
        raise RefusedError("tutorrl import needs Hydra: pip install 'tutorrl[import]'") from None


class ImportOptions(msgspec.Struct, frozen=True, kw_only=True):
    """What ``tutorrl import`` is given: a launch script, or (``overrides``) a Hydra override list."""

    #: A launch script (bash), or the first override of an override list.
    script: str | None
    #: The rest of an override list (``tutorrl import --verl R -- a=1 b=2``).
    overrides: list[str] = []
    #: Where to write the spec (None: nowhere, the text is returned); a folder ``DIR/`` for a script of
    #: several launches.
    output: str | None = None
    verl: str | None = None
    #: ``NAME=VALUE`` for shell variables the script reads.
    var: list[str] = []
    #: The script's positional arguments (``$1``, ``$2``, ... in order), as its author passes them.
    arg: list[str] = []
    config_name: str | None = None
    #: Skip composing the round trip.
    no_check: bool = False
    #: Seconds the script may run (a number, as given on the command line).
    timeout: str = "30"
    require_confinement: bool = False
    #: A recipe entry's code (DAPO, entropy): a checkout of the recipe repository at the commit tutorrl pins,
    #: named as the module's top package or holding it (the entry's import_root); its config composes the round
    #: trip and the spec names it.
    recipe: str | None = None


class Imported(msgspec.Struct):
    """One launch imported: the spec's text and the report of how it was made (``report.spec_path``: where
    it was written, None if nowhere)."""

    text: str
    report: ImportReport

    @property
    def exact(self) -> bool:
        """The round trip composed the identical config and the spec compiles."""
        return bool(self.report.exact) and not self.report.does_not_compile


def import_script(args: ImportOptions) -> list[Imported]:
    """Each launch of the script (or the override list) imported as a spec; written where ``output`` says."""
    from importlib.util import find_spec

    if find_spec("hydra") is None:  # before the script runs; _load_hydra says the same of a broken install
        raise RefusedError("tutorrl import needs Hydra: pip install 'tutorrl[import]'")
    preps, cap = _launches_from_args(args, meanwhile=_load_hydra)
    several = len(preps) > 1
    results = []
    for index, prep in enumerate(preps):
        if index and not gc.isenabled():
            # Run without the collector (tutorrl.cli.entry): the last launch's OmegaConf cycles go before the next.
            gc.collect()
        if several:
            prep = msgspec.structs.replace(prep, source=f"{prep.source} (launch {index + 1} of {len(preps)})")
        text, report = import_launch(prep, args.verl, check=not args.no_check, recipe=args.recipe)
        spec_path = None
        if args.output:
            from tutorrl import _files

            out = Path(args.output)
            if _is_folder(args.output):
                out = _output_name(out, Path(args.script).stem if args.script else "launch", index, preps) \
                    if several else out / (Path(args.script).stem + ".toml")
                out.parent.mkdir(parents=True, exist_ok=True)
            try:
                _files.replace_atomic(out, text.encode())
            except OSError as exc:
                raise RefusedError(f"cannot write {out}: {exc.strerror}") from None
            spec_path = str(out)
        report.spec_path = spec_path
        if spec_path is not None:
            # Placed in the file written (CHECKED_AS while it was proven: the same lines).
            from tutorrl._files import display_path
            from tutorrl.importer.roundtrip import CHECKED_AS

            name = display_path(out)
            report.does_not_compile = [name + p[len(CHECKED_AS):] if p.startswith(CHECKED_AS + ":") else p
                                       for p in report.does_not_compile]
        if cap is not None:
            report.sandbox = cap.confinement.summary()
            report.confinement = msgspec.to_builtins(cap.confinement.properties)
            report.skipped = list(cap.skipped)
        results.append(Imported(text, report))
    return results


def _default_config(release: str, variant: str, entry: str = "") -> str:
    from tutorrl.compiler.release import load_lock

    return load_lock(release, variant, entry or None).config_name
