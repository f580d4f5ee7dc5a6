"""Where each key of a TOML document stands (line and column).

The TOML reader (:mod:`tutorrl._toml`) forgets positions, and every spec error must name
the line and column of the key it is about. This is a small scanner that walks
a document that reader has *already accepted* and records, for each dotted key
path, the 1-based line and column where the key (or its table header) is
written. Because the input is known to be valid, the scanner only needs to
skip values correctly; it never has to report syntax errors itself.
"""

from __future__ import annotations

Path = tuple[str, ...]
Position = tuple[int, int]

_BARE = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


class _Scanner:
    def __init__(self, text: str):
        self.text = text
        self.i = 0
        self.positions: dict[Path, Position] = {}
        # Offsets of line starts, to turn an offset into (line, column).
        self._line_starts = [0]
        for n, ch in enumerate(text):
            if ch == "\n":
                self._line_starts.append(n + 1)

    def pos(self, offset: int) -> Position:
        lo, hi = 0, len(self._line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._line_starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1, offset - self._line_starts[lo] + 1

    def peek(self, n: int = 1) -> str:
        return self.text[self.i : self.i + n]

    def skip_ws(self, newlines: bool = False) -> None:
        """Skip blanks, and with ``newlines`` also line ends and comments."""
        while self.i < len(self.text):
            ch = self.text[self.i]
            if ch in " \t\r" or (newlines and ch == "\n"):
                self.i += 1
            elif newlines and ch == "#":
                self.skip_comment()
            else:
                return

    def skip_comment(self) -> None:
        end = self.text.find("\n", self.i)
        self.i = len(self.text) if end < 0 else end

    def record(self, path: Path, offset: int) -> None:
        # The first place a key is named wins: that is where the user looks.
        self.positions.setdefault(path, self.pos(offset))

    # -- keys -------------------------------------------------------------

    def key_part(self) -> str:
        ch = self.peek()
        if ch == '"':
            return self.basic_string()
        if ch == "'":
            end = self.text.index("'", self.i + 1)
            part = self.text[self.i + 1 : end]
            self.i = end + 1
            return part
        start = self.i
        while self.i < len(self.text) and self.text[self.i] in _BARE:
            self.i += 1
        return self.text[start : self.i]

    def dotted_key(self, base: Path) -> Path:
        """Read ``a."b".c``, recording each prefix; return the full path."""
        path = base
        while True:
            self.skip_ws()
            start = self.i
            path = path + (self.key_part(),)
            self.record(path, start)
            self.skip_ws()
            if self.peek() == ".":
                self.i += 1
                continue
            return path

    # -- values -----------------------------------------------------------

    def basic_string(self) -> str:
        # Decoding escapes is not needed for positions except in quoted keys,
        # where the reader's decoding is what the key really is.
        from tutorrl import _toml

        start = self.i
        self.i += 1
        while self.text[self.i] != '"':
            self.i += 2 if self.text[self.i] == "\\" else 1
        self.i += 1
        return _toml.loads("k = " + self.text[start : self.i])["k"]

    def value(self, path: Path) -> None:
        ch = self.peek()
        if self.peek(3) in ('"""', "'''"):
            delim = self.peek(3)
            j = self.i + 3
            while True:
                if self.text[j] == "\\" and delim == '"""':
                    j += 2
                    continue
                if self.text.startswith(delim, j):
                    # A closing delimiter may be followed by up to two quotes
                    # that belong to the string.
                    while self.text.startswith(delim, j + 1):
                        j += 1
                    self.i = j + 3
                    return
                j += 1
        if ch == '"':
            self.basic_string()
        elif ch == "'":
            self.i = self.text.index("'", self.i + 1) + 1
        elif ch == "[":
            self.array(path)
        elif ch == "{":
            self.inline_table(path)
        else:
            while self.i < len(self.text) and self.text[self.i] not in ",]}\n#":
                self.i += 1

    def array(self, path: Path) -> None:
        self.i += 1
        index = 0
        while True:
            self.skip_ws(newlines=True)
            if self.peek() == "]":
                self.i += 1
                return
            self.record(path + (str(index),), self.i)
            self.value(path + (str(index),))
            index += 1
            self.skip_ws(newlines=True)
            if self.peek() == ",":
                self.i += 1

    def inline_table(self, path: Path) -> None:
        self.i += 1
        while True:
            self.skip_ws()
            if self.peek() == "}":
                self.i += 1
                return
            key = self.dotted_key(path)
            self.skip_ws()
            self.i += 1  # '='
            self.skip_ws()
            self.value(key)
            self.skip_ws()
            if self.peek() == ",":
                self.i += 1

    # -- document ---------------------------------------------------------

    def document(self) -> dict[Path, Position]:
        table: Path = ()
        while True:
            self.skip_ws(newlines=True)
            if self.i >= len(self.text):
                return self.positions
            if self.peek() == "[":
                double = self.peek(2) == "[["
                self.i += 2 if double else 1
                table = self.dotted_key(())
                self.skip_ws()
                self.i += 2 if double else 1
            else:
                key = self.dotted_key(table)
                self.skip_ws()
                self.i += 1  # '='
                self.skip_ws()
                self.value(key)
            self.skip_ws()
            if self.peek() == "#":
                self.skip_comment()


def key_positions(text: str) -> dict[Path, Position]:
    """Map each dotted key path in a valid TOML document to (line, column).

    Array elements are indexed with their position as a string
    (``("env", "passthrough", "1")``). Arrays of tables share one entry.
    """
    return _Scanner(text).document()
