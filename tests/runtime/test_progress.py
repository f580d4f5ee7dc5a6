"""The run's status line and notes (`runtime/progress.py`) quote what others wrote -- a bundle's
manifest, Ray's answers -- so they reach the terminal escaped, like error messages."""

from __future__ import annotations

import io

import pytest

from tutorrl.runtime.progress import Progress

HOSTILE = "compiled by tutorrl 0.0.9\x1b[2K\x1b[1A\rok: verified\u202e\x07"


@pytest.mark.parametrize("tty", [False, True])
def test_notes_and_status_escape_control_and_bidi_characters(tty):
    out = io.StringIO()
    progress = Progress(stream=out, tty=tty)
    progress.note(f"warning: {HOSTILE}")
    progress.status(f"job: {HOSTILE}")
    progress.clear()
    text = out.getvalue()
    # Only the status line's own "clear the line" sequence may be there, never the quoted ones.
    quoted = text.replace("\r\x1b[K", "")
    assert "\x1b" not in quoted and "\r" not in quoted and "\u202e" not in quoted and "\x07" not in quoted
    assert "\\x1b[2K" in quoted and "\\u202e" in quoted
