"""The import command's work: capture, pick the release, translate, write, check, report."""

from __future__ import annotations

import json
import math
import sys
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


def _launch_from_args(args) -> tuple[str, str | None, str | None, list[str], dict, list[str], object]:
    """(source, config name, config path, overrides, unset vars, other commands, the capture or None)."""
    if args.script is None:
        raise InputError([Problem("give a launch script, or --verl RELEASE -- key=value ...")])
    script = Path(args.script)
    if args.overrides or "=" in args.script:
        # An override list: `tutorrl import --verl R -- a=1 b=2` puts a=1 in `script`.
        overrides = [args.script, *args.overrides]
        return "the command line", args.config_name, None, overrides, {}, [], None
    from tutorrl.importer.capture import MAX_TIMEOUT_S, capture

    timeout = _parse_timeout(str(args.timeout), MAX_TIMEOUT_S)
    if not script.exists():
        raise InputError([Problem("no such file", file=args.script)])
    if not script.is_file():
        raise InputError([Problem("not a regular file (a launch script is a bash file)", file=args.script)])
    cap = capture(script, vars=_parse_vars(args.var), timeout=timeout,
                  require="all" if args.require_confinement else "core")
    if cap.timed_out:
        raise RefusedError(f"{args.script}: the script ran past {timeout:g} s and was stopped "
                           "(raise --timeout if it is only slow)")
    if not cap.launches:
        found = ", ".join(sorted({" ".join(c.argv[:2]) for c in cap.commands})[:8]) or "nothing"
        raise RefusedError(f"{args.script}: no launch of verl.trainer.main_ppo found (the script ran: {found})")
    if len(cap.launches) > 1:
        lines = "; ".join(f"#{i + 1}: {len(l.overrides)} overrides" for i, l in enumerate(cap.launches))
        raise RefusedError(f"{args.script}: {len(cap.launches)} launches of verl.trainer.main_ppo ({lines}); "
                           "import one launch per spec (split the script, or pass one launch's overrides after --)")
    launch = cap.launches[0]
    # The sandbox stood in for HOME and the working folder: give the launch
    # back the values it would have had, run by this user from here.
    places = [(cap.home, str(Path.home())), (cap.workdir, str(Path.cwd()))]

    def real(text: str) -> str:
        for sandbox, actual in places:
            if sandbox:
                text = text.replace(sandbox, actual)
        return text

    others = [real(" ".join(c.argv)) for c in cap.commands if c.kind == "command"][:20]
    config_path = real(launch.config_path) if launch.config_path else None
    return (args.script, launch.config_name, config_path, [real(o) for o in launch.overrides], dict(cap.unset),
            others, cap)


def choose_release(overrides: list[str], given: str | None, variant: str) -> tuple[str, str, str]:
    """(release, why, where the launch's keys belong when not the given release)."""
    from tutorrl.compiler.keymap import describe_releases, load_keymap, load_lock
    from tutorrl.compiler.keysets import load_keyset

    keys = []
    for text in overrides:
        head = text.split("=", 1)[0].lstrip("+~")
        if "=" in text and "." in head:
            keys.append(head)
    releases = load_keymap().releases
    fit = {}
    for release in releases:
        ks, lock = load_keyset(release, variant), load_lock(release, variant)
        fit[release] = sum(1 for k in keys if ks.has(k) or ks.open_parent(k) or lock.passthrough_above(k)
                           or k in lock.undeclared)
    best = max(fit.values()) if fit else 0
    fitting = [r for r in releases if fit[r] == best]
    if given:
        if given not in releases:
            raise InputError([Problem(f"verl {given} is not supported", hint=f"supported releases: {', '.join(releases)}")])
        note = ""
        if fit[given] < best:
            note = (f"{best - fit[given]} more of the launch's {len(keys)} keys exist {describe_releases(fitting)}: "
                    f"import with --verl {fitting[-1]}, then `tutorrl migrate SPEC --to {given}`")
        return given, "given with --verl", note
    return fitting[-1], (f"--verl not given: {best} of the launch's {len(keys)} keys exist {describe_releases(fitting)}; "
                         f"the newest of those"), ""


def cmd_import(args) -> int:
    try:
        import hydra  # noqa: F401  (Hydra's own parser and composer decide what a launch means)
    except ImportError:
        raise RefusedError("tutorrl import needs Hydra: pip install 'tutorrl[import]'") from None
    from tutorrl.importer.translate import render_spec, translate, validate, variant_of

    source, config_name, config_path, overrides, unset, others, cap = _launch_from_args(args)
    variant = variant_of(config_name, overrides)
    release, why, elsewhere = choose_release(overrides, args.verl, variant)
    translation = validate(translate(overrides, release, config_name=config_name, config_path=config_path,
                                     variant=variant))
    text = render_spec(translation, source)
    spec_path = None
    if args.output:
        from tutorrl import _files

        out = Path(args.output)
        try:
            _files.replace_atomic(out, text.encode())
        except OSError as exc:
            raise RefusedError(f"cannot write {out}: {exc.strerror}") from None
        spec_path = str(out)

    exact, not_checked, diffs, warnings = None, "", [], []
    if translation.placeholders:
        not_checked = ("the spec holds placeholders for unset shell variables "
                       f"({', '.join(translation.placeholders)}); give them with --var, or fill them in")
    elif args.no_check:
        not_checked = "--no-check"
    else:
        from tutorrl.errors import SpecError
        from tutorrl.importer.roundtrip import round_trip

        try:
            result = round_trip(text, overrides, config_name=config_name or _default_config(release, variant),
                                config_path=config_path)
        except SpecError as err:
            not_checked = "the imported spec does not compile: " + "; ".join(p.render() for p in err.problems)
        else:
            warnings = list(result.warnings)
            if result.original_error:
                not_checked = f"the original launch does not compose at verl {release}: {result.original_error}"
            elif result.imported_error:
                not_checked = f"the imported spec's launch does not compose: {result.imported_error}"
            else:
                # Keys the release accepts and never reads were dropped on
                # purpose: the config verl *reads* is what must be identical.
                dropped = {m.override.lstrip("+~").split("=", 1)[0] for m in translation.mapped if m.how == "dropped"
                           and "never reads" in m.note}
                diffs = [d for d in result.differences if d.key not in dropped]
                ignored_diffs = len(result.differences) - len(diffs)
                exact = not diffs
                if ignored_diffs:
                    not_checked = ""
                    elsewhere = (elsewhere + "; " if elsewhere else "") + (
                        f"{ignored_diffs} dropped key(s) verl {release} never reads differ, as intended")

    normalised = [m.override for m in translation.mapped if m.note.startswith("the '+'")]
    report = ImportReport(source, release, variant, why, spec_path, translation.mapped, unset,
                          translation.placeholders, others, exact, not_checked, diffs, normalised, elsewhere,
                          warnings)
    if cap is not None:
        report.sandbox = cap.confinement.summary()
        report.confinement = msgspec.to_builtins(cap.confinement.properties)
        report.skipped = list(cap.skipped)
    if args.format == "json":
        print(json.dumps(msgspec.to_builtins(report), indent=2, sort_keys=True))
    else:
        if spec_path is None:
            print(text)
        print(render_report(report), file=sys.stderr if spec_path is None else sys.stdout)
    return 0 if exact else 1


def _default_config(release: str, variant: str) -> str:
    from tutorrl.compiler.keymap import load_lock

    return load_lock(release, variant).config_name


def render_report(r: ImportReport) -> str:
    from tutorrl._files import display_path

    lines = [f"import: {r.source} -> verl {r.release} ({r.variant}); {r.release_reason}"]
    if r.spec_path:
        lines.append(f"spec: {display_path(Path(r.spec_path))}")
    if r.sandbox:
        lines.append(f"sandbox: {r.sandbox}")
        lines += [f"  {name}: {p['how']}" for name, p in r.confinement.items() if not p["confined"]]
    if r.skipped:
        lines.append("not copied into the sandbox (the script cannot read them):")
        lines += [f"  {s}" for s in r.skipped]
    by = {}
    for m in r.mapped:
        by.setdefault(m.how, []).append(m)
    lines.append(f"overrides: {len(by.get('field', []))} to spec fields, {len(by.get('extra', []))} to "
                 f"extra_overrides, {len(by.get('dropped', []))} dropped, {len(by.get('refused', []))} refused")
    moved = [m for m in r.mapped if m.how == "field" and m.note.startswith("the key moved")]
    if moved:
        lines.append("keys the target release spells differently (the spec field writes the new key):")
        lines += [f"  {m.override} -> {m.field}  ({m.note})" for m in moved]
    for how, title in (("extra", "kept as raw overrides (extra_overrides)"), ("dropped", "dropped"),
                       ("refused", "refused")):
        if by.get(how):
            lines.append(f"{title}:")
            lines += [f"  {m.override}" + (f"  ({m.note})" if m.note else "") for m in by[how]]
    if r.normalised:
        lines.append("spelling normalised (the '+' follows the release's key set):")
        lines += [f"  {o}" for o in r.normalised]
    if r.unset:
        lines.append("shell variables read but never set (give them with --var NAME=VALUE):")
        lines += [f"  {name} -> {value}" for name, value in sorted(r.unset.items())]
    if r.other_commands:
        lines.append("other commands the script runs (recorded, not run, not part of the spec):")
        lines += [f"  {c}" for c in r.other_commands]
    if r.other_releases:
        lines.append(f"release: {r.other_releases}")
    if r.warnings:
        lines.append("compiling the spec warns (the launch is still the script's):")
        lines += [f"  {w}" for w in r.warnings]
    if r.exact:
        lines.append(f"round trip: exact (the spec composes to the identical verl {r.release} config)")
    elif r.not_checked:
        lines.append(f"round trip: not checked: {r.not_checked}")
    else:
        lines.append(f"round trip: {len(r.differences)} key(s) differ:")
        for d in r.differences[:50]:
            if d.only_in:
                lines.append(f"  {d.key}: only in the {d.only_in} launch")
            else:
                lines.append(f"  {d.key}: original {d.original!r}, imported {d.imported!r}")
    return "\n".join(lines)
