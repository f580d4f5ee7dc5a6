"""``--format``: one spelling for every command that prints data.

Commands import this from their ``register`` (it needs only argparse), so
``--format text|json`` (plus ``markdown`` where a command renders for a code
review) reads the same everywhere. ``--json``, the spelling some commands
used first, is kept as a hidden alias of ``--format json``.
"""

from __future__ import annotations

import argparse

TEXT, JSON, MARKDOWN = "text", "json", "markdown"


def add_format_option(parser: argparse.ArgumentParser, *, choices: tuple[str, ...] = (TEXT, JSON),
                      default: str = TEXT, help: str | None = None, legacy_json: bool = False) -> None:
    """Add ``--format {choices}`` (dest ``format``); ``legacy_json`` also accepts ``--json``."""
    parser.add_argument("--format", choices=choices, default=default,
                        help=help or f"output format: {', '.join(choices)} (default: {default})")
    if legacy_json:
        parser.add_argument("--json", dest="format", action="store_const", const=JSON, help=argparse.SUPPRESS)
