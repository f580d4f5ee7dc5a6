"""``tutorrl diff``, ``tutorrl check`` and ``tutorrl schema``.

Only argparse is imported here; the implementation loads inside the handlers
so that ``tutorrl compile`` does not pay for it.
"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    from tutorrl._formats import add_format_option

    p = sub.add_parser(
        "diff", help="explain what changes between two launches",
        description="Compare two bundles, two specs, or a spec and a bundle, in terms of settings, verl keys, "
                    "resources, reward, environment and verl release. Exit 0 when they are the same launch, "
                    "1 when they differ, 2 on error.")
    p.add_argument("old", help="a bundle folder or a spec file (with --against: the spec to compare)")
    p.add_argument("new", nargs="*", help="a bundle folder or a spec file; several (or OLD a folder of bundles, or a "
                                          "sweep's spec) compare a set: the settings that vary, as a matrix")
    p.add_argument("--against", metavar="REF",
                   help="compare the spec OLD as committed on git REF with the spec as it is now")
    add_format_option(p, choices=("text", "markdown", "json"),
                      help="output format: text (coloured on a terminal; NO_COLOR respected), markdown for a "
                           "pull request, json (default: text)")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto", help="colour text output")
    from tutorrl._argparse import add_trust_digests_option

    add_trust_digests_option(p)
    p.set_defaults(handler=_diff)

    p = sub.add_parser(
        "check", help="fail when a committed bundle is stale, missing or orphaned",
        description="Recompile every spec under --specs (in memory) and compare with the bundles under "
                    "--bundles; with --staged, both as staged in the git index. Exit 0 when every spec's bundle is committed and no other bundle is, "
                    "1 when a bundle is stale, missing or orphaned, 2 on error.")
    p.add_argument("--specs", default="specs", metavar="DIR", help="spec folder (default: specs)")
    p.add_argument("--bundles", default="bundles", metavar="DIR", help="bundle root (default: bundles)")
    p.add_argument("--staged", action="store_true",
                   help="check what is being committed: specs and bundles as staged in the git index, "
                        "not the work tree (the pre-commit hook)")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto", help="colour text output")
    add_format_option(p, help="output format: text, or json (every spec's state, orphans, errors and the "
                              "commands that fix them) (default: text)")
    p.set_defaults(handler=_check)

    p = sub.add_parser(
        "schema", help="print the JSON Schema of spec files (for editors)",
        description="Print a JSON Schema (draft 2020-12) of spec files, e.g. "
                    "`tutorrl schema > tutorrl.schema.json` for Taplo / Even Better TOML.")
    add_format_option(p, choices=("json",), default="json",
                      help="output format: json, the only one (accepted so every command spells it the same)")
    p.set_defaults(handler=_schema)


def _diff(args) -> int:
    import os
    import sys

    from tutorrl.errors import InputError, Problem

    from tutorrl.review.model import diff_sides
    from tutorrl.review.render import render, use_color
    from tutorrl.review.sides import load_side, spec_side

    if args.against is None and (len(args.new) > 1 or any(_is_set(w) for w in [args.old, *args.new])):
        from tutorrl.review.matrix import load_sides, matrix, render_matrix

        sides = load_sides([args.old, *args.new], trust_digests=args.trust_digests)
        from tutorrl.cli import printable

        for warning in (w for side in sides for w in side.warnings):
            print(printable(f"warning: {warning}"), file=sys.stderr)
        result = matrix(sides)
        sys.stdout.write(render_matrix(result, args.format))
        return 0 if result.same else 1
    if args.against is not None:
        if args.new:
            raise InputError([Problem("--against compares one spec with its committed self; "
                                      "give one spec, not two paths")])
        from tutorrl.compiler.spec import read_spec_bytes
        from tutorrl.review.gitref import read_at_ref

        now = read_spec_bytes(args.old, args.old)
        old = spec_side(read_at_ref(args.old, args.against), f"{args.against}:{args.old}")
        new = spec_side(now, args.old)
    else:
        if not args.new:
            raise InputError([Problem("give two bundles or specs to compare (or a set: several, a folder of bundles, "
                                      "a sweep's spec), or one spec and --against REF")])
        from tutorrl.errors import SpecError

        try:
            old = load_side(args.old, trust_digests=args.trust_digests)
        except SpecError:
            from tutorrl.review import layers

            # A partial base of the other spec: what that spec writes over it, as written.
            if not os.path.isfile(args.new[0]) or not layers.extends(args.old, args.new[0]):
                raise
            result = layers.layer_diff(args.old, args.new[0])
            sys.stdout.write(layers.render_layers(result, args.format))
            return 1 if result.changes else 0
        new = load_side(args.new[0], trust_digests=args.trust_digests)
    from tutorrl.cli import printable

    for warning in (*old.warnings, *new.warnings):
        print(printable(f"warning: {warning}"), file=sys.stderr)
    result = diff_sides(old, new)
    sys.stdout.write(render(result, args.format, use_color(sys.stdout, args.color) and args.format == "text"))
    return 0 if result.same else 1


def _is_set(word: str) -> bool:
    """A folder of bundles, or a spec with a sweep: a set to read as a matrix."""
    import os

    from tutorrl.contract import MANIFEST

    if os.path.isdir(word):
        return not os.path.exists(os.path.join(word, MANIFEST))
    try:
        with open(word, "rb") as fh:
            raw = fh.read(1 << 20)
    except OSError:
        return False
    if b"sweep" not in raw:
        return False
    from tutorrl import _toml

    try:
        return "sweep" in _toml.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, _toml.TOMLDecodeError):
        return False


def _check(args) -> int:
    import sys

    from tutorrl.review.check import format_report, run_check
    from tutorrl.review.render import use_color

    report = run_check(args.specs, args.bundles, staged=args.staged)
    if args.format == "json":
        from tutorrl.review.check import report_json

        sys.stdout.write(report_json(report))
    else:
        sys.stdout.write(format_report(report, use_color(sys.stdout, args.color)))
    return report.exit_code


def _schema(args) -> int:
    import sys

    from tutorrl.review.schema import schema_json

    sys.stdout.write(schema_json())
    return 0
