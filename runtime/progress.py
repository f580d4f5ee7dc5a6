"""What tutorrl is waiting for, shown while it waits.

On a terminal one status line on stderr is rewritten in place, so a long wait
does not scroll the job's own log away; anywhere else (CI, a pipe) each new
state is one plain line, printed once, so logs stay readable and greppable.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

from tutorrl._text import printable


class _Safe:
    """A stream that goes quiet instead of raising once it is gone (a closed
    terminal answers EIO, a closed pipe EPIPE): what tutorrl has left to do
    then -- stop the job, stop the head, close the record -- must not be cut
    short by a message nobody can read."""

    def __init__(self, stream: TextIO):
        self._stream = stream
        self.dead = False

    def write(self, text: str) -> None:
        if self.dead:
            return
        try:
            self._stream.write(text)
        except (OSError, ValueError):
            self.dead = True

    def flush(self) -> None:
        if self.dead:
            return
        try:
            self._stream.flush()
        except (OSError, ValueError):
            self.dead = True

    def isatty(self) -> bool:
        try:
            return self._stream.isatty()
        except (OSError, ValueError):
            return False


def safe(stream: TextIO) -> _Safe:
    return stream if isinstance(stream, _Safe) else _Safe(stream)


class Progress:
    def __init__(self, stream: TextIO | None = None, *, tty: bool | None = None, quiet: bool = False):
        self._stream = safe(stream if stream is not None else sys.stderr)
        self._tty = self._stream.isatty() if tty is None else tty
        self._quiet = quiet
        self._last = ""
        self._line_open = False
        self._lock = threading.RLock()  # re-entered from a signal handler
        self._since = time.monotonic()

    def status(self, message: str) -> None:
        """A transient state: replaces the previous status."""
        if self._quiet:
            return
        # Status and notes quote what others wrote (a manifest, Ray's answers): escaped like errors.
        message = printable(message)
        with self._lock:
            if message == self._last:
                return
            self._last = message
            self._since = time.monotonic()
            if self._tty:
                self._stream.write("\r\x1b[K" + f"tutorrl: {message}")
                self._line_open = True
            else:
                self._stream.write(f"tutorrl: {message}\n")
            self._stream.flush()

    def tick(self) -> None:
        """Refresh the elapsed time of the current status (terminal only)."""
        if self._quiet or not self._tty or not self._last:
            return
        with self._lock:
            elapsed = time.monotonic() - self._since
            self._stream.write("\r\x1b[K" + f"tutorrl: {self._last} ({elapsed:.0f}s)")
            self._stream.flush()
            self._line_open = True

    def clear(self) -> None:
        """Close the status line before other output is written."""
        with self._lock:
            self._clear_locked()

    def _clear_locked(self) -> None:
        if self._line_open:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
            self._line_open = False

    def note(self, message: str) -> None:
        """A permanent line (a decision the user should see, e.g. a skipped check)."""
        if self._quiet:
            return
        message = printable(message)
        with self._lock:
            self._clear_locked()
            self._stream.write(f"tutorrl: {message}\n")
            self._stream.flush()

    def write_through(self, text: str, out: TextIO) -> None:
        """Job output: clear the status line first so the two never interleave,
        then draw it again below (on a terminal) so it stays in sight while
        the job's log streams."""
        with self._lock:
            self._clear_locked()
            out = safe(out)
            out.write(text)
            out.flush()
            if self._tty and self._last and not self._quiet and text.endswith("\n"):
                self._stream.write(f"tutorrl: {self._last}")
                self._stream.flush()
                self._line_open = True
