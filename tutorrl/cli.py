"""The ``tutorrl`` command: argument parsing and the one place errors are shown.

Each feature module owns its sub-commands through a ``register(subparsers)``
function; it must import nothing heavy at module level, so that ``tutorrl
compile`` stays a fast interpreter start (no ray, torch, hydra or verl).
"""

from __future__ import annotations

import argparse
import os
import sys

from tutorrl import __version__
from tutorrl.errors import TutorrlError

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
    "verify": "tutorrl.compiler.commands",
    "keys": "tutorrl.compiler.commands",
    "migrate": "tutorrl.compiler.commands",
    "run": "tutorrl.runtime.commands",
    "runs": "tutorrl.runtime.commands",
    "status": "tutorrl.runtime.commands",
    "logs": "tutorrl.runtime.commands",
    "stop": "tutorrl.runtime.commands",
    "evidence": "tutorrl.evidence.commands",
    "diff": "tutorrl.review.commands",
    "check": "tutorrl.review.commands",
    "schema": "tutorrl.review.commands",
    "import": "tutorrl.importer.commands",
    "export": "tutorrl.export.commands",
    "completion": "tutorrl.completion",
}


def _columns() -> int:
    # What shutil.get_terminal_size() answers, without importing shutil: argparse
    # imports it (and with it zlib, bz2, lzma) for every parser it formats, a
    # measurable share of a cold `tutorrl compile` (benchmarks/bench_compile.py).
    try:
        return int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns
    except (AttributeError, ValueError, OSError):
        return 80


class _Formatter(argparse.HelpFormatter):
    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position, width if width is not None else _columns() - 2)


class _Parser(argparse.ArgumentParser):
    """ArgumentParser whose help is formatted by `_Formatter`; sub-parsers inherit it."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; with ``command``, only what owns it registers.

    A module may offer ``register_<command>(subparsers)`` to build that one
    command alone (the compile path uses it); otherwise its ``register``
    builds all of its commands.
    """
    parser = _Parser(
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


_UNSAFE = {c: f"\\x{c:02x}" for c in range(32) if c not in (9, 10)} | {0x7F: "\\x7f"} | {
    c: f"\\u{c:04x}" for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C)}


def printable(text: str) -> str:
    """``text`` with control and bidirectional-override characters escaped: a
    value quoted in an error message cannot move the cursor, recolour the
    terminal, or reorder what the user reads."""
    return text.translate(_UNSAFE)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv[0] if argv else None)
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except TutorrlError as exc:
        print(printable(exc.render()), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
