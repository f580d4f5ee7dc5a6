"""``tutorrl keys``: extract and list the verl key sets tutorrl checks overrides against.

Imports only argparse at module level; handlers import their implementation.
"""

from __future__ import annotations

import argparse


def _run_import(args: argparse.Namespace) -> int:
    from tutorrl import api

    for done in api.keys_import(args.releases, dest=args.dest, wheel_cache=getattr(args, "wheel_cache", None)):
        print(f"{done.path}  ({done.keys} keys; {done.recipe})")
    return 0


def _run_list(args: argparse.Namespace) -> int:
    import sys

    from tutorrl import api

    found = api.keys_list()
    for release, folder in found.shadowed:
        print(f"note: verl {release} was added ({folder}) and now ships with tutorrl: "
              f"the package's data is used; `tutorrl keys remove {release}` removes the folder", file=sys.stderr)
    if getattr(args, "format", "text") == "json":
        import json

        import msgspec

        print(json.dumps(msgspec.to_builtins(found.rows), indent=2))
        return 0
    for r in found.rows:
        recipe = " ".join([r.config_name, *r.overrides])
        added = f"  (added: {r.added})" if r.added is not None else ""
        print(f"{r.release:<12} {r.variant:<9} {r.keys:>5} keys  {recipe}{added}")
    return 0


def _run_add(args: argparse.Namespace) -> int:
    import os
    import sys

    from tutorrl import api

    done = api.keys_add(args.release, wheel=args.wheel, moves=getattr(args, "move", None) or [],
                        wheel_cache=getattr(args, "wheel_cache", None))
    for line in done.lines:
        print(line)
    for warning in done.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(f"added verl {done.release} in {done.seconds:.1f} s: {done.folder} (the whole diff: "
          f"{os.path.join(done.folder, 'diff.txt')}); specs with verl = \"{done.release}\" now compile, and "
          "`tutorrl run` checks its stack", file=sys.stderr)
    return 0


def _run_remove(args: argparse.Namespace) -> int:
    import sys

    from tutorrl import api

    folder = api.keys_remove(args.release)
    print(f"removed verl {args.release} ({folder})", file=sys.stderr)
    return 0


def _run_lock(args: argparse.Namespace) -> int:
    import sys

    from tutorrl import api

    found = api.keys_lock(check=args.check)
    for name in found.changed:
        print(f"{'stale' if found.checked else 'wrote'}  {name}")
    for name in found.stale:
        print(f"{'extra' if found.checked else 'removed'}  {name}")
    if found.checked and not found.current:
        print("locks are out of date: run `tutorrl keys lock`", file=sys.stderr)
        return 1
    if found.current:
        print(f"{found.locks} locks up to date")
    return 0


def add_keys_verbs(parser: argparse.ArgumentParser) -> None:
    """Add the ``import`` and ``list`` verbs to ``parser``."""
    verbs = parser.add_subparsers(dest="keys_command", metavar="VERB", required=True)

    imp = verbs.add_parser(
        "import",
        help="extract a verl release's key sets from its wheel",
        description=(
            "Download verl RELEASE's wheel with pip (or reuse it from the wheel cache), compose its "
            "trainer config with Hydra for the fsdp and megatron variants, and write "
            "verl-RELEASE-{fsdp,megatron}.json. Needs: pip install 'tutorrl[keys]'."
        ),
    )
    imp.add_argument("releases", nargs="+", metavar="RELEASE", help="verl release, e.g. 0.9.1")
    imp.add_argument(
        "--dest",
        metavar="DIR",
        help="folder to write into (default: the package's keysets/ folder, for a checkout; on an installed "
             "tutorrl, `tutorrl keys add RELEASE` adds a release without writing the package)",
    )
    imp.add_argument(
        "--wheel-cache",
        metavar="DIR",
        help="where wheels are downloaded and reused (default: $TUTORRL_WHEEL_CACHE or ~/.cache/tutorrl/wheels)",
    )
    imp.set_defaults(handler=_run_import)

    add = verbs.add_parser(
        "add",
        help="add a verl release tutorrl does not ship (into your data folder, not the package)",
        description=(
            "Read verl RELEASE's wheel (--wheel, else pip downloads it into the wheel cache) and write, into "
            "the user's data folder ($TUTORRL_DATA_DIR, else $XDG_DATA_HOME/tutorrl, else ~/.local/share/tutorrl; "
            "the installed package is never written): its key sets (fsdp, megatron), the config sections it "
            "builds into dataclasses, its locks (the packaged key map with RELEASE added) and a stack record "
            "derived from the newest packaged release before it. Then specs with experiment.verl = RELEASE "
            "compile and `tutorrl run` checks the job's stack. Prints the release diff against that release: "
            "keys added, removed and moved, defaults changed, dataclass fields, and the spec settings the key "
            "map cannot place (each needs a timeline entry). All or nothing. Needs: pip install 'tutorrl[keys]'."
        ),
    )
    add.add_argument("release", metavar="RELEASE", help="verl release, e.g. 0.9.2")
    add.add_argument("--wheel", metavar="PATH", help="the release's wheel (default: downloaded with pip)")
    add.add_argument("--move", action="append", metavar="SETTING=KEY",
                     help="a timeline entry the key map lacks: SETTING's verl key from RELEASE on (repeatable; "
                          "the diff names the settings that need one)")
    add.add_argument(
        "--wheel-cache",
        metavar="DIR",
        help="where wheels are downloaded and reused (default: $TUTORRL_WHEEL_CACHE or ~/.cache/tutorrl/wheels)",
    )
    add.set_defaults(handler=_run_add)

    rm = verbs.add_parser("remove", help="remove a release `keys add` added",
                          description="Remove verl RELEASE's folder from the user's data folder (a packaged "
                                      "release cannot be removed).")
    rm.add_argument("release", metavar="RELEASE", help="verl release, e.g. 0.9.2")
    rm.set_defaults(handler=_run_remove)

    lst = verbs.add_parser("list", help="list the key sets (packaged, and added with `keys add`)")
    from tutorrl._formats import add_format_option

    add_format_option(lst, help="output format: text (one line per key set) or json (default: text)")
    lst.set_defaults(handler=_run_list)

    lock = verbs.add_parser(
        "lock",
        help="regenerate the per-release locks from the key map and key sets",
        description=(
            "Derive keymap/lock/verl-RELEASE-VARIANT.json for every release of the key map from "
            "keymap/verl.toml and the key sets (Hydra's '+' computed from each key set). Fails naming "
            "every setting whose key a release lacks: those need a timeline entry. --check writes "
            "nothing and exits 1 when a committed lock differs."
        ),
    )
    lock.add_argument("--check", action="store_true", help="compare with the committed locks; write nothing")
    lock.set_defaults(handler=_run_lock)


def _run_migrate(args: argparse.Namespace) -> int:
    from tutorrl import api
    from tutorrl.compiler.text import migration_json, migration_text

    found = api.migrate(args.spec, args.target, source=args.source)
    print(migration_json(found) if args.format == "json" else migration_text(found), end="")
    return 0


def register_migrate(subparsers) -> None:
    """Add ``tutorrl migrate`` to the top-level sub-command parser."""
    p = subparsers.add_parser(
        "migrate",
        help="show what moving a spec to another verl release changes",
        description=(
            "Lay the key maps of two verl releases side by side for the settings SPEC writes: keys that "
            "moved, values spelled differently, '+' gained or lost, settings the target release has no "
            "home for, the variant's config selection, and extra_overrides the target would refuse. "
            "Changes nothing; exit 0."
        ),
    )
    p.add_argument("spec", help="the spec file (TOML)")
    p.add_argument("--from", dest="source", metavar="RELEASE",
                   help="the release to compare from (default: the spec's experiment.verl)")
    p.add_argument("--to", dest="target", metavar="RELEASE", required=True, help="the release to move to")
    from tutorrl._formats import add_format_option

    add_format_option(p)
    p.set_defaults(handler=_run_migrate)


def register_keys(subparsers) -> None:
    """Add ``tutorrl keys`` to the top-level sub-command parser."""
    keys = subparsers.add_parser(
        "keys",
        help="verl key sets (import a release, list what is packaged)",
        description="The key sets of verl releases' composed trainer configs, used to check every override.",
    )
    add_keys_verbs(keys)
    # `tutorrl migrate` is a top-level verb registered beside `keys`: both are answered from the key map and
    # its locks, which this module reads.
    register_migrate(subparsers)
