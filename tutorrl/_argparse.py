"""argparse as tutorrl formats it: help as wide as the terminal, without shutil.

Imported only when a parser is built (``tutorrl.cli.build_parser``): the plain
forms of ``tutorrl compile`` never import argparse at all.
"""

from __future__ import annotations

import argparse
import os
import sys


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


class Formatter(argparse.HelpFormatter):
    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position, width if width is not None else _columns() - 2)


class Parser(argparse.ArgumentParser):
    """ArgumentParser whose help is formatted by `Formatter`; sub-parsers inherit it."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", Formatter)
        super().__init__(*args, **kwargs)

    def _check_value(self, action: argparse.Action, value) -> None:
        # A mistyped sub-command: one line naming it and the nearest command,
        # not argparse's usage and list of every choice.
        if isinstance(action, argparse._SubParsersAction) and value not in action.choices:
            import difflib

            from tutorrl._text import printable

            near = difflib.get_close_matches(value, list(action.choices), n=1, cutoff=0.6)
            hint = f"did you mean '{near[0]}'?" if near else "commands: " + ", ".join(action.choices)
            self.exit(2, f"error: {self.prog} {printable(value)}: not a {self.prog} command; {hint} "
                         f"(`{self.prog} --help` says what each does)\n")
        super()._check_value(action, value)


TRUST_DIGESTS_HELP = ("accept a bundle this tutorrl cannot re-derive from its spec (built by another tutorrl release, "
                      "or resealed by hand) on its digests alone, with a warning; default: refuse it "
                      "(TUTORRL_TRUST_DIGESTS=1 sets this default)")


def add_trust_digests_option(parser: argparse.ArgumentParser) -> None:
    """``--trust-digests`` of verify, run, diff and export. The documented
    ``TUTORRL_TRUST_DIGESTS=1`` is read here, at the command line, as the
    flag's default; from here on it is the handler's typed argument (the
    library and a detached supervisor are handed it, never read it)."""
    from tutorrl.contract import TRUST_DIGESTS_ENV

    parser.add_argument("--trust-digests", action="store_true", default=os.environ.get(TRUST_DIGESTS_ENV) == "1",
                        help=TRUST_DIGESTS_HELP)
