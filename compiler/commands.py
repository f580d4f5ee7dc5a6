"""``tutorrl compile``, ``tutorrl verify`` and ``tutorrl keys``.

Only argparse is imported here; the compiler loads inside the handlers.
"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compile", help="validate a spec and write its bundle",
                       description="Validate a spec and write bundles/<id>/; prints the bundle's path last.")
    p.add_argument("spec", help="the spec file (TOML)")
    p.add_argument("--out", default="bundles", metavar="DIR", help="bundle root (default: bundles)")
    p.set_defaults(handler=_compile)

    p = sub.add_parser("verify", help="check a bundle (and its evidence) against its manifest",
                       description="Exit 0 when every file matches the manifest and every evidence record holds.")
    p.add_argument("bundle", help="the bundle folder")
    from tutorrl._formats import add_format_option

    add_format_option(p, help="output format: text or json ({\"ok\", \"bundle\", \"digest\", \"evidence_records\", "
                      "\"problems\"}, also on failure; with --rehash also \"not_on_disk\") (default: text)")
    p.add_argument("--rehash", action="store_true",
                   help="also hash again every recorded checkpoint still on disk and name each file that no longer "
                   "matches its record (progress on stderr)")
    p.add_argument("--jobs", type=_positive, default=None, metavar="N",
                   help="hashing threads for --rehash (default: all usable cores)")
    p.add_argument("--require-checkpoints", action="store_true",
                   help="with --rehash, a recorded checkpoint no longer on disk is a failure too")
    p.set_defaults(handler=_verify)

    from tutorrl.compiler.keys_commands import register_keys

    register_keys(sub)


def _positive(text: str) -> int:
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
    from tutorrl.compiler.verify import refuse_bundle_as_spec

    refuse_bundle_as_spec(args.spec)
    compiled = compile_spec(args.spec)
    for warning in compiled.warnings:
        # Rules verl itself does not enforce: said, never refused.
        from tutorrl.cli import printable

        print(printable(f"warning: {warning.render()}"), file=sys.stderr)
    result = write_bundle(compiled, args.out)
    m = compiled.manifest
    state = "wrote" if result.created else "unchanged, already at"
    print(f"{m.experiment}: verl {m.verl} ({m.variant}); {state} {display_path(result.path)}", file=sys.stderr)
    print(display_path(result.path))
    return 0


def _verify(args) -> int:
    import json
    import sys

    from tutorrl._files import display_path
    from tutorrl.compiler import verify_bundle
    from tutorrl.errors import BundleError
    from tutorrl.evidence import verify_evidence

    if (args.jobs is not None or args.require_checkpoints) and not args.rehash:
        from tutorrl.errors import TutorrlError

        raise TutorrlError("--jobs and --require-checkpoints only apply with --rehash")
    not_on_disk: list[str] = []

    def report(ok: bool, digest: str | None, records: int | None, problems: list[str]) -> None:
        if args.format == "json":
            doc = {"ok": ok, "bundle": display_path(args.bundle), "digest": digest,
                   "evidence_records": records, "problems": problems}
            if args.rehash:
                doc["not_on_disk"] = not_on_disk
            print(json.dumps(doc, indent=2))

    try:
        bundle = verify_bundle(args.bundle)
    except BundleError as exc:
        report(False, None, None, [str(exc)])
        raise
    for warning in bundle.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    problems = list(verify_evidence(bundle.path, bundle_digest=bundle.digest))
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
    records = len(list((bundle.path / "evidence").glob("[0-9]*.json")))
    report(not problems, bundle.digest, records, problems)
    if problems:
        raise BundleError(f"{args.bundle}: evidence verification failed:\n  " + "\n  ".join(problems))
    if args.format != "json":
        how = "re-derived from its spec" if not bundle.warnings else "digests match"
        print(f"ok: {display_path(bundle.path)} is bundle {bundle.digest} ({how})"
              + (f"; every recorded checkpoint on disk re-hashed and matches ({len(not_on_disk)} no longer on disk)"
                 if args.rehash else ""))
    return 0
