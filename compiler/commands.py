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
    import sys

    from tutorrl import api
    from tutorrl._files import display_path
    from tutorrl._text import printable

    done = api.compile_files(args.specs, args.out, sets=getattr(args, "set", []),
                             rerecord=getattr(args, "rerecord", False))
    for base, count in done.partial_bases:
        print(f"{display_path(base)}: a base that does not compile on its own; compiled through the "
              f"{count} {'spec' if count == 1 else 'specs'} given that extend it", file=sys.stderr)
    for warning in done.warnings:
        # Rules verl itself does not enforce: said, never refused.
        print(printable(f"warning: {warning}"), file=sys.stderr)
    for spec in done.specs:
        for launch in spec.launches:
            state = "wrote" if launch.created else "unchanged, already at"
            print(f"{launch.experiment}: verl {launch.verl} ({launch.variant}); {state} {display_path(launch.folder)}",
                  file=sys.stderr)
        if spec.sweep:
            from tutorrl.compiler.text import points_table

            print(printable(points_table(spec.spec, spec.launches)), file=sys.stderr)
        for launch in spec.launches:
            print(display_path(launch.folder))
    return 0
