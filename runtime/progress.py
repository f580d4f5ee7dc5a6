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


class Progress:
    def __init__(self, stream: TextIO | None = None, *, tty: bool | None = None, quiet: bool = False):
        self._stream = stream if stream is not None else sys.stderr
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
        with self._lock:
            self._clear_locked()
            self._stream.write(f"tutorrl: {message}\n")
            self._stream.flush()

    def write_through(self, text: str, out: TextIO) -> None:
        """Job output: clear the status line first so the two never interleave."""
        with self._lock:
            self._clear_locked()
            out.write(text)
            out.flush()
