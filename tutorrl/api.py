"""tutorrl from Python: compile, verify, diff and run bundles with typed values.

Each function is what a ``tutorrl`` command does, without the printing; the
command line calls these same functions (or the library functions they are
made of). Errors are the classes of :mod:`tutorrl.errors`, raised, never
printed: ``except tutorrl.errors.TutorrlError as e: print(e.render())``.

    import tutorrl

    compiled = tutorrl.compile("specs/tiny_cpu_grpo.toml")       # nothing written yet
    written = tutorrl.write(compiled, "bundles")                   # bundles/<id>/, atomically
    run = tutorrl.run(written.path, dry_run=True)                  # an embedded Ray head, the job, the record
    run.exit_code, run.state().status, run.logs()
    tutorrl.verify(written.path, rehash=True).ok

``run(..., jobs=...)`` replaces where the job goes (Ray's Jobs API by default,
:class:`tutorrl.runtime.options.Jobs`): the seam a test or a scheduler
integration plugs into, with verification, preflight, the run record, the
log and the evidence still tutorrl's own. See ``docs/api.md``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:
    from tutorrl.compiler.bundle import CompiledBundle
    from tutorrl.compiler.bundle import WriteResult
    from tutorrl.compiler.pipeline import CompiledPoint
    from tutorrl.compiler.pipeline import LoadedBundle
    from tutorrl.review import Diff
    from tutorrl.runtime import Stopped
    from tutorrl.runtime import Jobs, RunOptions
    from tutorrl.runtime import RunRecord

__all__ = ["Run", "Verification", "compile", "compile_family", "diff", "load", "run", "verify", "write"]


def compile(spec: str | os.PathLike[str] | bytes, *, name: str | None = None) -> CompiledBundle:  # noqa: A001
    """A spec (a path, or its TOML bytes) compiled to a bundle in memory; nothing is written.

    ``name`` labels error messages for bytes (default ``<spec>``); it is never hashed.
    Raises :class:`~tutorrl.errors.SpecError` with every problem found.
    """
    from tutorrl.compiler import compile_bytes, compile_spec

    if isinstance(spec, (bytes, bytearray, memoryview)):
        return compile_bytes(bytes(spec), name or "<spec>")
    return compile_spec(spec, display_name=name)


def compile_family(spec: str | os.PathLike[str], *, sets: list[str] | tuple[str, ...] = ()) -> list[CompiledPoint]:
    """A spec file with its bases (``extends``) and its ``[sweep]``: one compiled bundle per point.

    Each :class:`~tutorrl.compiler.pipeline.family.CompiledPoint` has ``bundle`` and
    ``point`` (None for a spec without a sweep). ``sets`` are ``--set``
    assignments (``"actor.lr=3e-6"``), typed as the setting says. Nothing is
    written: :func:`write` each ``bundle``. Raises :class:`~tutorrl.errors.SpecError`
    with every problem of every point, each named.
    """
    from tutorrl.compiler import compile_family as family

    return family(str(spec), sets=tuple(sets))


def write(compiled: CompiledBundle, out: str | os.PathLike[str] = "bundles", *,
          spec_dir: str | os.PathLike[str] | None = None) -> WriteResult:
    """Store a compiled bundle as ``<out>/<id>/`` (atomically; an identical one already there is kept).

    ``spec_dir``, the folder of the spec it was compiled from, lets the provenance of a
    bundle already there be replaced where its recorded sources, read there, no longer
    hold; without it a recorded provenance is kept (docs/sweeps.md)."""
    from tutorrl.compiler import write_bundle

    return write_bundle(compiled, os.fspath(out), spec_dir=None if spec_dir is None else os.fspath(spec_dir))


def load(bundle: str | os.PathLike[str], *, trust_digests: bool = False) -> LoadedBundle:
    """A bundle read and proven: every file matches its manifest and re-derives from its spec.toml.

    ``trust_digests`` accepts one this tutorrl cannot re-derive on its digests
    alone (its ``warnings`` say so). Raises :class:`~tutorrl.errors.BundleError`.
    """
    from tutorrl.compiler import verify_bundle

    return verify_bundle(os.fspath(bundle), trust_digests=trust_digests)


class Verification(msgspec.Struct, frozen=True, kw_only=True):
    """What ``tutorrl verify`` found."""

    ok: bool
    #: The bundle as given, and the folder it was read from.
    bundle: str
    path: str
    #: The bundle's content digest (its id is the first 16 hex digits).
    digest: str
    #: How many evidence records the bundle holds.
    records: int
    problems: list[str]
    #: What holds but proves less than it may seem to (unsigned records, untrusted keys).
    warnings: list[str]
    #: The bundle's own: accepted on its digests alone, not re-derived (``trust_digests``).
    bundle_warnings: list[str]
    #: One line per record linked to the record of the checkpoint its run resumed from.
    lineage: list[str]
    #: Links that could not be checked: the linked bundle is gone, or no record covered the
    #: checkpoint (problems too with ``require_lineage``).
    unlinked: list[str]
    #: With ``rehash``: recorded checkpoints that are no longer on disk (a note unless required).
    not_on_disk: list[str]


def verify(bundle: str | os.PathLike[str], *, rehash: bool = False, jobs: int | None = None,
           trust: list[str | os.PathLike[str]] | tuple[str | os.PathLike[str], ...] = (), anchors: list[str] | tuple[str, ...] = (),
           require_checkpoints: bool = False, trust_digests: bool = False,
           require_lineage: bool = False) -> Verification:
    """The bundle and its evidence chain checked; with ``rehash`` every recorded checkpoint still on disk re-hashed.

    ``trust`` lists public key files (each may hold several PEM keys): every
    record must then be signed by one of them. ``anchors`` are chain heads
    (``tutorrl evidence anchor`` files, or ``N:DIGEST``) nothing may have been
    removed since. A bundle that is not one raises :class:`~tutorrl.errors.BundleError`;
    evidence that fails is returned (``ok`` false), not raised.
    """
    from tutorrl.contract import EVIDENCE_DIR
    from tutorrl.evidence import parse_anchor
    from tutorrl.evidence import load_trusted
    from tutorrl.evidence import check_evidence

    trusted = load_trusted([str(p) for p in trust]) if trust else None
    parsed = [parse_anchor(a) for a in anchors]
    loaded = load(bundle, trust_digests=trust_digests)
    evidence = check_evidence(loaded.path, loaded.digest, trust=trusted, anchors=parsed, rehash=rehash)
    problems = list(evidence.problems)
    if require_lineage:
        problems += evidence.unlinked
    not_on_disk: list[str] = []
    if rehash:
        from tutorrl.evidence import rehash_evidence

        rehashed = rehash_evidence(loaded.path, jobs=jobs)
        problems += rehashed.mismatches
        not_on_disk = list(rehashed.not_on_disk)
        if require_checkpoints:
            problems += not_on_disk
    records = len(list((Path(loaded.path) / EVIDENCE_DIR).glob("[0-9]*.json")))
    return Verification(ok=not problems, bundle=str(bundle), path=str(loaded.path), digest=loaded.digest, records=records,
                        problems=problems, warnings=list(evidence.warnings), bundle_warnings=list(loaded.warnings),
                        lineage=list(evidence.lineage), unlinked=list(evidence.unlinked), not_on_disk=not_on_disk)


def diff(old: str | os.PathLike[str], new: str | os.PathLike[str], *, trust_digests: bool = False) -> Diff:
    """What changes between two bundles or specs, in spec settings (what ``tutorrl diff`` renders).

    ``trust_digests``: as for :func:`load`, for a bundle on either side."""
    from tutorrl.review import diff_sides
    from tutorrl.review import load_side

    return diff_sides(load_side(str(old), trust_digests=trust_digests),
                      load_side(str(new), trust_digests=trust_digests))


class Run:
    """A run of a bundle: its record under ``bundles/<id>/runs/<run-id>/``, and what can be asked of it.

    The record is the truth (shared with ``tutorrl status`` in any shell);
    each method reads it again, reconciled with Ray where the run is still open.
    """

    def __init__(self, path: Path, exit_code: int | None):
        self.path = path
        #: The run id, ``tutorrl-<bundle id>-<attempt>``.
        self.run_id = path.name
        #: What ``tutorrl run`` would exit with; None for a detached run (it is still going).
        self.exit_code = exit_code

    def __repr__(self) -> str:
        return f"Run({self.run_id!r}, exit_code={self.exit_code!r})"

    def state(self) -> RunRecord:
        """The run record, reconciled with Ray's view of the job (a record left open by a dead owner is closed)."""
        from tutorrl.runtime import reconcile

        return reconcile(self.path)

    def logs(self, *, last: int | None = None) -> str:
        """The job's log as written so far (``job.log``); ``last``: only its last that many bytes."""
        from tutorrl._read import open_regular
        from tutorrl.runtime import LOG_FILE

        try:
            with open_regular(self.path / LOG_FILE) as fh:
                if last is not None:
                    fh.seek(max(0, os.fstat(fh.fileno()).st_size - last))
                data: bytes = fh.read()
                return data.decode("utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self) -> Stopped:
        """Stop it (its job, then its embedded head), as ``tutorrl stop`` does."""
        from tutorrl.runtime import stop_run

        return stop_run(self.path)

    def evidence(self) -> list[Any]:
        """This run's evidence records (in-toto statements), oldest first."""
        from tutorrl.evidence import read_records

        bundle = self.path.parent.parent
        return [s for _, s in read_records(bundle) if s is not None and s.predicate.run.run_id == self.run_id]


def run(bundle: str | os.PathLike[str] | RunOptions, *, jobs: Jobs | None = None, progress: bool = False,
        **options: Any) -> Run:
    """Run a bundle as a Ray job, as ``tutorrl run`` does, and return its :class:`Run`.

    ``options`` are :class:`~tutorrl.runtime.options.RunOptions` fields
    (``address``, ``dry_run``, ``num_gpus``, ``detach``, ``upload``,
    ``trust_digests``, ``retries``, ``retry_backoff``), or pass a ``RunOptions`` as ``bundle``. Blocks until
    the job ends unless ``detach``. ``progress`` shows the status lines and the
    job's log on the terminal. Refused input raises; a job that fails returns
    a Run whose ``exit_code`` says so.
    """
    from tutorrl.runtime import RunOptions
    from tutorrl.runtime import Progress
    from tutorrl.runtime import RunSession, exit_code_of

    if isinstance(bundle, RunOptions):
        if options:
            raise TypeError("give the options in the RunOptions, or as keywords, not both")
        chosen = bundle
    else:
        chosen = RunOptions(bundle=str(bundle), **options)
    session = RunSession(chosen, Progress(quiet=not progress), jobs=jobs)
    session.echo = progress
    code = session.run()
    if session.run_dir is None:  # refused before a record was claimed: run() raised
        raise AssertionError("a run that returned has a record")
    return Run(session.run_dir, None if chosen.detach and code == 0 else exit_code_of(session, code))
