"""The user-facing errors of tutorrl, and every exit code it returns.

Every failure a user can cause or fix is one of the classes below, all in
this one module (as SkyPilot keeps ``sky/exceptions.py``): the CLI catches
:class:`TutorrlError` once and prints :meth:`TutorrlError.render` -- never a
traceback (``TUTORRL_DEBUG=1`` adds it). Anything else escaping is a bug in
tutorrl and is shown as one. The modules that raise them import them from
here; the names they once lived under still resolve (``from
tutorrl.runtime.lifecycle import RunNotFound``).

A check's outcome before it becomes an error is a :class:`Finding` (a
setting, what is wrong, a hint, a severity); located in a file it becomes a
:class:`Problem`, and the problems of one input travel together in an
:class:`InputError`.
"""

from __future__ import annotations

from typing import Literal

import msgspec

# -- exit codes -----------------------------------------------------------
# What `tutorrl` returns (README, "Exit status"). launch.sh returns
# EXIT_STACK itself; tests hold its template to this value.
EXIT_OK = 0
#: The job failed and gave no exit code of its own (a job that gives one passes it on).
EXIT_FAILED = 1
#: Refused input: a spec, bundle, argument or environment the user must fix.
EXIT_INPUT = 2
#: launch.sh found the wrong verl, or no tutorrl for the in-run evidence hook.
EXIT_STACK = 3
#: The job succeeded but a checkpoint of the run failed an evidence check or could not be recorded.
EXIT_EVIDENCE_FAILED = 4
#: The in-run evidence check stopped training (evidence.on_failure = "stop").
EXIT_EVIDENCE_STOPPED = 5
#: Interrupted (SIGINT, SIGTERM, SIGHUP): 128 + SIGINT, as shells report it.
EXIT_INTERRUPTED = 130

Severity = Literal["error", "warning"]


class Finding(msgspec.Struct, frozen=True):
    """One outcome of a check on a spec, not yet placed in its file.

    ``key`` is the dotted spec setting it is about (``rollout.n``); the
    compiler places it with the spec's positions, turning it into a
    :class:`Problem`. A warning compiles; an error refuses the spec.
    """

    key: str
    message: str
    hint: str | None = None
    severity: Severity = "error"


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

    def sort_key(self) -> tuple[str, int, int, str, str]:
        return (self.file or "", self.line or 0, self.column or 0, self.key or "", self.message)


class TutorrlError(Exception):
    """Base of every error that is the user's to fix. Exit code 2 by default."""

    exit_code = EXIT_INPUT

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


# -- the rest of the family, by where they arise ----------------------------
# Compiler


class KeysetImportError(RefusedError):
    """A release's key set could not be extracted (download, wheel or composition)."""


# Runtime


class PreflightRefused(RefusedError):
    """The checks before a run found problems; the message is their list, already rendered."""

    def render(self) -> str:
        return str(self)


class RecordError(BundleError):
    """A run.json that is not a run record; the message names the file and what is wrong."""


class RunNotFound(TutorrlError):
    """A run id or run folder that names no run."""


class NotVerified(RefusedError):
    """A command that would act on what a record says, given a record it cannot trust."""


class EvidenceFailed(TutorrlError):
    """A run's evidence failed: which records, or why none could be written."""

    def __init__(self, problems: list[str], *, stopped: bool):
        self.problems, self.stopped = problems, stopped
        self.exit_code = EXIT_EVIDENCE_STOPPED if stopped else EXIT_EVIDENCE_FAILED
        super().__init__("; ".join(problems))

    def render(self) -> str:
        return "\n".join(f"evidence: {p}" for p in self.problems)


# Evidence


class ChainError(BundleError):
    """The evidence directory cannot be appended to or read as a chain."""


class CheckpointError(TutorrlError):
    """A checkpoint folder that cannot be recorded as asked (missing, not verl's, outside the run's roots)."""


class MergerFailed(TutorrlError):
    """verl's model merger (`tutorrl model`) ran and failed: nothing was written. Exit 1."""

    exit_code = EXIT_FAILED


class AnchorError(TutorrlError):
    """An anchor that cannot be read."""


class SigningError(TutorrlError):
    """A signing key or trusted key that cannot be used."""


class EvidenceInputError(TutorrlError):
    """Arguments of `tutorrl evidence` that name nothing it can record or show."""


# Import


class CaptureError(RefusedError):
    """A script could not be captured (missing file, no confinement, no bash)."""
