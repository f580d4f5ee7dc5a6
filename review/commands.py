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
    import sys

    from tutorrl import api
    from tutorrl._text import printable

    found = api.compare(args.old, args.new, against=args.against, trust_digests=args.trust_digests)
    for warning in found.warnings:
        print(printable(f"warning: {warning}"), file=sys.stderr)
    result = found.result
    if found.kind == "matrix":
        from tutorrl.review.matrix import render_matrix

        sys.stdout.write(render_matrix(result, args.format))
    elif found.kind == "layers":
        from tutorrl.review.layers import render_layers

        sys.stdout.write(render_layers(result, args.format))
    else:
        from tutorrl.review.render import render, use_color

        sys.stdout.write(render(result, args.format, use_color(sys.stdout, args.color) and args.format == "text"))
    return 0 if found.same else 1


def _check(args) -> int:
    import sys

    from tutorrl import api
    from tutorrl.review.check import format_report, report_json
    from tutorrl.review.render import use_color

    report = api.check(args.specs, args.bundles, staged=args.staged)
    if args.format == "json":
        sys.stdout.write(report_json(report))
    else:
        sys.stdout.write(format_report(report, use_color(sys.stdout, args.color)))
    return report.exit_code


def _schema(args) -> int:
    import sys

    from tutorrl import api

    sys.stdout.write(api.schema())
    return 0
