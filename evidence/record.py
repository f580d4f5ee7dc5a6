"""Turning one checkpoint directory (and optionally live engines) into a record.

The slow part -- hashing -- happens before the chain is touched, so concurrent
recorders only contend for the instant of publishing their record.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import msgspec

from tutorrl._read import ReadError, read_json
from tutorrl.errors import CheckpointError  # its home; importable from here too
from tutorrl.evidence.bundle import BundleInfo, load_bundle
from tutorrl.evidence.chain import ChainError, append, directory_problem, read_record, record_files
from tutorrl.evidence.checkpoints import find_step_dirs, inspect_step, read_tracker, step_of, tracker_checks
from tutorrl.evidence.paths import recorded_root, relative_to_bundle
from tutorrl.evidence.hashing import (
    Job, Progress, build_manifest, default_workers, hash_jobs, list_files, shown_name,
)
from tutorrl.evidence.schema import (
    BundleRef,
    ChainLink,
    Check,
    CheckpointInfo,
    Predicate,
    ResourceDescriptor,
    RunInfo,
    SafetensorsDigests,
    Source,
    Statement,
    TensorDigest,
    make_verdict,
)
from tutorrl.evidence.statement import RecordFormatError, canonical, decode_record, digest

from tutorrl.contract import EVIDENCE_DIR  # noqa: E402
# Tensors are hashed in jobs of at least this many bytes: small enough to spread
# one big export file over all cores, big enough to keep per-job cost negligible.
TENSOR_JOB_BYTES = 64 * 1024 * 1024
# A weight_map names every tensor once: a few MB for the largest models.
MAX_INDEX = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Inspection:
    info: CheckpointInfo
    checks: list[Check]
    subject: list[ResourceDescriptor]
    safetensors_files: list[Path]


def _safetensors_plan(step_dir: Path, files: list[tuple[str, Path, int]]):
    from tutorrl.evidence.safetensors import SafetensorsError, read_header

    headers, jobs, checks = {}, [], []
    errors = []
    for rel, path, _size in files:
        if not rel.endswith(".safetensors"):
            continue
        try:
            header = read_header(path)
        except (SafetensorsError, OSError) as exc:
            errors.append(str(exc))
            continue
        headers[rel] = (path, header)
        batch, batch_bytes = [], 0
        for t in sorted(header.tensors, key=lambda t: t.start):
            batch.append((f"t\0{rel}\0{t.name}", t.start, t.end))
            batch_bytes += t.nbytes
            if batch_bytes >= TENSOR_JOB_BYTES:
                jobs.append(Job(path, tuple(batch)))
                batch, batch_bytes = [], 0
        if batch:
            jobs.append(Job(path, tuple(batch)))
    if errors:
        checks.append(Check(id="export.safetensors", status="fail", detail="; ".join(errors)))
    elif headers:
        n = sum(len(h.tensors) for _, h in headers.values())
        checks.append(Check(id="export.safetensors", status="pass",
                            detail=f"{len(headers)} safetensors file(s), {n} tensors, headers consistent with sizes"))
    else:
        checks.append(Check(id="export.safetensors", status="skipped",
                            detail="no safetensors export (verl writes one only with 'hf_model' in checkpoint.save_contents)"))
    checks.extend(_index_checks(step_dir, files, headers))
    return headers, jobs, checks


def _index_checks(step_dir: Path, files, headers) -> list[Check]:
    checks = []
    for rel, path, _ in files:
        if not rel.endswith("model.safetensors.index.json"):
            continue
        base = rel.rsplit("/", 1)[0] + "/" if "/" in rel else ""
        try:
            doc = read_json(path, MAX_INDEX, name=rel)
        except (ReadError, FileNotFoundError) as exc:
            checks.append(Check(id=f"export.index:{rel}", status="fail", detail=f"unreadable: {exc}"))
            continue
        weight_map = doc.get("weight_map") if isinstance(doc, dict) else None
        if not isinstance(weight_map, dict):
            checks.append(Check(id=f"export.index:{rel}", status="fail", detail="no weight_map object"))
            continue
        problems = []
        for name, shard in sorted(weight_map.items()):
            entry = headers.get(base + str(shard))
            if entry is None:
                problems.append(f"{name} -> {shard} (no such readable shard)")
            elif name not in {t.name for t in entry[1].tensors}:
                problems.append(f"{name} not in {shard}")
        if problems:
            checks.append(Check(id=f"export.index:{rel}", status="fail",
                                detail=f"{len(problems)} entries broken, e.g. {problems[0]}"))
        else:
            checks.append(Check(id=f"export.index:{rel}", status="pass",
                                detail=f"all {len(weight_map)} indexed tensors are in their shards"))
    return checks


class Snapshot:
    """What a checkpoint is the moment it is reported saved: the fast half of an inspection.

    Listing, layout and tracker checks, safetensors headers and the index all
    take milliseconds; hashing takes seconds to minutes. The in-run recorder
    takes the snapshot inside verl's `on_save` and hashes it later, beside
    training. With `hold`, every file is opened now and hashed through that
    descriptor, so a checkpoint deleted meanwhile (verl's
    `max_actor_ckpt_to_keep`) is still hashed as it was saved; its disk space
    is freed when the snapshot is closed. `close()` must be called (or the
    snapshot used as a context manager).
    """

    def __init__(self, step_dir: Path, *, hold: bool = False):
        step = step_of(step_dir)
        if step is None or not step_dir.is_dir():
            raise CheckpointError(f"{step_dir}: not a verl global_step_N directory")
        shown = shown_name(step_dir)
        if shown != str(step_dir):
            # The record names the folder in JSON text, which holds only UTF-8.
            raise CheckpointError(f"{shown}: the checkpoint's path is not UTF-8 text; a record cannot name it "
                                  "(rename the folder)")
        self.step_dir, self.step, self.root = step_dir, step, step_dir.parent
        self.tracker = read_tracker(self.root)
        self.checks = tracker_checks(self.root, self.tracker, step)
        self.roles, layout_checks = inspect_step(step_dir)
        self.checks.extend(layout_checks)
        self.files, links = list_files(step_dir)
        if links:
            self.checks.append(Check(id="files.no_symlinks", status="fail",
                                     detail=f"symlinks and special files are not hashed and hide content: {', '.join(links[:5])}"))
        # rel -> (fd, stat at open): the bytes hashed are those of these inodes.
        self.held: dict[str, tuple[int, os.stat_result]] = {}
        self.unheld_reason: str | None = None
        if hold:
            self._hold()
        try:
            self.headers, tensor_jobs, st_checks = _safetensors_plan(step_dir, self.files)
        except BaseException:
            self.close()
            raise
        self.checks.extend(st_checks)
        fds = {path: self.held[rel][0] for rel, path, _ in self.files if rel in self.held}
        self.jobs = [Job(path, ((f"f\0{rel}", 0, size),), fds.get(path)) for rel, path, size in self.files]
        self.jobs += [Job(j.path, j.ranges, fds.get(j.path)) for j in tensor_jobs]

    def _hold(self) -> None:
        for rel, path, _size in self.files:
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            except FileNotFoundError:
                continue  # gone already: hashing by path names it
            except OSError as exc:  # EMFILE: too many files to hold; read them by path instead
                self.close()
                self.unheld_reason = f"files read by path, not held open ({exc.strerror})"
                return
            self.held[rel] = (fd, os.fstat(fd))

    @property
    def nbytes(self) -> int:
        return sum(j.nbytes for j in self.jobs)

    def close(self) -> None:
        held, self.held = self.held, {}
        for fd, _ in held.values():
            os.close(fd)

    def __enter__(self) -> "Snapshot":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _stability(self) -> Check:
        if not self.held:
            # An async save still writing (or a concurrent retention delete) shows up here.
            changed = [rel for rel, path, size in self.files if not path.exists() or path.stat().st_size != size]
            if changed:
                return Check(id="files.stable", status="fail", detail=f"changed while hashing: {', '.join(changed[:5])}")
            note = f" ({self.unheld_reason})" if self.unheld_reason else ""
            return Check(id="files.stable", status="pass", detail=f"{len(self.files)} files unchanged in size while hashed{note}")
        changed, moved = [], []
        for rel, path, size in self.files:
            if rel not in self.held:
                changed.append(rel)
                continue
            fd, before = self.held[rel]
            after = os.fstat(fd)
            if (after.st_size, after.st_mtime_ns) != (size, before.st_mtime_ns) or before.st_size != size:
                changed.append(rel)
            try:
                now = os.stat(path, follow_symlinks=False)
                if (now.st_dev, now.st_ino) != (before.st_dev, before.st_ino):
                    moved.append(rel)
            except FileNotFoundError:
                moved.append(rel)
        if changed:
            return Check(id="files.stable", status="fail",
                         detail=f"written to after the save was reported: {', '.join(changed[:5])}")
        detail = f"{len(self.files)} files hashed as saved (held open from the save on, unchanged in size and mtime)"
        if moved:
            detail += (f"; {len(moved)} since removed or replaced at their path (verl's checkpoint retention?), "
                       f"e.g. {moved[0]}")
        return Check(id="files.stable", status="pass", detail=detail)

    def hash(self, *, workers: int | None = None, progress: bool | None = None,
             background: bool = False) -> Inspection:
        """The slow half: hash every file and tensor, then judge stability and build the inspection
        (``background``: at the lowest CPU priority, beside training; see ``hash_jobs``)."""
        bar = Progress(self.nbytes, label=f"hashing {self.step_dir.name}", enabled=progress)
        try:
            digests = hash_jobs(self.jobs, workers=workers or default_workers(), progress=bar,
                                background=background)
        except OSError as exc:
            raise CheckpointError(f"{self.step_dir}: {exc}") from None
        finally:
            bar.close()
        checks = self.checks + [self._stability()]
        files = self.files
        manifest = build_manifest(files, {rel: digests[f"f\0{rel}"] for rel, _, _ in files})
        st_digests = []
        for rel, (_path, header) in sorted(self.headers.items()):
            tensors = [TensorDigest(name=t.name, dtype=t.dtype, shape=list(t.shape), sha256=digests[f"t\0{rel}\0{t.name}"])
                       for t in header.tensors]
            st_digests.append(SafetensorsDigests(
                file=rel, tensor_count=len(tensors), tensor_bytes=sum(t.nbytes for t in header.tensors),
                tensors_digest=digest(canonical(tensors)), tensors=tensors,
            ))
        info = CheckpointInfo(
            root=str(self.root), directory=self.step_dir.name, step=self.step, tracker=self.tracker, roles=self.roles,
            files=manifest, safetensors=st_digests,
        )
        subject = [ResourceDescriptor(name=f"{self.step_dir.name}/{r.name}", digest={"sha256": r.digest})
                   for r in manifest.resources]
        # The engine serves the actor; its export is what publication is compared with.
        headers = self.headers
        st_paths = ([p for rel, (p, _) in sorted(headers.items()) if rel.startswith("actor/")]
                    or [p for _, (p, _) in sorted(headers.items())])
        return Inspection(info, checks, subject, st_paths)


def inspect_checkpoint(step_dir: Path, *, workers: int | None = None, progress: bool | None = None) -> Inspection:
    """Check and hash one `global_step_N` directory."""
    with Snapshot(step_dir) as snap:
        return snap.hash(workers=workers, progress=progress)


def _publication(inspection: Inspection, engines: list[str], base_model: Path | None, skip_reason: str | None,
                 observed=None):
    if not engines and observed is None:
        return None, [Check(id="publication.engines_answered", status="skipped",
                            detail=skip_reason or "no rollout engine URL to ask (give --engine URL; engines stop with the run)")]
    import msgspec

    from tutorrl.evidence.sglang import judge, read_engine, safetensors_sglang_hashes

    from tutorrl.evidence.safetensors import SafetensorsError

    # Read inside the run right after the push (evidence/publication.py), or now.
    readings = observed.readings if observed is not None else [read_engine(url) for url in engines]
    try:
        ckpt = safetensors_sglang_hashes(inspection.safetensors_files) if inspection.safetensors_files else None
    except SafetensorsError as exc:  # it read fine a moment ago: changed under us
        raise CheckpointError(f"{exc} (changed while being recorded?)") from None
    base = None
    if base_model is not None:
        base_files = sorted(base_model.glob("*.safetensors")) if base_model.is_dir() else []
        if base_files:
            try:
                base = safetensors_sglang_hashes(base_files)
            except SafetensorsError as exc:  # the user's --base-model, not the checkpoint: theirs to fix
                raise CheckpointError(f"--base-model {base_model}: {exc}") from None
    pub, checks = judge(readings, ckpt, base)
    if observed is not None:
        pub, checks = msgspec.structs.replace(pub, in_run=observed.in_run), checks + observed.checks
    return pub, checks


def record_checkpoint(
    bundle: BundleInfo,
    run_id: str,
    step_dir: Path,
    *,
    source: Source,
    finished: bool | None,
    engines: list[str] | None = None,
    base_model: Path | None = None,
    workers: int | None = None,
    progress: bool | None = None,
    publication_skip_reason: str | None = None,
    observed=None,
    resumed=None,
) -> Path:
    """`observed`: a `publication.Observed` read inside the run (instead of asking `engines` now).
    `resumed`: (checkpoint root, step, bundles to look in) of the checkpoint this run resumed from:
    its lineage goes into this record (the run's first)."""
    from tutorrl.evidence.sign import find_signer

    # Before hashing: a key that is there but unusable fails in a moment, not after minutes.
    signer = find_signer()
    inspection = inspect_checkpoint(Path(os.path.abspath(step_dir)), workers=workers, progress=progress)
    lineage = None
    if resumed is not None:
        from tutorrl.evidence.lineage import link

        root, step, bundles = resumed
        prior = inspect_checkpoint(Path(os.path.abspath(root)) / f"global_step_{step}", workers=workers)
        lineage, check = link(Path(root), step, prior.info.files.root, bundles, own=bundle.path)
        inspection.checks.append(check)
    return append_record(bundle, run_id, inspection, source=source, finished=finished, engines=engines,
                         base_model=base_model, publication_skip_reason=publication_skip_reason, observed=observed,
                         signer=signer, lineage=lineage)


_FIND = object()


def append_record(
    bundle: BundleInfo,
    run_id: str,
    inspection: Inspection,
    *,
    source: Source,
    finished: bool | None,
    engines: list[str] | None = None,
    base_model: Path | None = None,
    publication_skip_reason: str | None = None,
    observed=None,
    signer=_FIND,
    lineage=None,
) -> Path:
    """Judge publication (read inside the run: `observed`; else asked of `engines` now, if any),
    then sign (the configured key unless `signer` is given) and publish the record; returns its path."""
    from tutorrl import __version__
    from tutorrl.evidence.sign import find_signer

    if signer is _FIND:
        signer = find_signer()
    publication, pub_checks = _publication(inspection, list(engines or []), base_model, publication_skip_reason, observed)
    verdict = make_verdict(inspection.checks + pub_checks)
    run = RunInfo(run_id=run_id, source=source, finished=finished, tutorrl_version=__version__,
                  recorded_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))

    # Named from the bundle's folder, not this machine's root: a bundle moved with its
    # checkpoints (another folder, a bucket, another machine) still finds them.
    info = msgspec.structs.replace(inspection.info, root=relative_to_bundle(inspection.info.root, bundle.path))

    def build(link: ChainLink) -> Statement:
        return Statement(subject=inspection.subject, predicate=Predicate(
            chain=link, bundle=BundleRef(digest=bundle.digest, verl=bundle.verl), run=run,
            checkpoint=info, publication=publication, verdict=verdict, lineage=lineage,
        ))

    # 0600 from creation (evidence/chain.py): the run owner's alone, as the seed writes its evidence.
    return append(bundle.path / EVIDENCE_DIR, build, signers=[signer] if signer else [])


def read_records(bundle_path: Path) -> list[tuple[Path, Statement | None]]:
    problem = directory_problem(Path(bundle_path) / EVIDENCE_DIR)
    if problem:
        raise ChainError(problem)
    return [read_entry(path) for _seq, path in sorted(record_files(Path(bundle_path) / EVIDENCE_DIR).items())]


def read_entry(path: Path) -> tuple[Path, Statement | None]:
    """One record of the chain, as :func:`read_records` gives it (None: malformed; `verify` says why)."""
    try:
        return path, decode_record(read_record(path)).statement
    except (OSError, ReadError, RecordFormatError):
        return path, None


def _after(path: Path, since: int | None) -> bool:
    return since is None or (path.stem.isdigit() and int(path.stem) > since)


def _recorded(chain: list[tuple[Path, Statement | None]], bundle_path: Path,
              since: int | None = None) -> set[tuple[str, int]]:
    # A model record (evidence/merged.py) names a merged folder, not a checkpoint of the run's.
    return {(os.path.realpath(recorded_root(s.predicate.checkpoint.root, bundle_path)), s.predicate.checkpoint.step)
            for path, s in chain if s and s.predicate.model is None and _after(path, since)}


def resolve_output_dir(bundle: BundleInfo, cwd: Path | None, roots: dict[str, str] | None = None) -> Path | None:
    """The checkpoint folder the run wrote to: a root in it ("$CKPT_ROOT/x") takes
    the value the run passed, else the spec's default, as launch.sh computed it."""
    if not bundle.output_dir:
        return None
    from tutorrl.compiler.pipeline import expand

    expanded = expand(bundle.output_dir, {**bundle.root_defaults, **(roots or {})})
    if expanded is None:
        return None
    out = Path(expanded)
    return out if out.is_absolute() else (cwd or Path.cwd()) / out


def record_run_checkpoints(bundle_path: Path | BundleInfo, run_id: str, finished: bool, cwd: Path | None = None,
                           roots: dict[str, str] | None = None, prior_steps=(), resumed_step: int | None = None,
                           bundles=(), chain: list[tuple[Path, Statement | None]] | None = None,
                           since: int | None = None) -> list[Path]:
    """Record every checkpoint under the bundle's output dir not yet recorded.

    Called by the runtime after every run, finished or not; `cwd` is where the
    run started (relative `trainer.output_dir` is relative to it), `roots` the
    root values the run passed to the job. `prior_steps` were there before the
    run started (an earlier run's, of this bundle or another: not claimed);
    `resumed_step` is the one it resumed from, whose record is looked for in
    `bundles` (and this bundle) for the lineage of the run's first record.
    `since`: a retried run's later attempt, whose chain held records up to this
    sequence number when it started: those are an earlier attempt's, so a step
    folder they cover that this attempt wrote again is recorded again, and the
    attempt's own first record carries the lineage.

    The runtime hands over what it holds: ``bundle_path`` as the ``BundleInfo`` of
    the bundle it verified (else the folder, verified here) and ``chain``, the
    bundle's records as it read them (else read here, once).
    """
    bundle = bundle_path if isinstance(bundle_path, BundleInfo) else load_bundle(Path(bundle_path))
    root = resolve_output_dir(bundle, Path(cwd) if cwd is not None else None, roots)
    if root is None:
        return []
    root = Path(os.path.abspath(root))
    if chain is None:
        chain = read_records(bundle.path)
    done = _recorded(chain, bundle.path, since)
    prior = set(prior_steps)
    runs_records = any(s is not None and s.predicate.run.run_id == run_id
                       for path, s in chain if _after(path, since))
    written = []
    for sd in find_step_dirs(root):
        if (os.path.realpath(root), sd.step) in done or sd.step in prior:
            continue
        resumed = None
        if resumed_step is not None and not written and not runs_records:
            resumed = (root, resumed_step, [bundle.path, *bundles])
        written.append(record_checkpoint(bundle, run_id, sd.path, source="post-run-scan", finished=finished,
                                         resumed=resumed, publication_skip_reason=_no_server(bundle)))
    return written


def _no_server(bundle: BundleInfo) -> str | None:
    if bundle.rollout_engine == "hf":
        return ("the hf rollout generates with the actor's own module inside the training worker: no engine "
                "serves a copy of the weights, so nothing is published to check")
    return None


def output_dir_before_run(bundle_path: Path | BundleInfo, cwd: Path | None, roots: dict[str, str] | None = None):
    """What the run will find in its output folder (evidence/lineage.py's `Before`); ``bundle_path``
    may be the ``BundleInfo`` of a bundle the caller verified."""
    from tutorrl.evidence.lineage import before_run

    bundle = bundle_path if isinstance(bundle_path, BundleInfo) else load_bundle(Path(bundle_path))
    root = resolve_output_dir(bundle, Path(cwd) if cwd is not None else None, roots)
    return before_run(Path(os.path.abspath(root)) if root is not None else None,
                      bundle.resume_mode or None, bundle.resume_from or None)
