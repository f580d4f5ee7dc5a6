"""``tutorrl compile``, ``tutorrl verify`` and ``tutorrl keys``.

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
    register_verify(sub)
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
    return SimpleNamespace(command="compile", specs=specs, out="bundles" if out is None else out, handler=_compile)


def register_verify(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verify", help="check a bundle (and its evidence) against its manifest",
                       description="Exit 0 when every file matches the manifest and every evidence record holds.")
    p.add_argument("bundle", help="the bundle folder")
    p.add_argument("--trust", metavar="PUBKEY", action="append", default=[],
                   help="a public key file (the .pub of `tutorrl evidence keygen`; several PEM keys in one file "
                   "are each trusted); every evidence record must then be signed by a trusted key (repeatable)")
    p.add_argument("--anchor", metavar="FILE|N:DIGEST", action="append", default=[],
                   help="an anchor kept outside the bundle (`tutorrl evidence anchor`): the chain must still hold "
                   "that record at that sequence, with HEAD at or past it (repeatable)")
    from tutorrl._formats import add_format_option

    add_format_option(p, help="output format: text or json ({\"ok\", \"bundle\", \"digest\", \"evidence_records\", "
                      "\"problems\", \"warnings\"}, also on failure; with --rehash also \"not_on_disk\") (default: text)")
    p.add_argument("--rehash", action="store_true",
                   help="also hash again every recorded checkpoint still on disk and name each file that no longer "
                   "matches its record (progress on stderr)")
    p.add_argument("--jobs", type=_positive, default=None, metavar="N",
                   help="hashing threads for --rehash (default: all usable cores)")
    p.add_argument("--require-checkpoints", action="store_true",
                   help="with --rehash, a recorded checkpoint no longer on disk is a failure too")
    from tutorrl.compiler.verify import add_trust_digests_option

    add_trust_digests_option(p)
    p.set_defaults(handler=_verify)


def _positive(text: str) -> int:
    import argparse

    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return value


def _compile(args) -> int:
    import sys

    from tutorrl._files import display_path
    from tutorrl.compiler import compile_spec, write_bundle

    if len(args.specs) > 1 or _is_pattern(args.specs[0]):
        return _compile_many(args)
    compiled = compile_spec(args.specs[0])
    for warning in compiled.warnings:
        # Rules verl itself does not enforce: said, never refused.
        from tutorrl.cli import printable

        print(printable(f"warning: {warning.render()}"), file=sys.stderr)
    result = write_bundle(compiled, args.out)
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


def _compile_many(args) -> int:
    """Every spec compiled in memory first; bundles are written only when all compile.

    All or nothing for the whole set, not only per spec: the output is one
    bundle path per spec in the order given, which a failed spec would leave
    without a line, and a set compiled together (a sweep, a folder of specs)
    is reviewed and committed together -- half of it in bundles/ would be a
    state no one asked for. Writing a bundle that is already there costs
    nothing, so compiling the set again once it is fixed redoes no work.
    """
    import os
    import sys

    from tutorrl._files import display_path
    from tutorrl.cli import printable
    from tutorrl.compiler import compile_spec, write_bundle
    from tutorrl.errors import InputError, Problem, SpecError, TutorrlError

    paths, problems = _spec_paths(args.specs)
    compiled = {}  # path -> bundle: a spec named twice is compiled once
    failed = len(problems)  # a pattern that matches nothing counts as a failed spec
    for path in dict.fromkeys(paths):
        try:
            bundle = compile_spec(path)
        except InputError as exc:
            problems += exc.problems
            failed += 1
            continue
        except TutorrlError as exc:
            problems.append(Problem(exc.render().removeprefix("error: "), file=path))
            failed += 1
            continue
        for warning in bundle.warnings:
            print(printable(f"warning: {warning.render()}"), file=sys.stderr)
        compiled[path] = bundle
    if problems:
        given = len(compiled) + failed
        raise SpecError(problems, summary=f"{failed} of {given} {'spec' if given == 1 else 'specs'} "
                                          f"{'has' if failed == 1 else 'have'} problems; no bundle was written.")
    # Bundles already there first: write_bundle only compares those, and one
    # that differs is refused before any new bundle is written.
    written = {}
    for path, bundle in sorted(compiled.items(), key=lambda item: not os.path.exists(os.path.join(args.out, item[1].id))):
        written[path] = write_bundle(bundle, args.out)
    for path in paths:
        m, result = compiled[path].manifest, written[path]
        state = "wrote" if result.created else "unchanged, already at"
        print(f"{m.experiment}: verl {m.verl} ({m.variant}); {state} {display_path(result.folder)}", file=sys.stderr)
        print(display_path(result.folder))
    return 0


def _verify(args) -> int:
    import json
    import sys

    from tutorrl._files import display_path
    from tutorrl.compiler import verify_bundle
    from tutorrl.errors import BundleError
    from tutorrl.evidence.anchor import parse_anchor
    from tutorrl.evidence.sign import load_trusted
    from tutorrl.compiler.verify import apply_trust_digests
    from tutorrl.evidence.verify import check_evidence

    apply_trust_digests(args)
    if (args.jobs is not None or args.require_checkpoints) and not args.rehash:
        from tutorrl.errors import TutorrlError

        raise TutorrlError("--jobs and --require-checkpoints only apply with --rehash")
    not_on_disk: list[str] = []

    def report(ok: bool, digest: str | None, records: int | None, problems: list[str], warnings=()) -> None:
        if args.format == "json":
            doc = {"ok": ok, "bundle": display_path(args.bundle), "digest": digest,
                   "evidence_records": records, "problems": problems, "warnings": list(warnings)}
            if args.rehash:
                doc["not_on_disk"] = not_on_disk
            print(json.dumps(doc, indent=2))

    # Arguments first: a mistyped key or anchor is the user's to fix before anything is judged.
    trust = load_trusted(args.trust) if args.trust else None
    anchors = [parse_anchor(a) for a in args.anchor]
    try:
        bundle = verify_bundle(args.bundle)
    except BundleError as exc:
        report(False, None, None, [str(exc)])
        raise
    from tutorrl.cli import printable

    for warning in bundle.warnings:
        # Names the manifest's own `compiler`, which whoever wrote the bundle chose.
        print(printable(f"warning: {warning}"), file=sys.stderr)
    evidence = check_evidence(bundle.path, bundle.digest, trust=trust, anchors=anchors)
    problems = evidence.problems

    for warning in evidence.warnings:
        print(printable(f"warning: evidence: {warning}"), file=sys.stderr)
    if args.format != "json":
        for line in evidence.lineage:
            print(printable(f"note: lineage: {line}"), file=sys.stderr)
    if args.rehash:
        from tutorrl.evidence.verify import rehash_evidence

        rehashed = rehash_evidence(bundle.path, jobs=args.jobs)
        problems += rehashed.mismatches
        not_on_disk = rehashed.not_on_disk
        if args.require_checkpoints:
            problems += not_on_disk
        elif args.format != "json":
            for line in not_on_disk:
                print(f"note: {line}", file=sys.stderr)
    from tutorrl.contract import EVIDENCE_DIR

    records = len(list((bundle.path / EVIDENCE_DIR).glob("[0-9]*.json")))
    report(not problems, bundle.digest, records, problems, evidence.warnings)
    if problems:
        raise BundleError(f"{args.bundle}: evidence verification failed:\n  " + "\n  ".join(problems))
    if args.format != "json":
        how = "re-derived from its spec" if not bundle.warnings else "digests match"
        said = ""
        if evidence.records:
            said = f"; {evidence.records} evidence record(s)" + (", each signed by a trusted key" if trust else "") + (
                f", holding {len(anchors)} anchor(s)" if anchors else "")
        if args.rehash:
            said += f"; every recorded checkpoint on disk re-hashed and matches ({len(not_on_disk)} no longer on disk)"
        print(f"ok: {display_path(bundle.path)} is bundle {bundle.digest} ({how}){said}")
    return 0
