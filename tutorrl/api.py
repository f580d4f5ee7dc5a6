"""tutorrl from Python: every ``tutorrl`` command, with typed options and typed results.

Each function is what a ``tutorrl`` command does, without the printing: each
command's handler (``<package>/commands.py``) parses its arguments, makes one
call here and prints what it returns (tests/cli/test_handlers.py holds that).
Only a run's progress (``run(progress=True)``, and a set's lines in
:func:`run_set`) is written as it goes, as a terminal shows it; ``logs`` is
an iterator of the log's pieces. Errors are the classes of
:mod:`tutorrl.errors`, raised, never printed:
``except tutorrl.errors.TutorrlError as e: print(e.render())``.

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
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:
    from tutorrl.compiler import CompiledBundle, CompiledFiles, WriteResult
    from tutorrl.compiler.pipeline import CompiledPoint
    from tutorrl.compiler.pipeline import LoadedBundle
    from tutorrl.review import Diff
    from tutorrl.runtime import Stopped
    from tutorrl.runtime import Jobs, RunOptions
    from tutorrl.export import ExportOptions
    from tutorrl.importer import ImportOptions
    from pathlib import Path

    from tutorrl import release_add
    from tutorrl.compiler.pipeline import Migrated
    from tutorrl.compiler.release import KeySets, LockResult
    from tutorrl.compiler.release import ImportedKeySet
    from tutorrl.evidence import Anchored, Entry, KeyMade
    from tutorrl.export import Exported
    from tutorrl.importer import Imported
    from tutorrl.review import CheckReport, Compared
    from tutorrl.runtime import ModelMade, RunRecord, RunRow, SetRun, StatusReport

__all__ = ["ExportOptions", "ImportOptions", "Run", "RunOptions", "Verification", "add_checkpoint", "anchor", "check", "compare", "compile", "compile_family", "compile_files", "diff",
           "evidence_records", "export_bundle", "import_script", "keygen", "keys_add", "keys_import", "keys_list", "keys_lock",
           "keys_remove", "load", "logs", "migrate", "model", "run", "run_set", "runs", "schema", "status", "stop",
           "verify", "write"]


# The option types the functions take, loaded on first use (PEP 562) so that ``tutorrl compile``, which
# imports this module, does not load the runtime, the importer or the exporters.
_OPTIONS = {"ExportOptions": "tutorrl.export", "ImportOptions": "tutorrl.importer", "RunOptions": "tutorrl.runtime"}


def __getattr__(name: str) -> Any:
    if name not in _OPTIONS:
        raise AttributeError(f"module 'tutorrl.api' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_OPTIONS[name]), name)
    globals()[name] = value
    return value


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


def compile_files(specs: list[str] | tuple[str, ...], out: str | os.PathLike[str] = "bundles", *,
                  sets: list[str] | tuple[str, ...] = (), rerecord: bool = False) -> CompiledFiles:
    """``tutorrl compile``: spec files (or quoted globs) compiled and written under ``out``, all or nothing.

    Every spec is compiled first; with several (or a pattern, or a sweep) nothing is written unless all
    compile (:class:`~tutorrl.errors.SpecError` names every problem of every spec). ``rerecord``: record
    this spec's sources in a bundle already there even where its record cannot be proved false."""
    from tutorrl.compiler import compile_files as impl

    return impl([os.fspath(s) for s in specs], os.fspath(out), sets=sets, rerecord=rerecord)


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
    from pathlib import Path

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


def compare(old: str, new: list[str] | tuple[str, ...] = (), *, against: str | None = None,
            trust_digests: bool = False) -> Compared:
    """What ``tutorrl diff`` compares: two bundles or specs, a set of them (several, a folder of bundles, a
    sweep: a matrix), a spec ``against`` its committed self at a git ref, or a partial base under a spec
    that extends it (the settings that spec writes over it). ``same`` says whether nothing changes."""
    from tutorrl.review import compare as impl

    return impl(str(old), [str(n) for n in new], against=against, trust_digests=trust_digests)


def check(specs: str | os.PathLike[str] = "specs", bundles: str | os.PathLike[str] = "bundles", *,
          staged: bool = False) -> CheckReport:
    """Every spec under ``specs`` recompiled in memory and compared with the bundles under ``bundles`` (as
    ``tutorrl check``; ``staged``: as staged in the git index). ``exit_code`` is the command's."""
    from tutorrl.review import run_check

    return run_check(os.fspath(specs), os.fspath(bundles), staged=staged)


def schema() -> str:
    """The JSON Schema (draft 2020-12) of spec files, as JSON text."""
    from tutorrl.review import schema_json

    return schema_json()


def export_bundle(bundle: str | os.PathLike[str], options: ExportOptions, *, output: str | os.PathLike[str] | None = None) -> Exported:
    """The bundle verified, then written as another launcher's job (``options.to``: kuberay, skypilot, slurm).

    ``output``: the file to write it to, whole or not at all (None: nothing is written; ``text`` holds it)."""
    from tutorrl.export import export as impl

    return impl(os.fspath(bundle), options, None if output is None else os.fspath(output))


def import_script(options: ImportOptions) -> list[Imported]:
    """A launch script (run under real bash in a jail) or an override list, as specs: one per verl launch.

    Each :class:`~tutorrl.importer.launch.Imported` holds the spec's text and its report (the release
    chosen, where each override went, the round trip's verdict); written where ``options.output`` says."""
    from tutorrl.importer import import_script as impl

    return impl(options)


def keys_import(releases: list[str] | tuple[str, ...], *, dest: str | None = None,
                wheel_cache: str | None = None) -> list[ImportedKeySet]:
    """``tutorrl keys import``: each release's key sets extracted from its wheel and written."""
    from tutorrl.compiler.release import import_keysets

    return import_keysets(list(releases), dest, wheel_cache)


def keys_list() -> KeySets:
    """``tutorrl keys list``: every key set, packaged and added."""
    from tutorrl.compiler.release import list_keysets

    return list_keysets()


def keys_lock(*, check: bool = False) -> LockResult:
    """``tutorrl keys lock``: the locks regenerated from the key map; written unless ``check``."""
    from tutorrl.compiler.release import lock_keys

    return lock_keys(check)


def keys_add(release: str, *, wheel: str | None = None, moves: list[str] | tuple[str, ...] = (),
             wheel_cache: str | None = None) -> release_add.AddedRelease:
    """``tutorrl keys add``: a verl release added to the user's data folder (``moves``: ``SETTING=KEY``)."""
    from tutorrl.release_add import add_keys

    return add_keys(release, wheel=wheel, moves=moves, wheel_cache=wheel_cache)


def keys_remove(release: str) -> str:
    """``tutorrl keys remove``: the folder of a release ``keys add`` added, removed; returns that folder."""
    from tutorrl.release_add import remove_release

    return str(remove_release(release))


def migrate(spec: str | os.PathLike[str], to: str, *, source: str | None = None) -> Migrated:
    """``tutorrl migrate``: what moves for a spec from its release (or ``source``) to release ``to``."""
    from tutorrl.compiler.pipeline import migrate_file

    return migrate_file(os.fspath(spec), to, source)


def evidence_records(bundle: str | os.PathLike[str]) -> tuple[str, list[Entry]]:
    """``tutorrl evidence BUNDLE``: the bundle's folder and its evidence records, oldest first."""
    from tutorrl.evidence import records_of

    return records_of(os.fspath(bundle))


def add_checkpoint(bundle: str | os.PathLike[str], checkpoint: str | os.PathLike[str], *, run_id: str = "manual",
                   engines: list[str] | tuple[str, ...] = (), base_model: str | None = None,
                   workers: int | None = None) -> Entry:
    """``tutorrl evidence BUNDLE --add CKPT``: a checkpoint hashed and recorded; the new record returned."""
    from tutorrl.evidence import add_checkpoint as impl

    return impl(os.fspath(bundle), os.fspath(checkpoint), run_id=run_id, engines=engines, base_model=base_model,
                workers=workers)


def keygen(key: str | None = None) -> KeyMade:
    """``tutorrl evidence keygen``: a signing key written (default: the user's default key)."""
    from tutorrl.evidence import make_signing_key

    return make_signing_key(key)


def anchor(bundle: str | os.PathLike[str], *, out: str | None = None) -> Anchored:
    """``tutorrl evidence anchor``: the head of the bundle's verified evidence chain (written to ``out``)."""
    from tutorrl.evidence import anchor_chain

    return anchor_chain(os.fspath(bundle), out)


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
        echo: bool | None = None, **options: Any) -> Run:
    """Run a bundle as a Ray job, as ``tutorrl run`` does, and return its :class:`Run`.

    ``options`` are :class:`~tutorrl.runtime.options.RunOptions` fields
    (``address``, ``dry_run``, ``num_gpus``, ``detach``, ``upload``,
    ``trust_digests``, ``retries``, ``retry_backoff``), or pass a ``RunOptions`` as ``bundle``. Blocks until
    the job ends unless ``detach``. ``progress`` shows the status lines and the
    job's log on the terminal (``echo=False``: the status lines only, as
    ``tutorrl run --quiet``). Refused input raises; a job that fails returns
    a Run whose ``exit_code`` says so.
    """
    from tutorrl.compiler.pipeline import require_bundle_folder
    from tutorrl.runtime import RunOptions
    from tutorrl.runtime import Progress
    from tutorrl.runtime import RunSession, exit_code_of

    if isinstance(bundle, RunOptions):
        if options:
            raise TypeError("give the options in the RunOptions, or as keywords, not both")
        chosen = bundle
    else:
        chosen = RunOptions(bundle=str(bundle), **options)
    require_bundle_folder(chosen.bundle)  # a spec given by mistake is named as one, before Ray loads
    session = RunSession(chosen, Progress(quiet=not progress), jobs=jobs)
    session.echo = progress if echo is None else echo
    code = session.run()
    if session.run_dir is None:  # refused before a record was claimed: run() raised
        raise AssertionError("a run that returned has a record")
    return Run(session.run_dir, None if chosen.detach and code == 0 else exit_code_of(session, code))


def run_set(bundles: list[str] | tuple[str, ...], *, max_parallel: int | None = None, address: str | None = None,
            upload: bool | None = None, dry_run: bool = False, num_gpus: int | None = None, quiet: bool = False,
            no_progress: bool = False, trust_digests: bool = False, detach: bool = False) -> SetRun:
    """``tutorrl run`` of several bundles (or a folder of bundles) as a set, at most ``max_parallel`` at once.

    Writes the set's progress lines to the terminal as it goes (``no_progress``: none; ``quiet``: each run's
    own lines too, as ``[k/N] ...``). Returns what the set came to: its ``set_id``, ``status`` (``running``
    where ``detach`` handed it to a supervisor), a row per bundle (``state.rows``: run id, state, exit code)
    and the command's ``exit_code``."""
    from tutorrl.runtime import run_bundles

    return run_bundles(list(bundles), max_parallel=max_parallel, address=address, upload=upload, dry_run=dry_run,
                       num_gpus=num_gpus, quiet=quiet, no_progress=no_progress, trust_digests=trust_digests,
                       detach=detach)


def runs(bundle: str | os.PathLike[str]) -> list[RunRow]:
    """``tutorrl runs``: the bundle's runs, oldest first, each open one reconciled with Ray (a ``RunRow``: the
    run id, its record -- None where it cannot be read -- and whether this user's tutorrl wrote it)."""
    from tutorrl.runtime import list_runs

    return list_runs(os.fspath(bundle))


def status(run: str | None = None, *, show_all: bool = False) -> StatusReport:
    """``tutorrl status``: a run's state (``run_state``), a set's (a set id: ``set_state``), or, with no run,
    every open set and run and the last that ended (``show_all``: every one), each reconciled with Ray."""
    from tutorrl.runtime import run_status

    return run_status(run, show_all)


def logs(run: str, *, follow: bool = False) -> Iterator[bytes]:
    """``tutorrl logs``: a run's job log, in pieces, as its bytes (from Ray's Jobs API where no tutorrl follows a
    job that still runs); ``follow``: until the run ends. A run that cannot be found raises here, at the call."""
    from tutorrl.runtime import run_log

    return run_log(run, follow)


def stop(run: str) -> Stopped | int:
    """``tutorrl stop``: a run (its job, then its embedded head) stopped, and what that found; for a set id
    the set is stopped (its lines written as it goes) and the exit code returned."""
    from tutorrl.runtime import stop_ref

    return stop_ref(run)


def model(bundle: str | os.PathLike[str], out: str | os.PathLike[str], *, step: int | None = None,
          merge_lora: bool = False, python: str | None = None, workers: int | None = None) -> ModelMade:
    """``tutorrl model``: a loadable Hugging Face folder made from a recorded checkpoint (verl's merger), its
    files recorded in the bundle's evidence."""
    from tutorrl.runtime import make_model_folder

    return make_model_folder(os.fspath(bundle), os.fspath(out), step=step, merge_lora=merge_lora, python=python,
                             workers=workers)
