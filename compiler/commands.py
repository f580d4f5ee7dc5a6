"""``tutorrl compile`` and ``tutorrl keys`` (``tutorrl verify``, which judges evidence too, is evidence/commands.py).

Nothing is imported here at module level, argparse included: ``tutorrl
compile SPEC... [--out DIR]`` is parsed by :func:`parse_compile` and the
compiler loads inside the handlers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse


def register(sub: argparse._SubParsersAction) -> None:
    register_compile(sub)
    from tutorrl.compiler.keys_commands import register_keys

    register_keys(sub)


def register_compile(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compile", help="validate specs and write their bundles",
                       description="Validate each spec and write bundles/<id>/; prints each bundle's path, one per "
                                   "line in the order given. With several specs, nothing is written unless every "
                                   "spec compiles (every problem of every spec is reported).")
    p.add_argument("specs", nargs="+", metavar="SPEC",
                   help="a spec file (TOML); several, or a quoted glob ('specs/*.toml', '**' for subfolders), "
                        "compile in one process")
    p.add_argument("--out", default="bundles", metavar="DIR", help="bundle root (default: bundles)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="set",
                   help="set one spec setting for this compile (actor.lr=3e-6), typed as the setting says; "
                        "recorded in the bundle's spec.toml like any value; repeatable")
    p.add_argument("--rerecord", action="store_true",
                   help="where a bundle is already there, record this spec's sources in its manifest even where "
                        "the record it holds cannot be proved false from here (its holder removed); "
                        "`tutorrl check` says when")
    p.set_defaults(handler=_compile)


def parse_compile(argv: list[str]):
    """``compile``'s arguments for its plain forms -- ``SPEC...``, ``SPEC... --out DIR``,
    ``--out DIR SPEC...``, ``--out=DIR`` -- or None for anything else (help, an
    abbreviation, ``--``, a value starting with ``-``, a repeated option, specs
    on both sides of ``--out``), which argparse then parses and explains. Same
    answers as :func:`register_compile`'s parser wherever this answers at all
    (a property test holds it there); never a guess.
    """
    from types import SimpleNamespace

    specs: list[str] = []
    out = None
    out_after_specs = False
    rest = iter(argv)
    for word in rest:
        if word == "--out" or word.startswith("--out="):
            value = word[len("--out="):] if word != "--out" else next(rest, None)
            if out is not None or value is None or value.startswith("-") or not value:
                return None
            out = value
            out_after_specs = bool(specs)
        elif word.startswith("-") or out_after_specs:
            # argparse takes one run of positionals: `a --out o b` is its error to explain.
            return None
        else:
            specs.append(word)
    if not specs:
        return None
    return SimpleNamespace(command="compile", specs=specs, out="bundles" if out is None else out, set=[],
                           handler=_compile)


def _compile(args) -> int:
    import os
    import sys

    from tutorrl._files import display_path
    from tutorrl.compiler import write_bundle

    if len(args.specs) > 1 or _is_pattern(args.specs[0]):
        return _compile_many(args)
    from tutorrl.compiler.spec import might_compose
    from tutorrl.compiler.spec import read_spec_bytes

    path, sets = args.specs[0], getattr(args, "set", [])
    raw = read_spec_bytes(path, path)
    if sets or might_compose(raw):
        # Only a spec that may extend a base or sweep loads the composition (a cold compile's time).
        from tutorrl.compiler.pipeline import compile_raw

        family = compile_raw(path, path, raw, sets=sets)
        if len(family) > 1:
            return _compile_many(args, {path: family})
        compiled = family[0].bundle
    else:
        from tutorrl.compiler import compile_bytes

        compiled = compile_bytes(raw, path)
    for warning in compiled.warnings:
        # Rules verl itself does not enforce: said, never refused.
        from tutorrl._text import printable

        print(printable(f"warning: {warning.render()}"), file=sys.stderr)
    result = write_bundle(compiled, args.out, spec_dir=os.path.dirname(path), rerecord=getattr(args, "rerecord", False))
    m = compiled.manifest
    state = "wrote" if result.created else "unchanged, already at"
    print(f"{m.experiment}: verl {m.verl} ({m.variant}); {state} {display_path(result.folder)}", file=sys.stderr)
    print(display_path(result.folder))
    return 0


def _is_pattern(word: str) -> bool:
    """A glob to expand (the shell did not, it was quoted), unless a file has that very name."""
    import os

    return any(c in word for c in "*?[") and not os.path.exists(word)


def _spec_paths(words: list[str]) -> tuple[list[str], list]:
    """The spec files named by ``words``, in the order given, each pattern's
    matches sorted in its place; and a problem for each pattern matching none."""
    import glob
    import os

    from tutorrl.errors import Problem

    paths: list[str] = []
    problems = []
    for word in words:
        if not _is_pattern(word):
            paths.append(word)
            continue
        matches = sorted(p for p in glob.glob(word, recursive=True) if not os.path.isdir(p))
        if not matches:
            problems.append(Problem("no spec file matches this pattern", file=word))
        paths += matches
    return paths, problems


def _compile_many(args, done: dict | None = None) -> int:
    """Every spec compiled in memory first; bundles are written only when all compile.

    All or nothing for the whole set, not only per spec: the output is one
    bundle path per launch in the order given, which a failed spec would leave
    without a line, and a set compiled together (a sweep, a folder of specs)
    is reviewed and committed together -- half of it in bundles/ would be a
    state no one asked for. Writing a bundle that is already there costs
    nothing, so compiling the set again once it is fixed redoes no work.

    A sweep is one spec of many launches: each of its points is a line of
    output, and a table of its points and their bundles goes to stderr. A
    spec that another spec of the set extends is a base: compiled like any
    spec where it compiles on its own, and otherwise (a partial base, which
    leaves what its children give) only through the specs built on it.
    """
    import os
    import sys

    from tutorrl._files import display_path
    from tutorrl._text import printable
    from tutorrl.compiler import write_bundle
    from tutorrl.compiler.pipeline import bases_of, compile_family
    from tutorrl.errors import InputError, Problem, SpecError, TutorrlError

    sets = getattr(args, "set", [])
    paths, problems = _spec_paths(args.specs)
    families = dict(done or {})  # path -> its launches: a spec named twice is compiled once
    based = _bases_in(paths, bases_of) if len(paths) > 1 else {}
    partial = []  # bases that do not compile on their own: compiled through the specs that extend them
    failed = len(problems)  # a pattern that matches nothing counts as a failed spec
    for path in dict.fromkeys(paths):
        if path in families:
            continue
        try:
            family = compile_family(path, sets=sets)
        except InputError as exc:
            count = based.get(os.path.realpath(path))
            if count:
                partial.append(path)
                print(f"{display_path(path)}: a base that does not compile on its own; compiled through the "
                      f"{count} {'spec' if count == 1 else 'specs'} given that extend it", file=sys.stderr)
                continue
            problems += exc.problems
            failed += 1
            continue
        except TutorrlError as exc:
            problems.append(Problem(exc.render().removeprefix("error: "), file=path))
            failed += 1
            continue
        families[path] = family
    for family in families.values():
        for launch in family:
            for warning in launch.bundle.warnings:
                print(printable(f"warning: {warning.render()}"), file=sys.stderr)
    if problems:
        given = len(families) + failed
        raise SpecError(problems, summary=f"{failed} of {given} {'spec' if given == 1 else 'specs'} "
                                          f"{'has' if failed == 1 else 'have'} problems; no bundle was written.")
    # Bundles already there first: write_bundle only compares those, and one
    # that differs is refused before any new bundle is written.
    paths = [p for p in paths if p not in partial]
    launches = [(launch, os.path.dirname(path)) for path in dict.fromkeys(paths) for launch in families[path]]
    written = {}
    fresh, again = [], []
    new_ids = set()
    rerecord, rerecorded = getattr(args, "rerecord", False), set()
    for launch, spec_dir in launches:
        if os.path.exists(os.path.join(args.out, launch.bundle.id)):
            # Re-recorded by the first spec that names it, as a new bundle is written.
            first = launch.bundle.id not in rerecorded
            rerecorded.add(launch.bundle.id)
            written[id(launch)] = write_bundle(launch.bundle, args.out, spec_dir=spec_dir, rerecord=rerecord and first)
        elif launch.bundle.id in new_ids:
            # A launch two specs of the set hold (a point two sweeps share): written once, by the
            # first that names it, whose sources its manifest then records (store._refresh_provenance).
            again.append((launch, spec_dir))
        else:
            new_ids.add(launch.bundle.id)
            fresh.append((launch, spec_dir))
    if len(fresh) > 1:
        # Creating a file waits on the disk without using the CPU (a 100-point
        # sweep creates 500): four writers overlap those waits. Each bundle is still written atomically,
        # and every one was compiled, and every existing one compared, before
        # the first was written; the order new ones land in is no promise.
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=4) as pool:
            for (launch, _), result in zip(fresh, pool.map(
                    lambda c: write_bundle(c[0].bundle, args.out, spec_dir=c[1]), fresh)):
                written[id(launch)] = result
    else:
        for launch, spec_dir in fresh:
            written[id(launch)] = write_bundle(launch.bundle, args.out, spec_dir=spec_dir)
    for launch, spec_dir in again:
        written[id(launch)] = write_bundle(launch.bundle, args.out, spec_dir=spec_dir)
    for path in paths:
        family = families[path]
        for launch in family:
            m, result = launch.bundle.manifest, written[id(launch)]
            state = "wrote" if result.created else "unchanged, already at"
            print(f"{m.experiment}: verl {m.verl} ({m.variant}); {state} {display_path(result.folder)}",
                  file=sys.stderr)
        if family[0].point is not None:
            print(printable(_points_table(path, family, written)), file=sys.stderr)
        for launch in family:
            print(display_path(written[id(launch)].folder))
    return 0


def _bases_in(paths: list[str], bases_of) -> dict[str, int]:
    """The specs of ``paths`` that others of them extend (by real path), and how many extend each."""
    import os

    given = {os.path.realpath(p) for p in paths}
    counts: dict[str, int] = {}
    for path in paths:
        try:
            with open(path, "rb") as fh:
                raw = fh.read(1 << 20)
        except OSError:
            continue  # compiling it says why
        for base in bases_of(path, raw):
            real = os.path.realpath(base)
            if real in given:
                counts[real] = counts.get(real, 0) + 1
    return counts


def _points_table(path: str, family: list, written: dict) -> str:
    """A sweep's points and their bundles, one row each, the swept settings as columns."""
    from tutorrl._files import display_path
    from tutorrl.compiler.spec import shown

    keys = [k for k, _ in family[0].point.values]
    rows = [[str(n + 1)] + [shown(v) for _, v in launch.point.values] + [display_path(written[id(launch)].folder)]
            for n, launch in enumerate(family)]
    header = ["point"] + keys + ["bundle"]
    widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
    lines = [f"{path}: a sweep of {len(family)} points"]
    lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header] + rows]
    return "\n".join(lines)
