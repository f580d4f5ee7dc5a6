"""``tutorrl import``: an existing verl launch -> a spec, with a report, exactly.

Imports only argparse at module level; the handler imports the implementation.
"""

from __future__ import annotations

import argparse


def register(subparsers) -> None:
    from tutorrl._formats import add_format_option

    p = subparsers.add_parser(
        "import",
        help="turn a verl launch script (or an override list) into a spec",
        description=(
            "Run SCRIPT under real bash in a sandbox (verl's entry point and every other outside command "
            "recorded, not run), map each Hydra override of its launch to a spec field of the target verl "
            "release (or [verl] extra_overrides; a key the release never reads to [verl] unread_overrides), write "
            "the spec, and prove the round trip: the spec compiled and the original launch, composed with the "
            "release's own trainer config, must be identical. A spec the compiler refuses (a rule verl checks at "
            "start) is proven as written, and the report names what to change. "
            "Exit 0: exact, and the spec compiles once any placeholders are filled; 1: the report says which keys differ, what to change before "
            "the spec compiles, or why it could not be checked; 2: error. "
            "Give overrides instead of a script after --: tutorrl import --verl 0.7.1 -- key=value ..."
        ),
    )
    p.add_argument("script", nargs="?", help="a launch script (bash)")
    p.add_argument("overrides", nargs="*", help=argparse.SUPPRESS)
    p.add_argument("-o", "--output", metavar="SPEC", help="where to write the spec (default: standard output); a folder DIR/ for a script "
                        "with several launches: one spec each, named after its position and what differs")
    p.add_argument("--verl", metavar="RELEASE",
                   help="target verl release (default: the newest supported release that reads most of the keys "
                        "the launch sets; a key it declares and never reads does not count)")
    p.add_argument("--var", action="append", default=[], metavar="NAME=VALUE",
                   help="a value for a shell variable the script reads but does not set (repeatable)")
    p.add_argument("--arg", action="append", default=[], metavar="VALUE",
                   help="a positional argument of the script: the first --arg is $1, the next $2, ... (repeatable)")
    p.add_argument("--config-name", help="the launch's --config-name (override lists only)")
    p.add_argument("--recipe", metavar="PATH",
                   help="a recipe entry's code (DAPO, entropy, rep_exp): a checkout of verl-recipe at the commit "
                        "tutorrl pins, named as the module's top package (recipe), or the checkout holding it where "
                        "the launch starts a package inside it (rep_exp/); its config composes the round trip and "
                        "the spec's [experiment.recipe] names it")
    p.add_argument("--no-check", action="store_true", help="write the spec without composing the round trip")
    p.add_argument("--timeout", default="30", metavar="SECONDS", help="seconds the script may run (default: 30, at most 3600)")
    p.add_argument("--require-confinement", action="store_true",
                   help="refuse to run the script unless every confinement property holds on this kernel "
                        "(signals and process lifetime too; by default only what keeps secrets and the network "
                        "from the script is required, and the report names what is not confined)")
    add_format_option(p)
    p.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    import json
    import sys

    import msgspec

    from tutorrl import api
    from tutorrl._text import printable
    from tutorrl.importer.text import report_text

    options = api.ImportOptions(**{name: getattr(args, name) for name in api.ImportOptions.__struct_fields__})
    results = api.import_script(options)
    if args.format == "json":
        data = [msgspec.to_builtins(r.report) for r in results]
        print(json.dumps(data if len(results) > 1 else data[0], indent=2, sort_keys=True))
    else:
        for r in results:
            if r.report.spec_path is None:
                print(printable(r.text))  # the spec's comments quote the script; TOML's strings are escaped already
            print(report_text(r.report), file=sys.stderr if r.report.spec_path is None else sys.stdout)
    return 0 if all(r.exact for r in results) else 1
