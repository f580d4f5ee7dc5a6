"""Measure verl's own example launch scripts against verl and against tutorrl.

    python tools/corpus.py tags --verl-git GITDIR
    python tools/corpus.py run --verl-git GITDIR --tag v0.7.0 --tag v0.5.0 [--target 0.7.1]
                           [--cache DIR] [--out docs/corpus] [--wheel-cache DIR]
    python tools/corpus.py summary --tag v0.9.0 [--cache DIR] [--out docs/corpus]
    python tools/corpus.py thirdparty --mirror-root DIR [--sources docs/corpus/thirdparty-sources.json]

``summary`` derives a tag's numbers again from its full results in the cache
(and the release, target and config source its numbers already name), without
capturing or composing anything: for a change in how results are grouped.

``thirdparty`` measures launch scripts of public repositories that use verl
(the sources list names repository, commit and paths; ``DIR`` holds their bare
git dirs as ``owner+name``): the same capture and ``import_launch`` round trip
as below, each launch imported at the newest supported release where it
composes as written and reads every key it sets (see :func:`run_thirdparty`).

``GITDIR`` is a bare git directory of volcengine/verl (the project's ``fetch``
tool gives one). For each release tag this

1. exports ``examples/`` and ``verl/trainer/config/`` at the tag (``git archive``)
   into a temporary folder that stands for the checkout;
2. puts the trainer config of the tag's own release *wheel* in place of the
   tag's (keyset_import's download and extraction; the tag's own config is used,
   and said so, only where no wheel can be had), and reads the wheel's
   ``main_ppo.py`` for the trainer's default config name;
3. captures every ``examples/**/*.sh`` with :func:`tutorrl.importer.capture.capture`
   (real bash, stand-ins, jail) run from the checkout's root;
4. parses every override of every launch with Hydra's ``OverridesParser``;
5. composes each launch with Hydra against its own release's config: the
   script's ``--config-name`` (the Megatron config when it names it) and
   ``--config-path`` (absolute under the checkout, or relative to
   ``verl/trainer/`` as Hydra resolves it for ``main_ppo``), with the checkout
   as the working folder (verl's own configs put ``file://verl/trainer/config``
   on Hydra's search path); records whether it composes, and the error;
6. classifies every override with :func:`classify` against a tutorrl target
   release: the tag's release if tutorrl supports it, else ``--target``, else the
   nearest newer supported release (said in the output).

Full results (with the scripts' override text) go to the cache folder, never
to the repository. Derived numbers -- counts, key names, grouped reasons --
go to ``docs/corpus/<tag>.json`` and ``docs/corpus/README.md``.
"""

from __future__ import annotations

import argparse
import collections
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path

import msgspec

SCHEMA = "tutorrl.corpus/1"
DOCS = Path(__file__).resolve().parent.parent / "docs" / "corpus"
STANDARD_CONFIG_DIR = "verl/trainer/config"
Class = str  # "spec" | "extra" | "unread" | "refused"


# ---------------------------------------------------------------------------
# Classification: the one place that asks tutorrl's compiler about a key.


def classify(override: str, release: str, variant: str) -> tuple[Class, str]:
    """Where ``override`` (as a script writes it) goes in a tutorrl spec for ``release``/``variant``.

    ``("spec", field)``: a spec field holds it (the import translation, values
    checked by the compiler's loader); ``("extra", why)``: ``[verl]
    extra_overrides`` takes it as written and the compiler accepts it there;
    ``("unread", why)``: the release accepts the key and never reads it (``[verl]
    unread_overrides`` keeps it as written);
    ``("refused", message)``: tutorrl refuses it, with its message.
    """
    from tutorrl.compiler.release.keymap import load_lock
    from tutorrl.compiler.release.keysets import load_keyset
    from tutorrl.compiler.pipeline.resolve import check_extra
    from tutorrl.importer.translate import translate, validate

    mapped = validate(translate([override], release, variant=variant)).mapped[-1]
    if mapped.how == "field":
        return "spec", mapped.field
    if mapped.how == "selection":
        return "spec", "actor.strategy"
    if mapped.how in ("unread", "refused"):
        return mapped.how, mapped.note
    lock = load_lock(release, variant)
    accepted, problem = check_extra(override, lock, load_keyset(release, variant), {})
    if accepted is None:
        return "refused", problem[0]
    return "extra", mapped.note


_OVERRIDE_KEY = re.compile(r"^(~|\+\+|\+)?([^=~+][^=]*?)(?:@[^=]*)?(=|$)")


def override_key(override: str) -> str | None:
    """The dotted key of an override (prefix and ``@package`` dropped), by Hydra's parser when it can."""
    parsed = parse_override(override)
    if isinstance(parsed, dict):
        return parsed["key"]
    match = _OVERRIDE_KEY.match(override)
    return match.group(2) if match else None


def parse_override(override: str) -> dict | str:
    """``{"key", "type"}`` as Hydra's ``OverridesParser`` reads the override, or its error."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        (parsed,) = _parser().parse_overrides([override])
    except Exception as exc:  # noqa: BLE001 - Hydra raises OverrideParseException and others
        return first_line(str(exc)) or type(exc).__name__
    return {"key": parsed.key_or_group, "type": parsed.type.name}


_PARSER = None


def _parser():
    global _PARSER
    if _PARSER is None:
        from hydra.core.override_parser.overrides_parser import OverridesParser

        _PARSER = OverridesParser.create()
    return _PARSER


def first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")


def reason_group(message: str) -> str:
    """A message with its quoted parts (keys, values) blanked: what groups refusals and errors."""
    line = _QUOTED.sub("'…'", first_line(message))
    # An unquoted override in a parser error is a script's text: blank it too.
    return " ".join("…" if "=" in word else word for word in line.split(" "))


# ---------------------------------------------------------------------------
# Releases and targets


def tag_release(tag: str) -> str:
    return tag[1:] if tag.startswith("v") else tag


def is_release_tag(tag: str) -> bool:
    return re.fullmatch(r"v?[0-9]+\.[0-9]+\.[0-9]+(\.post[0-9]+)?", tag) is not None


def supported_releases() -> list[str]:
    from tutorrl.compiler.release.keymap import load_keymap

    return list(load_keymap().releases)


def choose_target(release: str, supported: Sequence[str], given: str | None = None) -> tuple[str, str]:
    """(target release, why): ``given``, else ``release`` if supported, else the nearest newer, else older."""
    from tutorrl.compiler.release.keysets import release_sort_key

    if given:
        if given not in supported:
            raise SystemExit(f"--target {given}: tutorrl supports {', '.join(supported)}")
        return given, "given with --target"
    if release in supported:
        return release, "the tag's own release"
    ordered = sorted(supported, key=release_sort_key)
    newer = [r for r in ordered if release_sort_key(r) > release_sort_key(release)]
    if newer:
        return newer[0], f"{release} is not supported by tutorrl; the nearest newer supported release"
    return ordered[-1], f"{release} is not supported by tutorrl; the newest supported release"


def variant_of(config_name: str | None, overrides: Iterable[str]) -> str:
    from tutorrl.importer.translate import variant_of as launch_variant

    return launch_variant(config_name, overrides)


# ---------------------------------------------------------------------------
# Aggregation (pure)


class OverrideResult(msgspec.Struct):
    text: str
    key: str | None
    parse_error: str | None
    cls: str
    reason: str


class LaunchResult(msgspec.Struct):
    script: str
    entry: str
    config_name: str
    config_path: str | None
    variant: str
    composes: bool
    compose_error: str | None
    overrides: list[OverrideResult]
    # The import round trip (only for launches that compose at their release):
    # "exact", "differs", or why it was not checked.
    round_trip: str = ""
    differing_keys: list[str] = []
    # `tutorrl import` without --verl: the release it chose and its round trip.
    default_release: str = ""
    default_round_trip: str = ""
    # What the compiler refuses in the imported spec (grouped; "" when it compiles): a round trip is
    # proven with the spec as written, and these name what to change before it runs.
    refused: str = ""


#: verl's model engines tutorrl has key sets for (its fsdp and megatron variants); verl 0.9 also has
#: veomni, mindspeed and torchtitan, each selecting its own actor, ref and critic configs.
KNOWN_ENGINES = ("dp", "fsdp", "megatron")


def engine_cause(launch: "LaunchResult", reason: str) -> str:
    """``reason``, led by its cause where the launch selects a model engine tutorrl has no key set for:
    the import reads such a launch against the FSDP config, so what it refuses or drops is that
    config's verdict, not the engine's."""
    engines = {o.text.lstrip("+").split("=", 1)[1] for o in launch.overrides
               if o.text.lstrip("+").startswith("model_engine=")}
    other = sorted(e for e in engines if e not in KNOWN_ENGINES)
    if not other:
        return reason
    return (f"the launch selects verl's {other[0]} engine (model_engine={other[0]}), which tutorrl has no key set "
            f"for (fsdp and megatron only): {reason}")


class ScriptResult(msgspec.Struct):
    script: str
    launches: int
    unset: list[str]
    timed_out: bool
    exit_code: int | None


def aggregate(tag: str, release: str, target: str, target_why: str, scripts_found: int,
              scripts: Sequence[ScriptResult], launches: Sequence[LaunchResult], config_source: str) -> dict:
    """The derived numbers of one tag: nothing here carries a script's text."""
    occurrences = [o for l in launches for o in l.overrides]
    key_scripts: dict[str, set[str]] = collections.defaultdict(set)
    for l in launches:
        for o in l.overrides:
            if o.key is not None:
                key_scripts[o.key].add(l.script)
    by_class = collections.Counter(o.cls for o in occurrences)
    trips = collections.Counter(l.round_trip for l in launches if l.composes)
    refusing = collections.Counter(engine_cause(l, l.refused) for l in launches
                                   if l.composes and l.round_trip == "exact" and l.refused)
    not_exact = collections.Counter(engine_cause(l, l.round_trip) for l in launches
                                    if l.composes and l.round_trip != "exact")
    differing: dict[str, set[str]] = collections.defaultdict(set)
    for l in launches:
        for k in l.differing_keys:
            differing[k].add(l.script)
    total = len(occurrences)
    refused = collections.Counter(reason_group(o.reason) for o in occurrences if o.cls == "refused")
    refused_keys: dict[str, set[str]] = collections.defaultdict(set)
    for o in occurrences:
        if o.cls == "refused" and o.key:
            refused_keys[reason_group(o.reason)].add(o.key)
    failures = collections.Counter(reason_group(l.compose_error or "") for l in launches if not l.composes)
    failure_scripts: dict[str, list[str]] = collections.defaultdict(list)
    for l in launches:
        if not l.composes:
            failure_scripts[reason_group(l.compose_error or "")].append(l.script)
    launching = [s for s in scripts if s.launches]

    def share(n: int) -> float:
        return round(100.0 * n / total, 1) if total else 0.0

    return {
        "schema": SCHEMA,
        "tag": tag,
        "release": release,
        "config_source": config_source,
        "target": target,
        "target_why": target_why,
        "scripts_found": scripts_found,
        "scripts_launching_main_ppo": len(launching),
        "scripts_with_several_launches": sum(1 for s in scripts if s.launches > 1),
        "scripts_with_unset_variables": sum(1 for s in launching if s.unset),
        "scripts_timed_out": sum(1 for s in scripts if s.timed_out),
        "launches": len(launches),
        "launches_megatron": sum(1 for l in launches if l.variant == "megatron"),
        # A --config-path that is verl's own trainer config folder selects no config of the script's own.
        "launches_own_config": sum(1 for l in launches if l.config_path not in (None, STANDARD_CONFIG_DIR)),
        "overrides": total,
        "overrides_unparsable": sum(1 for o in occurrences if o.parse_error),
        "distinct_keys": len(key_scripts),
        "compose_at_own_release": {
            "ok": sum(1 for l in launches if l.composes),
            "failed": sum(1 for l in launches if not l.composes),
            "failures_by_reason": [
                {"reason": r, "launches": n, "scripts": sorted(failure_scripts[r])}
                for r, n in sorted(failures.items(), key=lambda kv: (-kv[1], kv[0]))
            ],
        },
        "classification": {
            "target": target,
            "spec": {"overrides": by_class["spec"], "percent": share(by_class["spec"])},
            "extra": {"overrides": by_class["extra"], "percent": share(by_class["extra"])},
            "unread": {"overrides": by_class["unread"], "percent": share(by_class["unread"])},
            "refused": {"overrides": by_class["refused"], "percent": share(by_class["refused"])},
            "refused_by_reason": [
                {"reason": r, "overrides": n, "keys": len(refused_keys[r])}
                for r, n in sorted(refused.items(), key=lambda kv: (-kv[1], kv[0]))
            ],
        },
        # `tutorrl import --verl TARGET` of every launch that composes at its own release.
        "round_trip": {
            "launches": len(launches),
            "launches_composing": sum(trips.values()),
            "with_target": sum(trips.values()),
            "exact": trips["exact"],
            "percent_exact": round(100.0 * trips["exact"] / sum(trips.values()), 1) if trips else 0.0,
            "exact_spec_refused": sum(refusing.values()),
            "exact_spec_refused_by_reason": [{"reason": r, "launches": n, "scripts": sorted(
                l.script for l in launches if l.composes and l.round_trip == "exact" and l.refused
                and engine_cause(l, l.refused) == r)}
                for r, n in sorted(refusing.items(), key=lambda kv: (-kv[1], kv[0]))],
            "differs": sum(n for r, n in trips.items() if r.startswith("differs")),
            "not_checked": sorted(((r, n) for r, n in trips.items() if r.startswith("not checked")),
                                  key=lambda kv: (-kv[1], kv[0])),
            # Each launch not exact, by script: its cause is the reason it is listed under.
            "not_exact_by_reason": [{"reason": r, "launches": n, "scripts": sorted(
                l.script for l in launches if l.composes and l.round_trip != "exact"
                and engine_cause(l, l.round_trip) == r)}
                for r, n in sorted(not_exact.items(), key=lambda kv: (-kv[1], kv[0]))],
            "differing_keys": [{"key": k, "launches": len(v)} for k, v in
                               sorted(differing.items(), key=lambda kv: (-len(kv[1]), kv[0]))],
        },
        # `tutorrl import` without --verl, for the launches of verl's own config folder that compose.
        "default_release": {
            "launches": sum(1 for l in launches if l.default_release),
            "by_release": dict(sorted(collections.Counter(l.default_release for l in launches
                                                          if l.default_release).items())),
            "exact": sum(1 for l in launches if l.default_round_trip == "exact"),
            "not_exact_by_reason": [{"reason": r, "launches": n} for r, n in sorted(
                collections.Counter(l.default_round_trip for l in launches
                                    if l.default_release and l.default_round_trip != "exact").items(),
                key=lambda kv: (-kv[1], kv[0]))],
        },
        "keys_by_scripts": [
            {"key": k, "scripts": len(v)} for k, v in sorted(key_scripts.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        ],
    }


# ---------------------------------------------------------------------------
# Git, wheels, composing


def git(gitdir: Path, *args: str) -> bytes:
    return subprocess.run(["git", f"--git-dir={gitdir}", *args], check=True, capture_output=True).stdout


def list_tags(gitdir: Path) -> list[str]:
    from tutorrl.compiler.release.keysets import release_sort_key

    tags = [t for t in git(gitdir, "tag").decode().split() if is_release_tag(t)]
    return sorted(tags, key=lambda t: release_sort_key(tag_release(t)))


def export_tag(gitdir: Path, tag: str, dest: Path) -> None:
    """``examples/`` and ``verl/trainer/`` of ``tag`` under ``dest`` (git archive; no other file)."""
    paths = [p for p in ("examples", "verl/trainer") if git(gitdir, "ls-tree", "--name-only", tag, p).strip()]
    data = git(gitdir, "archive", "--format=tar", tag, *paths)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")


def install_wheel_config(release: str, root: Path, wheel_cache: Path | None) -> tuple[str, str]:
    """Put the release wheel's trainer config in ``root``; (config source, default config name)."""
    import shutil

    from tutorrl.compiler.release.keyset_import import KeysetImportError, extract_config, fetch_wheel

    config = root / "verl" / "trainer" / "config"
    main = root / "verl" / "trainer" / "main_ppo.py"
    main.parent.mkdir(parents=True, exist_ok=True)
    try:
        wheel = fetch_wheel(release, wheel_cache)
    except KeysetImportError as exc:
        source = f"git tag (no wheel: {first_line(str(exc))})"
    else:
        shutil.rmtree(config, ignore_errors=True)
        with tempfile.TemporaryDirectory() as tmp:
            extracted = extract_config(wheel, Path(tmp))
            shutil.copytree(extracted, config)
        with zipfile.ZipFile(wheel) as zf:
            if "verl/trainer/main_ppo.py" in zf.namelist():
                main.write_bytes(zf.read("verl/trainer/main_ppo.py"))
        source = f"wheel {wheel.name}"
    match = re.search(r"@hydra\.main\([^)]*config_name=['\"]([^'\"]+)['\"]", main.read_text() if main.is_file() else "")
    return source, match.group(1) if match else "ppo_trainer"


def compose_launch(root: Path, config_dir: Path, config_name: str, overrides: list[str]) -> str | None:
    from tutorrl.importer.roundtrip import working_dir

    """None when Hydra composes the launch; else the error (checkout paths made relative)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    try:
        with working_dir(root), initialize_config_dir(config_dir=str(config_dir), version_base=None):
            compose(config_name=config_name, overrides=overrides)
    except Exception as exc:  # noqa: BLE001 - Hydra and OmegaConf raise many kinds
        return f"{type(exc).__name__}: {exc}".replace(str(root) + "/", "").replace(str(root), ".")
    finally:
        GlobalHydra.instance().clear()
    return None


#: The home folder the corpus imports as (the capture's HOME given back as this one).
CORPUS_HOME = "/home/user"


def import_round_trip(root: Path, cap, launch_index: int, source: str, release: str,
                      default_name: str) -> tuple[str, list[str]]:
    """`tutorrl import`'s own work for one launch (:func:`import_launch`, as the command runs it with
    ``--verl RELEASE``): ("exact" | "differs: ..." | "not checked: ...", differing keys).

    Nothing is done here that the command does not do: placeholders, roots,
    config paths, settings the release never reads are the command's.
    """
    from tutorrl.importer.launch import import_launch, prepare

    prep = prepare(cap, source, root, home=CORPUS_HOME, workdir_root="VERL_CHECKOUT")[launch_index]
    _, report = import_launch(prep, release, root=root, default_config=default_name)
    return trip_reason(report), [d.key for d in report.differences], refusal_group(report)


def import_default(root: Path, cap, launch_index: int, source: str, default_name: str) -> tuple[str, str]:
    """`tutorrl import` without --verl: (the release it chose, the round trip's reason).

    The round trip composes with that release's own config (from its wheel),
    not the tag's: the launch as that release would run it.
    """
    from tutorrl.importer.launch import import_launch, prepare

    prep = prepare(cap, source, root, home=CORPUS_HOME, workdir_root="VERL_CHECKOUT")[launch_index]
    _, report = import_launch(prep, None)
    return report.release, trip_reason(report)


def refusal_group(report) -> str:
    """What the compiler refuses in an imported spec, grouped as the numbers count it ("" when it compiles)."""
    head = "not checked: the imported spec does not compile: "
    return trip_group(head + "; ".join(report.does_not_compile))[len(head):] if report.does_not_compile else ""


def trip_reason(report) -> str:
    """One import report's round trip as a reason to count: exact, why it differs, or why it was not checked."""
    if report.exact and report.carried:
        # verl refuses the launch as written; the spec equals it with a key its entry's config moved, or one
        # verl retired, carried.
        return "exact once carried to the keys the release reads"
    if report.exact:
        return "exact"
    if report.exact is None:
        return "not checked: " + reason_group(report.not_checked)
    unread = {m.override.lstrip("+~").split("=", 1)[0] for m in report.mapped
              if m.how == "unread"}
    keys = {d.key for d in report.differences}
    if keys and all(any(k == u or k.startswith(u + ".") for u in unread) for k in keys):
        return "differs: settings the release declares and never reads"
    from tutorrl.importer.translate import STOPS_VERL

    stops = {m.override.lstrip("+~").split("=", 1)[0] for m in report.mapped
             if m.how == "refused" and STOPS_VERL in m.note}
    if keys and all(k in stops | unread for k in keys) and keys & stops:
        return "differs: '+' keys verl stops on (the dataclass it builds the section into has no such field)"
    moved = {m.override.lstrip("+~").split("=", 1)[0] for m in report.mapped
             if m.how == "field" and m.note.startswith("the key moved")}
    moved |= {n for m in report.mapped if m.how == "field" and m.note.startswith("the key moved")
              for n in re.findall(r"calls it '\+?([^']+)'", m.note)}
    if keys and all(any(k == u or k.startswith(u + ".") for u in unread | moved) for k in keys):
        return "differs: settings the release reads under another name (the spec writes that name)"
    return "differs: " + ", ".join(sorted(keys)[:3]) + (" ..." if len(keys) > 3 else "")


def config_dir_of(launch, root: Path, workdir: str) -> tuple[Path | None, str | None]:
    """Where Hydra looks for the launch's primary config, in ``root``; (None, why) when outside it."""
    trainer = root / "verl" / "trainer"
    path = launch.config_path
    if path is None:
        return trainer / "config", None
    if path.startswith("pkg://"):
        return None, "config path is a package"
    if os.path.isabs(path):
        if path == workdir or path.startswith(workdir + "/"):
            return root / os.path.relpath(path, workdir), None
        return None, "config path outside the checkout"
    return Path(os.path.normpath(trainer / path)), None


# ---------------------------------------------------------------------------
# One tag


def run_tag(gitdir: Path, tag: str, target_given: str | None, wheel_cache: Path | None,
            timeout: float, progress=print) -> tuple[dict, dict]:
    from tutorrl.importer.capture import capture, is_ppo_launch

    release = tag_release(tag)
    target, why = choose_target(release, supported_releases(), target_given)
    with tempfile.TemporaryDirectory(prefix="tutorrl-corpus-") as tmp:
        root = Path(os.path.realpath(tmp)) / "verl"
        root.mkdir()
        export_tag(gitdir, tag, root)
        source, default_name = install_wheel_config(release, root, wheel_cache)
        scripts = sorted(p for p in (root / "examples").rglob("*.sh") if p.is_file())
        script_results: list[ScriptResult] = []
        launch_results: list[LaunchResult] = []
        detail: list[dict] = []
        for i, path in enumerate(scripts, 1):
            rel = str(path.relative_to(root))
            # main_ppo's corpus: another entry point's launch is measured by `entries`.
            cap = capture(path, vars={}, timeout=timeout, verl_checkout=root, is_launch=is_ppo_launch)
            script_results.append(ScriptResult(rel, len(cap.launches), sorted(cap.unset), cap.timed_out,
                                               cap.exit_code))
            record = {"script": rel, "unset": cap.unset, "exit_code": cap.exit_code, "timed_out": cap.timed_out,
                      "commands": [c.argv[0] for c in cap.commands], "launches": []}
            for launch in cap.launches:
                name = launch.config_name or default_name
                if name.endswith(".yaml"):
                    name = name[: -len(".yaml")]  # Hydra accepts the file name too
                variant = variant_of(name, launch.overrides)
                config_dir, outside = config_dir_of(launch, root, cap.workdir)
                if config_dir is None:
                    error = outside
                elif not (config_dir / f"{name}.yaml").is_file():
                    error = f"MissingConfigException: no config {name}.yaml in {os.path.relpath(config_dir, root)}"
                else:
                    error = compose_launch(root, config_dir, name, list(launch.overrides))
                results = []
                for text in launch.overrides:
                    parsed = parse_override(text)
                    key = parsed["key"] if isinstance(parsed, dict) else override_key(text)
                    cls, reason = classify(text, target, variant)
                    shown = text.replace(cap.workdir, "<checkout>").replace(cap.home, "<home>")
                    results.append(OverrideResult(shown, key, None if isinstance(parsed, dict) else parsed,
                                                  cls, reason))
                trip, differing, chosen, chosen_trip, refusal = "", [], "", "", ""
                if error is None:
                    trip, differing, refusal = import_round_trip(root, cap, cap.launches.index(launch), rel, target,
                                                        default_name)
                    if launch.config_path is None or config_dir == root / STANDARD_CONFIG_DIR:
                        # Without --verl (a launch of its own config folder composes only in the checkout).
                        chosen, chosen_trip = import_default(root, cap, cap.launches.index(launch), rel,
                                                             default_name)
                launch_results.append(LaunchResult(
                    rel, launch.entry, name,
                    None if launch.config_path is None else
                    (os.path.relpath(config_dir, root) if config_dir else launch.config_path),
                    variant, error is None, error, results, trip, differing, chosen, chosen_trip, refusal))
                record["launches"].append(msgspec.to_builtins(launch_results[-1]))
            detail.append(record)
            if i % 20 == 0:
                progress(f"  {tag}: {i}/{len(scripts)} scripts")
        summary = aggregate(tag, release, target, why, len(scripts), script_results, launch_results, source)
    return summary, {"schema": SCHEMA, "tag": tag, "target": target, "scripts": detail}


# ---------------------------------------------------------------------------
# Third-party launches: scripts from public repositories that use verl


class Source(msgspec.Struct):
    repo: str
    commit: str
    scripts: list[str]


class Sources(msgspec.Struct):
    schema: str
    repositories: list[Source]


def load_sources(path: Path) -> list[Source]:
    """The committed list of third-party scripts (repository, commit, paths): never their text."""
    try:
        sources = msgspec.json.decode(path.read_bytes(), type=Sources)
    except (OSError, msgspec.DecodeError) as exc:
        raise SystemExit(f"{path}: not a sources list ({exc})") from None
    seen = set()
    for s in sources.repositories:
        if not re.fullmatch(r"[0-9a-f]{40}", s.commit):
            raise SystemExit(f"{path}: {s.repo}: commit {s.commit!r} is not a full git hash")
        if s.repo in seen:
            raise SystemExit(f"{path}: {s.repo} listed twice")
        seen.add(s.repo)
    return list(sources.repositories)


def mirror_of(mirror_root: Path, repo: str) -> Path | None:
    """The bare git dir of ``repo`` under ``mirror_root`` (``owner+name/repo`` as fetched, or ``owner+name``)."""
    for candidate in (mirror_root / repo.replace("/", "+", 1) / "repo", mirror_root / repo.replace("/", "+", 1)):
        if (candidate / "HEAD").is_file() and (candidate / "objects").is_dir():
            return candidate
    return None


#: Files of a repository the capture's sandbox gets: what scripts read and source, configs they name.
_TEXT_SUFFIXES = (".sh", ".bash", ".env", ".yaml", ".yml", ".json", ".toml", ".cfg", ".txt", ".ini", ".conf")


def export_text_tree(gitdir: Path, commit: str, dest: Path, most_bytes: int = 1 << 20) -> None:
    """The repository's scripts and configs at ``commit`` under ``dest`` (no code, no data, nothing large)."""
    listing = git(gitdir, "ls-tree", "-r", "-l", "-z", commit).decode(errors="replace").split("\0")
    wanted = []
    for line in listing:
        if not line:
            continue
        meta, path = line.split("\t", 1)
        mode, kind, blob, size = meta.split()
        if kind == "blob" and mode in ("100644", "100755") and size.isdigit() and int(size) <= most_bytes \
                and path.lower().endswith(_TEXT_SUFFIXES) and ".." not in Path(path).parts:
            wanted.append((blob, path, mode))
    if not wanted:
        return
    proc = subprocess.run(["git", f"--git-dir={gitdir}", "cat-file", "--batch"], check=True, capture_output=True,
                          input="".join(f"{b}\n" for b, _, _ in wanted).encode())
    out, at = proc.stdout, 0
    for blob, path, mode in wanted:
        header_end = out.index(b"\n", at)
        size = int(out[at:header_end].split()[2])
        data = out[header_end + 1: header_end + 1 + size]
        at = header_end + 1 + size + 1
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        if mode == "100755":
            target.chmod(0o755)


_VERL_PIN = re.compile(r"""\bverl\s*(?:\[[^\]]*\])?\s*==\s*([0-9]+\.[0-9]+\.[0-9]+(?:\.post[0-9]+)?)""")


def written_for(gitdir: Path, commit: str) -> tuple[str | None, str]:
    """The verl release a repository's scripts were written for, and how that was told (None: it cannot be)."""
    def show(path: str) -> str | None:
        try:
            return git(gitdir, "show", f"{commit}:{path}").decode(errors="replace")
        except subprocess.CalledProcessError:
            return None

    version = show("verl/version/version")
    if version and re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+(\.post[0-9]+)?(\.dev[0-9]*)?", version.strip()):
        return version.strip(), "verl/version/version of the repository's own verl"
    for path in ("requirements.txt", "pyproject.toml", "setup.py", "environment.yml"):
        text = show(path)
        match = _VERL_PIN.search(text or "")
        if match:
            return match.group(1), f"verl=={match.group(1)} in {path}"
    return None, "no verl version in the repository"


def is_verl_main(launch) -> bool:
    """``-m verl.trainer.main_ppo`` or verl's own ``verl/trainer/main_ppo.py`` (not a repository's own trainer)."""
    if launch.entry_kind == "module":
        return True
    return os.path.normpath(launch.entry).endswith("verl/trainer/main_ppo.py")


def newest_composing(prep, releases: Sequence[str], default_name, takes=None) -> tuple[str | None, str, str]:
    """The launch's target: (release, why, "") or (None, "", the newest release's error).

    The newest supported release whose real config composes the launch as
    written and reads every key it sets (by `tutorrl import`'s own
    translation: nothing dropped as declared-and-never-read); where no release
    that composes reads them all, the newest that composes and reads the most
    of them (as ``tutorrl import`` without ``--verl`` chooses), preferring
    releases where verl does not stop on a ``+`` key its dataclass lacks
    (a key it ignores still lets the launch run). With ``takes``
    (release -> whether the imported spec compiles there), of the releases
    that read every key the newest that takes it, where one does: the launch
    as verl runs it is the reference, and verl 0.3+ refuses at start what 0.2
    runs (a mini-batch larger than the batch).
    """
    from tutorrl.importer.roundtrip import compose, config_root
    from tutorrl.importer.translate import STOPS_VERL, translate, validate, variant_of as launch_variant

    variant = launch_variant(prep.config_name, prep.overrides)
    newest_error = ""
    composing = []
    for release in reversed(releases):
        name = prep.config_name or default_name(release, variant)
        result = compose(config_root(release), name, list(prep.overrides), prep.config_path)
        if result.error is None:
            composing.append(release)
        else:
            newest_error = newest_error or result.error
    if not composing:
        return None, "", newest_error
    readers, unread, stops = [], {}, {}
    for release in composing:
        mapped = validate(translate(list(prep.overrides), release, config_name=prep.config_name,
                                    config_path=prep.config_path, variant=variant)).mapped
        # A key the release reads under another name (the spec field writes that name) is not read as written.
        # Nor is one verl stops on there (its dataclass has no such field).
        stops[release] = sum(1 for m in mapped if m.how == "refused" and STOPS_VERL in m.note)
        unread[release] = stops[release] + sum(1 for m in mapped if m.how in ("unread", "dropped") or
                                               (m.how == "field" and m.note.startswith("the key moved")))
        if not unread[release]:
            readers.append(release)
            if takes is None or takes(release):
                break
    if not readers:
        # As `tutorrl import` without --verl chooses: the newest that reads the most of them,
        # of those where verl does not stop on one, if any (an ignored key still lets it run).
        pool = [r for r in composing if not stops[r]] or composing
        fewest = min(unread[r] for r in pool)
        release = next(r for r in pool if unread[r] == fewest)
        return release, ("the newest that composes it and reads the most of the keys it sets "
                         "(none that composes it reads every one)"), ""
    release = readers[-1] if takes is None or takes(readers[-1]) else readers[0]
    why = ("the newest that composes it" if release == composing[0] else
           "the newest that composes it and reads every key it sets")
    if release != readers[0]:
        why += f" and takes the imported spec (verl {readers[0]} refuses it at start)"
    return release, why, ""


class ThirdPartyLaunch(msgspec.Struct):
    repo: str
    script: str
    index: int
    entry: str
    verl_main: bool
    variant: str = ""
    placeholders: int = 0
    overrides: list[OverrideResult] = []
    # The newest supported release where the launch as written composes ("" none), else Hydra's error there.
    target: str = ""
    target_why: str = ""
    no_target: str = ""
    # The key Hydra names in that error (a key of the repository's own verl, mostly).
    no_target_key: str = ""
    # `tutorrl import --verl TARGET`: its round trip ("exact", "differs: ...", "not checked: ...").
    round_trip: str = ""
    differing_keys: list[str] = []
    # `tutorrl import` without --verl: the release it chose and its round trip.
    default_release: str = ""
    default_round_trip: str = ""
    # What the compiler refuses in the spec imported for the target (grouped; "" when it compiles).
    refused: str = ""
    # `--verl` the release the repository was written for (nearest supported), when that can be told.
    written_release: str = ""
    written_round_trip: str = ""


class ThirdPartyScript(msgspec.Struct):
    repo: str
    script: str
    launches: int
    unset: list[str]
    timed_out: bool
    error: str = ""


def run_thirdparty(sources: Sequence[Source], mirror_root: Path, timeout: float,
                   progress=print) -> tuple[list[ThirdPartyScript], list[ThirdPartyLaunch], list[dict], list[str]]:
    """Every listed script through the same capture -> import -> compile -> compose -> compare as `run`.

    Each script is captured as `tutorrl import SCRIPT` captures it (its own
    folder the working folder); each launch is composed at every supported
    release to find its target (:func:`newest_composing`), imported with
    ``--verl`` that release, without ``--verl``, and with ``--verl`` the release
    the repository was written for. Returns (scripts, launches, per-repository
    facts, repositories with no mirror).
    """
    from tutorrl.errors import CaptureError
    from tutorrl.importer.capture import capture, is_ppo_launch
    from tutorrl.importer.launch import _default_config, import_launch, prepare

    releases = supported_releases()
    scripts: list[ThirdPartyScript] = []
    launches: list[ThirdPartyLaunch] = []
    repos: list[dict] = []
    missing: list[str] = []
    for n, source in enumerate(sources, 1):
        gitdir = mirror_of(mirror_root, source.repo)
        if gitdir is None:
            missing.append(source.repo)
            continue
        written, told = written_for(gitdir, source.commit)
        written_target = choose_target(written, releases)[0] if written else ""
        repos.append({"repo": source.repo, "commit": source.commit, "written_for": written, "told_by": told,
                      "written_target": written_target})
        with tempfile.TemporaryDirectory(prefix="tutorrl-thirdparty-") as tmp:
            tree = Path(os.path.realpath(tmp)) / "repo"
            tree.mkdir()
            export_text_tree(gitdir, source.commit, tree)
            for rel in source.scripts:
                path = tree / rel
                if not path.is_file():
                    scripts.append(ThirdPartyScript(source.repo, rel, 0, [], False, "not in the repository at the commit"))
                    continue
                try:
                    cap = capture(path, vars={}, timeout=timeout, is_launch=is_ppo_launch)
                except CaptureError as exc:
                    scripts.append(ThirdPartyScript(source.repo, rel, 0, [], False, first_line(str(exc))))
                    continue
                scripts.append(ThirdPartyScript(source.repo, rel, len(cap.launches), sorted(cap.unset), cap.timed_out))
                preps = prepare(cap, rel, path.parent, home=CORPUS_HOME) if cap.launches else []
                for index, (launch, prep) in enumerate(zip(cap.launches, preps)):
                    result = ThirdPartyLaunch(source.repo, rel, index, launch.entry, is_verl_main(launch))
                    launches.append(result)
                    if not result.verl_main:
                        continue
                    result.variant = variant_of(prep.config_name, prep.overrides)
                    result.placeholders = sum(1 for o in prep.overrides if "__UNSET_" in o)
                    trips = {}

                    def takes(release, prep=prep, trips=trips):
                        if release not in trips:
                            trips[release] = import_launch(prep, release)[1]
                        return not trips[release].does_not_compile

                    target, result.target_why, result.no_target = newest_composing(prep, releases,
                                                                                   _default_config, takes)
                    result.target = target or ""
                    if not result.target:
                        quoted = re.search(r"'([A-Za-z_][\w.]*)'", result.no_target)
                        result.no_target_key = quoted.group(1) if quoted else ""
                        result.no_target = reason_group(result.no_target)
                        continue
                    for text in prep.overrides:
                        cls, reason = classify(text, result.target, result.variant)
                        result.overrides.append(OverrideResult("", override_key(text), None, cls, reason))
                    report = trips.get(result.target) or import_launch(prep, result.target)[1]
                    result.round_trip = trip_reason(report)
                    result.differing_keys = [d.key for d in report.differences]
                    result.refused = refusal_group(report)
                    _, report = import_launch(prep, None)
                    result.default_release, result.default_round_trip = report.release, trip_reason(report)
                    if written_target:
                        if written_target == result.target:
                            result.written_release, result.written_round_trip = written_target, result.round_trip
                        else:
                            _, report = import_launch(prep, written_target)
                            result.written_release, result.written_round_trip = written_target, trip_reason(report)
        progress(f"  {n}/{len(sources)} {source.repo}: {len(source.scripts)} scripts")
    return scripts, launches, repos, missing


_COMPILE_PROBLEM = re.compile(r"imported\.toml:\d+:\d+: ([\w.]+): ([^;]*)")
_PARENTHESIS = re.compile(r"\s*\([^()]*\)")


def trip_group(reason: str) -> str:
    """A round trip's reason as the third-party numbers group it: the spec fields and rules, not the values."""
    head = "not checked: the imported spec does not compile: "
    if reason.startswith(head):
        problems = set()
        for field, why in _COMPILE_PROBLEM.findall(reason):
            while _PARENTHESIS.search(why):  # hints and values in parentheses, innermost first
                why = _PARENTHESIS.sub("", why)
            field = re.sub(r"\.[0-9]+$", ".N", field)
            problems.add(f"{field}: {re.sub(r'[0-9]+', 'N', _QUOTED.sub(chr(39) + '…' + chr(39), why.strip()))}")
        problems = sorted(problems)
        return head + "; ".join(problems) if problems else reason_group(reason)
    return reason_group(reason) if reason.startswith("not checked") else reason


def _by_reason(values: Iterable[str]) -> list[dict]:
    counts = collections.Counter(trip_group(v) for v in values)
    return [{"reason": r, "launches": n} for r, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


def aggregate_thirdparty(scripts: Sequence[ThirdPartyScript], launches: Sequence[ThirdPartyLaunch],
                         repos: Sequence[dict], missing: Sequence[str]) -> dict:
    """The derived numbers of the third-party corpus: counts and grouped reasons, no script text."""
    verl_main = [l for l in launches if l.verl_main]
    targeted = [l for l in verl_main if l.target]
    exact = [l for l in targeted if l.round_trip == "exact"]
    default = [l for l in targeted if l.default_release]
    written = [l for l in targeted if l.written_release]
    occurrences = [o for l in targeted for o in l.overrides]
    by_class = collections.Counter(o.cls for o in occurrences)
    differing: dict[str, set] = collections.defaultdict(set)
    for l in targeted:
        for k in l.differing_keys:
            differing[k].add((l.repo, l.script, l.index))
    launching = [s for s in scripts if s.launches]

    def pct(n: int, d: int) -> float:
        return round(100.0 * n / d, 1) if d else 0.0

    return {
        "schema": SCHEMA,
        "corpus": "thirdparty",
        "repositories": len(repos),
        "repositories_missing": sorted(missing),
        "repositories_launching": len({s.repo for s in launching}),
        "scripts": len(scripts),
        "scripts_launching_main_ppo": len(launching),
        "scripts_not_captured": _by_reason(s.error or ("timed out" if s.timed_out else "") for s in scripts
                                           if s.error or s.timed_out),
        "scripts_with_several_launches": sum(1 for s in scripts if s.launches > 1),
        "scripts_with_unset_variables": sum(1 for s in launching if s.unset),
        "launches": len(verl_main),
        "launches_other_entry": len(launches) - len(verl_main),
        "launches_megatron": sum(1 for l in verl_main if l.variant == "megatron"),
        "launches_with_placeholders": sum(1 for l in verl_main if l.placeholders),
        "no_target": _by_reason(l.no_target for l in verl_main if not l.target),
        "no_target_keys": [{"key": k, "launches": n} for k, n in sorted(
            collections.Counter(l.no_target_key for l in verl_main if not l.target and l.no_target_key).items(),
            key=lambda kv: (-kv[1], kv[0]))],
        "targets": dict(sorted(collections.Counter(l.target for l in targeted).items())),
        "targets_why": dict(sorted(collections.Counter(l.target_why for l in targeted).items())),
        "classification": {k: {"overrides": by_class[k], "percent": pct(by_class[k], len(occurrences))}
                           for k in ("spec", "extra", "unread", "refused")},
        # `tutorrl import --verl TARGET` (TARGET: the newest supported release where the launch composes).
        "round_trip": {
            "with_target": len(targeted),
            "exact": len(exact),
            "percent_exact": pct(len(exact), len(targeted)),
            "exact_spec_refused": sum(1 for l in exact if l.refused),
            "exact_spec_refused_by_reason": [{"reason": r, "launches": n} for r, n in sorted(
                collections.Counter(l.refused for l in exact if l.refused).items(), key=lambda kv: (-kv[1], kv[0]))],
            "not_exact_by_reason": _by_reason(l.round_trip for l in targeted if l.round_trip != "exact"),
            "differing_keys": [{"key": k, "launches": len(v)} for k, v in
                               sorted(differing.items(), key=lambda kv: (-len(kv[1]), kv[0]))],
        },
        "default_release": {
            "launches": len(default),
            "by_release": dict(sorted(collections.Counter(l.default_release for l in default).items())),
            "exact": sum(1 for l in default if l.default_round_trip == "exact"),
            "percent_exact": pct(sum(1 for l in default if l.default_round_trip == "exact"), len(default)),
            "not_exact_by_reason": _by_reason(l.default_round_trip for l in default
                                              if l.default_round_trip != "exact"),
        },
        "written_for": {
            "repositories_told": sum(1 for r in repos if r["written_for"]),
            "launches": len(written),
            "by_release": dict(sorted(collections.Counter(l.written_release for l in written).items())),
            "exact": sum(1 for l in written if l.written_round_trip == "exact"),
            "not_exact_by_reason": _by_reason(l.written_round_trip for l in written
                                              if l.written_round_trip != "exact"),
        },
        "per_repository": [
            {"repo": r["repo"], "written_for": r["written_for"],
             "launches": sum(1 for l in verl_main if l.repo == r["repo"]),
             "with_target": sum(1 for l in targeted if l.repo == r["repo"]),
             "exact": sum(1 for l in exact if l.repo == r["repo"])} for r in repos],
    }


def render_thirdparty(s: dict, command: str) -> str:
    """The README section of the third-party corpus."""
    trip, default, written = s["round_trip"], s["default_release"], s["written_for"]
    lines = [
        "## Third-party launch scripts",
        "",
        "Scripts from public research repositories that use verl (listed, with their commits, in",
        "`thirdparty-sources.json`): of each repository's `.sh` files at its commit that name",
        "`verl.trainer.main_ppo`, those not byte-identical to any file in verl's own history, at most six",
        "per repository, evenly spaced in path order.",
        "Each is captured as `tutorrl import SCRIPT` captures it (its own folder the working folder);",
        "each launch of `verl.trainer.main_ppo` is composed with the real config of every supported",
        "release, and imported with `--verl` its *target*: the newest release where the launch as written",
        "composes and every key it sets is read (of those, the newest where the imported spec compiles,",
        "if one does; where none reads them all, the newest where it composes that reads the most), through",
        "the same `import_launch` round trip as above. Numbers in `thirdparty.json`.",
        "",
        "| repositories | scripts | launching main_ppo | launches | megatron | with placeholders | with a target | exact | without --verl: exact | --verl written-for: exact |",
        "|---|---|---|---|---|---|---|---|---|---|",
        f"| {s['repositories']} | {s['scripts']} | {s['scripts_launching_main_ppo']} | {s['launches']} "
        f"| {s['launches_megatron']} | {s['launches_with_placeholders']} | {trip['with_target']} "
        f"| {trip['exact']}/{trip['with_target']} ({trip['percent_exact']}%) "
        f"| {default['exact']}/{default['launches']} ({default['percent_exact']}%) "
        f"| {written['exact']}/{written['launches']} |",
        "",
        "Targets (launches): " + ", ".join(f"{r} {n}" for r, n in s["targets"].items()) + "; chosen as "
        + "; ".join(f"{why} ({n})" for why, n in s.get("targets_why", {}).items()) + ".",
        "",
    ]
    c = s["classification"]
    lines += ["Overrides of the launches with a target, at the target: "
              + ", ".join(f"{k} {v['overrides']} ({v['percent']}%)" for k, v in c.items()) + ".", ""]
    if s["no_target"]:
        lines += ["Launches with no target (they compose at no supported release as written), by Hydra's error "
                  "at the newest:", "", "| launches | error |", "|---|---|"]
        lines += [f"| {r['launches']} | {r['reason'].replace('|', '/')} |" for r in s["no_target"]]
        lines.append("")
        if s.get("no_target_keys"):
            lines += ["The keys Hydra names there (keys of the repositories' own verl forks, mostly; launches): "
                      + ", ".join(f"`{k['key']}` {k['launches']}" for k in s["no_target_keys"][:25]) + ".", ""]
    if trip.get("exact_spec_refused"):
        lines += [f"Of the exact launches, {trip['exact_spec_refused']} get a spec the compiler refuses until it is "
                  "changed (the round trip is proven with the spec as written; the report names what to change, "
                  "and verl fails the launch as captured the same way), by what it refuses:", "",
                  "| launches | what the compiler refuses |", "|---|---|"]
        lines += [f"| {r['launches']} | {r['reason'].replace('|', '/')} |" for r in trip["exact_spec_refused_by_reason"]]
        lines.append("")
    for title, rows in (("Launches with a target not exact at it (`--verl TARGET`), by reason", trip["not_exact_by_reason"]),
                        ("Without `--verl`, not exact, by reason", default["not_exact_by_reason"]),
                        ("With `--verl` the release the repository was written for, not exact, by reason",
                         written["not_exact_by_reason"])):
        if rows:
            lines += [f"{title}:", "", "| launches | reason |", "|---|---|"]
            lines += [f"| {r['launches']} | {r['reason'].replace('|', '/')} |" for r in rows]
            lines.append("")
    if trip["differing_keys"]:
        lines += ["Keys that differ after import (launches): " + ", ".join(
            f"`{d['key']}` {d['launches']}" for d in trip["differing_keys"][:20]) + ".", ""]
    if default["launches"]:
        lines += ["Without `--verl`, the release chosen: " + ", ".join(
            f"{r} {n}" for r, n in default["by_release"].items()) + ".", ""]
    if written["repositories_told"]:
        lines += [f"The release written for could be told for {written['repositories_told']} of "
                  f"{s['repositories']} repositories (their own `verl/version/version` or a `verl==` pin); "
                  "imported at the nearest supported release: " + ", ".join(
                      f"{r} {n}" for r, n in written["by_release"].items()) + ".", ""]
    if s["scripts_not_captured"]:
        lines += ["Scripts not captured: " + "; ".join(f"{r['launches']} {r['reason']}"
                                                      for r in s["scripts_not_captured"]) + ".", ""]
    if s["launches_other_entry"]:
        lines += [f"{s['launches_other_entry']} further launches run a repository's own `main_ppo.py` "
                  "(not verl's trainer) and are not counted.", ""]
    lines += ["Regenerate (the mirrors are bare git dirs named `owner+name`, as the project's fetch tool "
              "brings them):", "", "```", command, "```", ""]
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# Reports


def render_readme(summaries: Sequence[dict], commands: Sequence[str]) -> str:
    lines = [
        "# verl's example scripts, per release tag",
        "",
        "Generated by `tools/corpus.py`; do not edit. Per tag: every `examples/**/*.sh`, captured",
        "with `tutorrl.importer.capture` (real bash, recording stand-ins, jail); each launch of",
        "`verl.trainer.main_ppo` composed with Hydra against its own release's trainer config",
        "(from the release wheel), each override classified by `tutorrl import`'s translation for the",
        "target release (`spec`: a spec field holds it; `extra`: `[verl] extra_overrides` takes it as",
        "written and the compiler accepts it; `unread`: the release accepts the key and never reads",
        "it, and `[verl] unread_overrides` keeps it as written; `refused`: tutorrl refuses it), and every launch that composes imported by `tutorrl import",
        "--verl TARGET`'s own code (`import_launch`: placeholders, roots, config paths as the command",
        "does them) as a spec whose compiled launch is composed again and compared key by key (`round",
        "trip`: exact only when the composed configs are identical). Numbers only: the scripts' text is",
        "not kept here.",
        "",
        "| tag | scripts | launching main_ppo | launches | megatron | own config | unset vars | overrides | distinct keys | composes at own release | target | spec | extra | unread | refused | round trip exact | without --verl: exact |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summaries:
        c = s["classification"]
        comp = s["compose_at_own_release"]
        trip = s.get("round_trip", {})
        lines.append(
            f"| {s['tag']} "
            f"| {s['scripts_found']} | {s['scripts_launching_main_ppo']} | {s['launches']} "
            f"| {s['launches_megatron']} | {s['launches_own_config']} | {s['scripts_with_unset_variables']} "
            f"| {s['overrides']} | {s['distinct_keys']} | {comp['ok']}/{s['launches']} "
            f"| {s['target']}{'' if s['target'] == s['release'] else '*'} "
            f"| {c['spec']['overrides']} ({c['spec']['percent']}%) | {c['extra']['overrides']} ({c['extra']['percent']}%) "
            f"| {c['unread']['overrides']} ({c['unread']['percent']}%) "
            f"| {c['refused']['overrides']} ({c['refused']['percent']}%) "
            f"| {trip.get('exact', 0)}/{trip.get('launches_composing', 0)} ({trip.get('percent_exact', 0.0)}%) "
            f"| {_default_cell(s.get('default_release'))} |")
    lines += ["", "`*` the tag's release is not supported by tutorrl; classified against the target shown "
              "(see `target_why` in the tag's JSON).", ""]
    for s in summaries:
        lines += [f"## {s['tag']}", "", f"- trainer config: {s['config_source']}",
                  f"- target: {s['target']} ({s['target_why']})", ""]
        fails = s["compose_at_own_release"]["failures_by_reason"]
        if fails:
            lines += ["Launches that do not compose at their own release, by Hydra's error:", "",
                      "| launches | error |", "|---|---|"]
            lines += [f"| {f['launches']} | {f['reason'].replace('|', '/')} |" for f in fails]
            lines.append("")
        refused = s["classification"]["refused_by_reason"]
        if refused:
            lines += [f"Overrides tutorrl {s['target']} refuses, by message:", "",
                      "| overrides | keys | message |", "|---|---|---|"]
            lines += [f"| {r['overrides']} | {r['keys']} | {r['reason'].replace('|', '/')} |" for r in refused]
            lines.append("")
        trip = s.get("round_trip", {})
        if trip.get("not_exact_by_reason") or trip.get("differing_keys"):
            lines += ["Import round trip (`tutorrl import --verl TARGET`), launches not exact, by reason:", "",
                      "| launches | reason |", "|---|---|"]
            lines += [f"| {r['launches']} | {r['reason'].replace('|', '/')} |" for r in trip["not_exact_by_reason"]]
            lines.append("")
            lines += _scripts_by_reason(trip["not_exact_by_reason"])
            if trip.get("differing_keys"):
                lines.append("- keys that differ after import (launches): " + ", ".join(
                    f"`{d['key']}` {d['launches']}" for d in trip["differing_keys"][:20]))
            lines.append("")
        if trip.get("exact_spec_refused"):
            lines += ["Exact launches whose imported spec the compiler refuses until changed (the round trip is "
                      "proven with the spec as written; the report names what to change), by reason:", "",
                      "| launches | what the compiler refuses |", "|---|---|"]
            lines += [f"| {r['launches']} | {r['reason'].replace('|', '/')} |"
                      for r in trip["exact_spec_refused_by_reason"]]
            lines.append("")
            lines += _scripts_by_reason(trip["exact_spec_refused_by_reason"])
        default = s.get("default_release")
        if default and default["launches"]:
            lines += ["Without `--verl` (launches of verl's own config folder): the release chosen (the newest "
                      "that reads every key set) " + ", ".join(f"{r} {n}" for r, n in default["by_release"].items())
                      + f"; exact {default['exact']}/{default['launches']}.", ""]
            if default["not_exact_by_reason"]:
                lines += ["| launches | reason (without --verl) |", "|---|---|"]
                lines += [f"| {r['launches']} | {r['reason'].replace('|', '/')} |"
                          for r in default["not_exact_by_reason"]]
                lines.append("")
        top = s["keys_by_scripts"][:15]
        lines += ["Most used keys (scripts setting them): "
                  + ", ".join(f"`{k['key']}` {k['scripts']}" for k in top) + ".", ""]
    lines += ["## Regenerate", "", "```", *commands, "```", ""]
    return "\n".join(lines)


def _scripts_by_reason(rows: Sequence[dict]) -> list[str]:
    """The scripts under each reason (tags measured since the numbers kept them), one line per reason."""
    lines = [f"- {r['reason'].replace('|', '/')}: " + ", ".join(f"`{p}`" for p in r["scripts"])
             for r in rows if r.get("scripts")]
    return lines + [""] if lines else []


def _default_cell(default: dict | None) -> str:
    if not default or not default.get("launches"):
        return "–"
    return f"{default['exact']}/{default['launches']}"


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=False, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def default_cache() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tutorrl" / "corpus"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_tags = sub.add_parser("tags", help="list the release tags of a verl git dir")
    p_tags.add_argument("--verl-git", type=Path, required=True)
    p_run = sub.add_parser("run", help="measure the examples of one or more release tags")
    p_run.add_argument("--verl-git", type=Path, required=True)
    p_run.add_argument("--tag", action="append", required=True)
    p_run.add_argument("--target", help="tutorrl release to classify against (default: see module docs)")
    p_run.add_argument("--cache", type=Path, default=None, help="full results (default ~/.cache/tutorrl/corpus)")
    p_run.add_argument("--out", type=Path, default=DOCS)
    p_run.add_argument("--wheel-cache", type=Path, default=None)
    p_run.add_argument("--timeout", type=float, default=30.0, help="seconds per script capture")
    p_sum = sub.add_parser("summary", help="derive a tag's numbers again from its cached full results")
    p_sum.add_argument("--tag", required=True)
    p_sum.add_argument("--cache", type=Path, default=None, help="full results (default ~/.cache/tutorrl/corpus)")
    p_sum.add_argument("--out", type=Path, default=DOCS)
    p_tp = sub.add_parser("thirdparty", help="measure the third-party launch scripts of a sources list")
    p_tp.add_argument("--sources", type=Path, default=DOCS / "thirdparty-sources.json")
    p_tp.add_argument("--mirror-root", type=Path, required=True,
                      help="folder of bare git dirs named owner+name (or owner+name/repo)")
    p_tp.add_argument("--cache", type=Path, default=None, help="full results (default ~/.cache/tutorrl/corpus)")
    p_tp.add_argument("--out", type=Path, default=DOCS)
    p_tp.add_argument("--timeout", type=float, default=30.0, help="seconds per script capture")
    p_en = sub.add_parser("entries", help="import the launches of verl's other entry points of one tag")
    p_en.add_argument("--verl-git", type=Path, required=True)
    p_en.add_argument("--tag", required=True)
    p_en.add_argument("--out", type=Path, default=DOCS)
    p_en.add_argument("--timeout", type=float, default=30.0, help="seconds per script capture")
    args = parser.parse_args(argv)
    if args.cmd == "entries":
        summary = run_entries(args.verl_git, args.tag, args.timeout, progress=lambda m: print(m, file=sys.stderr))
        write_json(args.out / "entries.json", summary)
        write_readme(args.out)
        print(f"{args.tag}: {summary['exact']}/{summary['launches']} entry launches exact", file=sys.stderr)
        return 0
    if args.cmd == "tags":
        print("\n".join(list_tags(args.verl_git)))
        return 0
    if args.cmd == "thirdparty":
        return main_thirdparty(args)
    if args.cmd == "summary":
        return main_summary(args)
    known = set(list_tags(args.verl_git))
    for tag in args.tag:
        if tag not in known:
            print(f"error: no release tag {tag!r} in {args.verl_git}; there are: {' '.join(sorted(known))}",
                  file=sys.stderr)
            return 2
    cache = args.cache or default_cache()
    for tag in args.tag:
        print(f"{tag}: capturing and composing ...", file=sys.stderr)
        summary, detail = run_tag(args.verl_git, tag, args.target, args.wheel_cache, args.timeout,
                                  progress=lambda m: print(m, file=sys.stderr))
        write_json(cache / f"{tag}.json", detail)
        write_json(args.out / f"{tag}.json", summary)
        print(f"{tag}: {summary['scripts_launching_main_ppo']}/{summary['scripts_found']} scripts launch, "
              f"{summary['overrides']} overrides, {summary['compose_at_own_release']['ok']}/{summary['launches']} "
              f"compose; detail in {cache / (tag + '.json')}", file=sys.stderr)
    write_readme(args.out)
    return 0


def resummarize(detail: dict, previous: dict) -> dict:
    """A tag's numbers from its full results (``run``'s cache file) and its previous numbers (release, target,
    config source): what ``aggregate`` derives, with no capture or composition."""
    scripts, launches = [], []
    for record in detail["scripts"]:
        scripts.append(ScriptResult(record["script"], len(record["launches"]), sorted(record["unset"]),
                                    record["timed_out"], record["exit_code"]))
        launches += [msgspec.convert(l, LaunchResult) for l in record["launches"]]
    return aggregate(previous["tag"], previous["release"], previous["target"], previous["target_why"],
                     previous["scripts_found"], scripts, launches, previous["config_source"])


def main_summary(args) -> int:
    cache = args.cache or default_cache()
    detail_path, summary_path = cache / f"{args.tag}.json", args.out / f"{args.tag}.json"
    for path in (detail_path, summary_path):
        if not path.is_file():
            print(f"error: {path}: no such file (run `tools/corpus.py run --tag {args.tag}` first)", file=sys.stderr)
            return 2
    write_json(summary_path, resummarize(json.loads(detail_path.read_text()), json.loads(summary_path.read_text())))
    write_readme(args.out)
    return 0


def main_thirdparty(args) -> int:
    if not args.mirror_root.is_dir():
        print(f"error: --mirror-root {args.mirror_root}: no such folder (the third-party mode needs the "
              "repositories' mirrors)", file=sys.stderr)
        return 2
    sources = load_sources(args.sources)
    # Numbers of part of the list would read as the corpus's: every mirror first, or nothing runs.
    missing = [s.repo for s in sources if mirror_of(args.mirror_root, s.repo) is None]
    if missing:
        print(f"error: no mirror of {len(missing)} listed repositories under {args.mirror_root}: "
              + ", ".join(missing[:10]), file=sys.stderr)
        return 2
    scripts, launches, repos, missing = run_thirdparty(sources, args.mirror_root, args.timeout,
                                                       progress=lambda m: print(m, file=sys.stderr))
    summary = aggregate_thirdparty(scripts, launches, repos, missing)
    cache = args.cache or default_cache()
    write_json(cache / "thirdparty.json", {"schema": SCHEMA, "scripts": msgspec.to_builtins(scripts),
                                          "launches": msgspec.to_builtins(launches), "repos": repos})
    write_json(args.out / "thirdparty.json", summary)
    write_readme(args.out)
    trip = summary["round_trip"]
    print(f"thirdparty: {summary['launches']} launches, {trip['with_target']} with a target, {trip['exact']} exact "
          f"({trip['percent_exact']}%); detail in {cache / 'thirdparty.json'}", file=sys.stderr)
    return 0


# ---------------------------------------------------------------------------
# Launches of verl's other entry points (entries.toml: fully_async, one_step_off)


def run_entries(gitdir: Path, tag: str, timeout: float, progress=print) -> dict:
    """`tutorrl import --verl <tag's release>` of every launch of a wheel entry point other than main_ppo
    in ``tag``'s ``examples/`` and ``verl/experimental/**/shell/``: the same capture and ``import_launch``
    as :func:`run_tag`, each launch composed with its entry's own config from the release's wheel."""
    from tutorrl.compiler.release import load_entries
    from tutorrl.importer.capture import capture, entry_of
    from tutorrl.importer.launch import import_launch, prepare

    release = tag_release(tag)
    entries = {e.module: e.name for e in load_entries().values() if not e.default and e.source == "wheel"}
    found: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="tutorrl-corpus-") as tmp:
        root = Path(os.path.realpath(tmp)) / "verl"
        root.mkdir()
        data = git(gitdir, "archive", "--format=tar", tag, "examples", "verl/experimental", "verl/trainer")
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            tar.extractall(root, filter="data")
        scripts = sorted(p for p in [*(root / "examples").rglob("*.sh"), *(root / "verl" / "experimental").rglob("*.sh")]
                         if p.is_file() and any(m in p.read_text(errors="replace") for m in entries))
        for i, path in enumerate(scripts, 1):
            rel = str(path.relative_to(root))
            cap = capture(path, vars={}, timeout=timeout, verl_checkout=root)
            mine = [(n, l) for n, l in enumerate(cap.launches)
                    if (e := entry_of(l.entry_kind, l.entry)) is not None and e.name in entries.values()]
            if not mine:
                found.append({"script": rel, "entry": "", "trip": "no launch captured", "refusal": ""})
            for index, launch in mine:
                # As the command runs it: composed with the release's wheel (no root), its entry's own config.
                prep = prepare(cap, rel, root, home=CORPUS_HOME, workdir_root="VERL_CHECKOUT")[index]
                _, report = import_launch(prep, release)
                found.append({"script": rel, "entry": prep.entry, "trip": trip_reason(report),
                              "refusal": refusal_group(report)})
            if i % 10 == 0:
                progress(f"  {tag}: {i}/{len(scripts)} scripts")
    launches = [f for f in found if f["entry"]]
    by_entry = collections.Counter(f["entry"] for f in launches)
    exact = collections.Counter(f["entry"] for f in launches if f["trip"] == "exact")
    return {"schema": SCHEMA, "tag": tag, "release": release, "scripts": len(scripts),
            "scripts_without_a_launch": sorted(f["script"] for f in found if not f["entry"]),
            "launches": len(launches), "exact": sum(exact.values()),
            # The launch as written composes with the release's own config (verl itself could start it).
            "verl_composes": sum(1 for f in launches if not f["trip"].startswith(
                "not checked: the original launch does not compose")),
            "by_entry": {e: {"launches": n, "exact": exact[e]} for e, n in sorted(by_entry.items())},
            "not_exact": [{"script": f["script"], "reason": f["trip"]} for f in launches if f["trip"] != "exact"],
            "spec_refused": [{"script": f["script"], "reason": f["refusal"]} for f in launches if f["refusal"]]}


def render_entries(s: dict, command: str) -> str:
    pct = round(100 * s["exact"] / s["launches"], 1) if s["launches"] else 0.0
    per = ", ".join(f"{e} {v['exact']}/{v['launches']}" for e, v in s["by_entry"].items())
    lines = ["## verl's other entry points", "",
             f"Every launch of a wheel entry point other than main_ppo (fully_async, one_step_off) in verl "
             f"{s['tag']}'s `examples/` and `verl/experimental/**/shell/`, imported with `--verl {s['release']}` "
             "and composed with the entry's own config from the release's wheel (`" + command + "`).", "",
             "| tag | scripts naming the modules | launches | verl composes | round trip exact | of those verl composes "
             "| by entry | spec refused by compile |",
             "|---|---|---|---|---|---|---|---|",
             f"| {s['tag']} | {s['scripts']} | {s['launches']} | {s['verl_composes']} | {s['exact']} ({pct}%) | "
             f"{s['exact']}/{s['verl_composes']} ({round(100 * s['exact'] / max(1, s['verl_composes']), 1)}%) | {per} "
             f"| {len(s['spec_refused'])} |", ""]
    for key, title in (("not_exact", "not exact"), ("spec_refused", "the compiler refuses the imported spec")):
        if s[key]:
            lines += [f"{title}:", ""] + [f"- `{f['script']}`: {f['reason']}" for f in s[key]] + [""]
    if s["scripts_without_a_launch"]:
        lines += ["scripts naming a module with no launch captured: "
                  + ", ".join(f"`{p}`" for p in s["scripts_without_a_launch"]), ""]
    return "\n".join(lines)


def render_recipes(s: dict, command: str) -> str:
    """docs/corpus/README.md's section of tools/corpus_recipes.py's numbers (recipes.json)."""
    pct = round(100 * s["other_import_compile_same_module"] / max(1, s["other_launches"]), 1)
    accepted = s["other_verl_accepts"]
    pct_accepted = round(100 * s["other_verl_accepts_import_compile_same_module"] / max(1, accepted), 1)
    lines = ["## verl's recipe and experimental launches", "",
             f"Every trainer launch of the scripts under verl {s['tag']}'s `recipe/` (verl-recipe at "
             f"`{s['recipe_commit'][:12]}`, the commit the tag pins) and `verl/experimental/`, imported with "
             f"`--recipe` that checkout (verl's own entry points with `--verl {s['release']}`; a recipe's at the "
             "release the import picks, where its code starts), compiled, and the bundle's `launch.sh` read for the "
             f"module it starts (`{command}`).", "",
             "| tag | scripts | launches | main_ppo | other entry points | of those: import, compile, start the same "
             "module | of those verl takes as written | of those: import, compile, start the same module | "
             "round trip exact |", "|---|---|---|---|---|---|---|---|---|",
             f"| {s['tag']} | {s['scripts']} | {s['launches']} | {s['main_ppo_launches']} "
             f"({s['main_ppo_import_compile_same_module']} import, compile, same module) | {s['other_launches']} | "
             f"{s['other_import_compile_same_module']} ({pct}%) | {accepted} | "
             f"{s['other_verl_accepts_import_compile_same_module']} ({pct_accepted}%) | {s['other_exact']} |", "",
             "\"verl takes as written\": the module's own code starts at some verl release (measured with the real "
             "`python -m MODULE --cfg job`: entries.toml's `stops` and `not_entry`) and verl's own Hydra composes the "
             "script's config at the release the import picks; the figure beside it is tutorrl's part alone.", "",
             "| module | entry | launches | imported | verl composes | verl takes as written | exact | "
             "compile, start it |", "|---|---|---|---|---|---|---|---|"]
    for module, v in s["by_module"].items():
        lines.append(f"| `{module}` | {v['entry'] or '(none)'}{' at ' + ', '.join(v['releases']) if v['releases'] else ''} "
                     f"| {v['launches']} | {v['imported']} | "
                     f"{v['verl_composes']} | {v['verl_accepts']} | {v['exact']} | {v['compile_and_start_it']} |")
    lines.append("")
    why = {m: v["not_entry"] for m, v in s["by_module"].items() if v.get("not_entry")}
    if why:
        lines += ["modules that are not entries, and why (entries.toml's `not_entry`):", ""]
        lines += [f"- `{m}`: {w}" for m, w in why.items()] + [""]
    if s["not_met"]:
        lines += ["not imported, compiled and started as written:", ""]
        lines += [f"- `{f['script']}` (`{f['module']}`): {f['reason']}" for f in s["not_met"]] + [""]
    if s.get("real_dry_runs"):
        lines += ["Real dry runs, one launch per recipe entry (`tutorrl run --dry-run` of the compiled bundle: its "
                  "launch.sh starts the real `python -m MODULE --cfg all` with the recipe checkout on its import path "
                  "and the release the import chose installed first on the path):", "",
                  "| entry | verl | script | exit | said |", "|---|---|---|---|---|"]
        lines += [f"| {d['entry']} | {d['verl']} | `{d['script']}` | {d['exit']} | {d['said']} |"
                  for d in s["real_dry_runs"]] + [""]
    if s.get("recipe_modules_start"):
        lines += ["Does each recipe entry's module start (the real `python -m MODULE --cfg job`, the release installed "
                  "with `pip install --no-deps --target` first on the path)?", "",
                  "| entry | verl | exit | config lines printed | stopped with |", "|---|---|---|---|---|"]
        lines += [f"| {r['entry']} | {r['verl']} | {r['exit']} | {r['config_lines']} | {r['said'] or '-'} |"
                  for r in s["recipe_modules_start"]] + [""]
    return "\n".join(lines)


def write_readme(out: Path) -> None:
    """docs/corpus/README.md from the committed numbers: every tag's, then the third-party corpus's."""
    from tutorrl.compiler.release.keysets import release_sort_key

    summaries = [json.loads(p.read_text()) for p in sorted(out.glob("v*.json"))]
    summaries.sort(key=lambda s: release_sort_key(s["release"]))
    commands = ["python tools/corpus.py tags --verl-git VERL_GIT_DIR"] + [
        f"python tools/corpus.py run --verl-git VERL_GIT_DIR --tag {s['tag']}"
        + (f" --target {s['target']}" if s["target_why"].startswith("given") else "") for s in summaries]
    text = render_readme(summaries, commands)
    third = out / "thirdparty.json"
    if third.is_file():
        text += "\n" + render_thirdparty(json.loads(third.read_text()), "python tools/corpus.py thirdparty "
                                         "--sources docs/corpus/thirdparty-sources.json --mirror-root MIRRORS")
    entries = out / "entries.json"
    if entries.is_file():
        s = json.loads(entries.read_text())
        text += "\n" + render_entries(s, f"python tools/corpus.py entries --verl-git VERL_GIT_DIR --tag {s['tag']}")
    recipes = out / "recipes.json"
    if recipes.is_file():
        s = json.loads(recipes.read_text())
        text += "\n" + render_recipes(s, "python tools/corpus_recipes.py --verl-git VERL_GIT_DIR --recipe-git "
                                         f"RECIPE_GIT_DIR --tag {s['tag']}")
    (out / "README.md").write_text(text)


if __name__ == "__main__":
    sys.exit(main())
