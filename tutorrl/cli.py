"""The ``tutorrl`` command: argument parsing and the one place errors are shown.

Each feature module owns its sub-commands through a ``register(subparsers)``
function; it must import nothing heavy at module level, so that ``tutorrl
compile`` stays a fast interpreter start (no ray, torch, hydra or verl).

A module may also offer ``parse_<command>(argv)``: that command's plain
forms parsed without argparse (whose import and parser building are a
part of a cold compile worth skipping), or ``None`` for anything else -- which argparse then
parses and explains. Its tests hold it to argparse's answers.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from tutorrl import __version__

if TYPE_CHECKING:
    import argparse

# Modules that contribute sub-commands, in the order `--help` lists them.
_COMMAND_MODULES = (
    "tutorrl.compiler.commands",
    "tutorrl.runtime.commands",
    "tutorrl.evidence.commands",
    "tutorrl.review.commands",
    "tutorrl.importer.commands",
    "tutorrl.export.commands",
    "tutorrl.completion",
)
# Which module owns each sub-command, so a command builds only its own parser
# (a test keeps this in step with what the modules register).
COMMAND_OWNERS = {
    "compile": "tutorrl.compiler.commands",
    "verify": "tutorrl.evidence.commands",
    "keys": "tutorrl.compiler.commands",
    "migrate": "tutorrl.compiler.commands",
    "run": "tutorrl.runtime.commands",
    "runs": "tutorrl.runtime.commands",
    "status": "tutorrl.runtime.commands",
    "logs": "tutorrl.runtime.commands",
    "stop": "tutorrl.runtime.commands",
    "model": "tutorrl.runtime.commands",
    "evidence": "tutorrl.evidence.commands",
    "diff": "tutorrl.review.commands",
    "check": "tutorrl.review.commands",
    "schema": "tutorrl.review.commands",
    "import": "tutorrl.importer.commands",
    "export": "tutorrl.export.commands",
    "completion": "tutorrl.completion",
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; with ``command``, only what owns it registers.

    A module may offer ``register_<command>(subparsers)`` to build that one
    command alone (the compile path uses it); otherwise its ``register``
    builds all of its commands.
    """
    from tutorrl._argparse import Parser

    parser = Parser(
        prog="tutorrl",
        description="Compile RL post-training specs into verl launch bundles and run them on Ray.",
    )
    parser.add_argument("--version", action="version", version=f"tutorrl {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    if command == "--version":  # answered before any command is needed
        return parser
    owner = COMMAND_OWNERS.get(command or "")
    for name in (owner,) if owner else _COMMAND_MODULES:
        try:
            # __import__ + sys.modules: importlib.import_module's package costs a cold start.
            __import__(name)
            module = sys.modules[name]
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        register = getattr(module, f"register_{command}", None) if owner else None
        (register or module.register)(sub)
    return parser


def _parse_plain(argv: list[str]):
    """The owning module's ``parse_<command>`` answer, or None."""
    owner = COMMAND_OWNERS.get(argv[0]) if argv else None
    if owner is None:
        return None
    __import__(owner)
    parse = getattr(sys.modules[owner], f"parse_{argv[0]}", None)
    return parse(argv[1:]) if parse is not None else None


def _debug() -> bool:
    """TUTORRL_DEBUG=1: a refused input also shows where in tutorrl it was refused (as Hydra's HYDRA_FULL_ERROR)."""
    import os

    from tutorrl.contract import DEBUG_ENV

    return os.environ.get(DEBUG_ENV) == "1"


def main(argv: list[str] | None = None) -> int:
    # Here, not at module level: it imports msgspec, which entry() loads first
    # (tutorrl/_startup.py).
    from tutorrl._text import printable
    from tutorrl.errors import EXIT_FAILED, EXIT_INTERRUPTED, TutorrlError

    argv = sys.argv[1:] if argv is None else argv
    args = _parse_plain(argv)
    if args is None:
        args = build_parser(argv[0] if argv else None).parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except TutorrlError as exc:
        if _debug():
            import traceback

            traceback.print_exc()
        print(printable(exc.render()), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_FAILED


def entry() -> None:
    """The ``tutorrl`` program (console script and ``python -m tutorrl``): :func:`main`, then exit.

    Only here, where the process ends next, is it tuned for start-up
    (tutorrl/_startup.py); never in :func:`main`.
    """
    from tutorrl import _startup

    short = _startup.begin(sys.argv[1:])
    code = main()
    _startup.finish(code, short)
    sys.exit(code)
