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
