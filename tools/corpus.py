"""Measure verl's own example launch scripts against verl and against tutorrl.

    python tools/corpus.py tags --verl-git GITDIR
    python tools/corpus.py run --verl-git GITDIR --tag v0.7.0 --tag v0.5.0 [--target 0.7.1]
                           [--cache DIR] [--out docs/corpus] [--wheel-cache DIR]

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
STANDARD_CONFIG_DIR = "verl/trainer/config"
Class = str  # "spec" | "extra" | "dropped" | "refused"


# ---------------------------------------------------------------------------
# Classification: the one place that asks tutorrl's compiler about a key.


def classify(override: str, release: str, variant: str) -> tuple[Class, str]:
    """Where ``override`` (as a script writes it) goes in a tutorrl spec for ``release``/``variant``.

    ``("spec", field)``: a spec field holds it (the import translation, values
    checked by the compiler's loader); ``("extra", why)``: ``[verl]
    extra_overrides`` takes it as written and the compiler accepts it there;
    ``("dropped", why)``: the release accepts the key and never reads it;
    ``("refused", message)``: tutorrl refuses it, with its message.
    """
    from tutorrl.compiler.keymap import load_lock
    from tutorrl.compiler.keysets import load_keyset
    from tutorrl.compiler.resolve import check_extra
    from tutorrl.importer.translate import translate, validate

    mapped = validate(translate([override], release, variant=variant)).mapped[-1]
    if mapped.how == "field":
        return "spec", mapped.field
    if mapped.how == "selection":
        return "spec", "actor.strategy"
    if mapped.how in ("dropped", "refused"):
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
    from tutorrl.compiler.keymap import load_keymap

    return list(load_keymap().releases)


def choose_target(release: str, supported: Sequence[str], given: str | None = None) -> tuple[str, str]:
    """(target release, why): ``given``, else ``release`` if supported, else the nearest newer, else older."""
    from tutorrl.compiler.keysets import release_sort_key

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
    not_exact = collections.Counter(l.round_trip for l in launches if l.composes and l.round_trip != "exact")
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
            "dropped": {"overrides": by_class["dropped"], "percent": share(by_class["dropped"])},
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
            "differs": sum(n for r, n in trips.items() if r.startswith("differs")),
            "not_checked": sorted(((r, n) for r, n in trips.items() if r.startswith("not checked")),
                                  key=lambda kv: (-kv[1], kv[0])),
            "not_exact_by_reason": [{"reason": r, "launches": n} for r, n in
                                    sorted(not_exact.items(), key=lambda kv: (-kv[1], kv[0]))],
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
    from tutorrl.compiler.keysets import release_sort_key

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

    from tutorrl.compiler.keyset_import import KeysetImportError, extract_config, fetch_wheel

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
    from tutorrl.importer.cli_impl import import_launch, prepare

    prep = prepare(cap, source, root, home=CORPUS_HOME, workdir_root="VERL_CHECKOUT")[launch_index]
    _, report = import_launch(prep, release, root=root, default_config=default_name)
    return trip_reason(report), [d.key for d in report.differences]


def import_default(root: Path, cap, launch_index: int, source: str, default_name: str) -> tuple[str, str]:
    """`tutorrl import` without --verl: (the release it chose, the round trip's reason).

    The round trip composes with that release's own config (from its wheel),
    not the tag's: the launch as that release would run it.
    """
    from tutorrl.importer.cli_impl import import_launch, prepare

    prep = prepare(cap, source, root, home=CORPUS_HOME, workdir_root="VERL_CHECKOUT")[launch_index]
    _, report = import_launch(prep, None)
    return report.release, trip_reason(report)


def trip_reason(report) -> str:
    """One import report's round trip as a reason to count: exact, why it differs, or why it was not checked."""
    if report.exact:
        return "exact"
    if report.exact is None:
        return "not checked: " + reason_group(report.not_checked)
    unread = {m.override.lstrip("+~").split("=", 1)[0] for m in report.mapped
              if m.how == "dropped" and "never read" in m.note}
    keys = {d.key for d in report.differences}
    if keys and all(any(k == u or k.startswith(u + ".") for u in unread) for k in keys):
        return "differs: settings the release declares and never reads"
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
    from tutorrl.importer.capture import capture

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
            cap = capture(path, vars={}, timeout=timeout, verl_checkout=root)
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
                trip, differing, chosen, chosen_trip = "", [], "", ""
                if error is None:
                    trip, differing = import_round_trip(root, cap, cap.launches.index(launch), rel, target,
                                                        default_name)
                    if launch.config_path is None or config_dir == root / STANDARD_CONFIG_DIR:
                        # Without --verl (a launch of its own config folder composes only in the checkout).
                        chosen, chosen_trip = import_default(root, cap, cap.launches.index(launch), rel,
                                                             default_name)
                launch_results.append(LaunchResult(
                    rel, launch.entry, name,
                    None if launch.config_path is None else
                    (os.path.relpath(config_dir, root) if config_dir else launch.config_path),
                    variant, error is None, error, results, trip, differing, chosen, chosen_trip))
                record["launches"].append(msgspec.to_builtins(launch_results[-1]))
            detail.append(record)
            if i % 20 == 0:
                progress(f"  {tag}: {i}/{len(scripts)} scripts")
        summary = aggregate(tag, release, target, why, len(scripts), script_results, launch_results, source)
    return summary, {"schema": SCHEMA, "tag": tag, "target": target, "scripts": detail}


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
        "written and the compiler accepts it; `dropped`: the release accepts the key and never reads",
        "it; `refused`: tutorrl refuses it), and every launch that composes imported by `tutorrl import",
        "--verl TARGET`'s own code (`import_launch`: placeholders, roots, config paths as the command",
        "does them) as a spec whose compiled launch is composed again and compared key by key (`round",
        "trip`: exact only when the composed configs are identical). Numbers only: the scripts' text is",
        "not kept here.",
        "",
        "| tag | scripts | launching main_ppo | launches | megatron | own config | unset vars | overrides | distinct keys | composes at own release | target | spec | extra | dropped | refused | round trip exact | without --verl: exact |",
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
            f"| {c['dropped']['overrides']} ({c['dropped']['percent']}%) "
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
            if trip.get("differing_keys"):
                lines.append("- keys that differ after import (launches): " + ", ".join(
                    f"`{d['key']}` {d['launches']}" for d in trip["differing_keys"][:20]))
            lines.append("")
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
    p_run.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "docs" / "corpus")
    p_run.add_argument("--wheel-cache", type=Path, default=None)
    p_run.add_argument("--timeout", type=float, default=30.0, help="seconds per script capture")
    args = parser.parse_args(argv)
    if args.cmd == "tags":
        print("\n".join(list_tags(args.verl_git)))
        return 0
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
    summaries = [json.loads(p.read_text()) for p in sorted(args.out.glob("v*.json"))]
    from tutorrl.compiler.keysets import release_sort_key

    summaries.sort(key=lambda s: release_sort_key(s["release"]))
    commands = ["python tools/corpus.py tags --verl-git VERL_GIT_DIR"] + [
        f"python tools/corpus.py run --verl-git VERL_GIT_DIR --tag {s['tag']}"
        + (f" --target {s['target']}" if s["target_why"].startswith("given") else "") for s in summaries]
    (args.out / "README.md").write_text(render_readme(summaries, commands))
    return 0


if __name__ == "__main__":
    sys.exit(main())
