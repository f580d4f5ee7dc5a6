"""The user-facing errors of tutorrl.

Every failure a user can cause or fix is one of these. The CLI catches
:class:`TutorrlError` once and prints :meth:`TutorrlError.render` -- never a
traceback. Anything else escaping is a bug in tutorrl and is shown as one.
"""

from __future__ import annotations

import msgspec


class Problem(msgspec.Struct, frozen=True):
    """One thing wrong with an input, located as precisely as we can."""

    message: str
    file: str | None = None
    line: int | None = None
    column: int | None = None
    key: str | None = None
    hint: str | None = None

    def render(self) -> str:
        where = ""
        if self.file is not None:
            where = self.file
            if self.line is not None:
                where += f":{self.line}"
                if self.column is not None:
                    where += f":{self.column}"
            where += ": "
        key = f"{self.key}: " if self.key else ""
        text = f"{where}{key}{self.message}"
        if self.hint:
            text += f" ({self.hint})"
        return text

    def sort_key(self) -> tuple:
        return (self.file or "", self.line or 0, self.column or 0, self.key or "", self.message)


class TutorrlError(Exception):
    """Base of every error that is the user's to fix. Exit code 2 by default."""

    exit_code = 2

    def render(self) -> str:
        return f"error: {self}"


class InputError(TutorrlError):
    """One or more problems with an input file (a spec, a bundle, arguments).

    Carries every problem found, so the user fixes them all in one round.
    """

    def __init__(self, problems: list[Problem], summary: str | None = None):
        self.problems = sorted(problems, key=Problem.sort_key)
        self.summary = summary
        super().__init__(summary or (self.problems[0].render() if self.problems else "invalid input"))

    def render(self) -> str:
        lines = [f"error: {p.render()}" for p in self.problems]
        if self.summary:
            lines.append(self.summary)
        elif len(self.problems) > 1:
            lines.append(f"{len(self.problems)} problems found; nothing was written.")
        return "\n".join(lines)


class SpecError(InputError):
    """The spec file is malformed, mistyped or inconsistent."""


class BundleError(TutorrlError):
    """A bundle is missing, incomplete, or does not match its manifest."""


class RefusedError(TutorrlError):
    """The environment cannot run what was asked (preflight, cluster, versions)."""
