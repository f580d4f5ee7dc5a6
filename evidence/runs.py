"""What a run asks of its bundle's evidence: its checkpoints recorded, where a retry resumes, which run a
resumed one continues, the chain's head and length, the output folder before the run."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tutorrl.evidence.bundle import BundleInfo


def record_run_checkpoints(bundle_path: Path | BundleInfo, run_id: str, finished: bool, cwd: Path | None = None,
                           roots: dict[str, str] | None = None, prior_steps=(), resumed_step: int | None = None,
                           bundles=(), chain=None, since: int | None = None) -> list[Path]:
    from tutorrl.evidence.record import record_run_checkpoints as impl

    return impl(bundle_path, run_id, finished, cwd=cwd, roots=roots, prior_steps=prior_steps,
                resumed_step=resumed_step, bundles=bundles, chain=chain, since=since)


def choose_resume_point(bundle_path: Path, cwd: Path | None, roots: dict[str, str] | None = None,
                        bundle_digest: str | None = None):
    """Where a retry resumes (evidence/resume_point.py's `Choice`), in the bundle's output folder."""
    import os

    from tutorrl.evidence.record import load_bundle, resolve_output_dir
    from tutorrl.evidence.resume_point import choose

    root = resolve_output_dir(load_bundle(Path(bundle_path)), Path(cwd) if cwd is not None else None, roots)
    return choose(Path(bundle_path), Path(os.path.abspath(root)) if root is not None else None, bundle_digest)


def resumed_run(bundle_path: Path, cwd: Path | None, roots: dict[str, str] | None, step: int, bundles=()):
    """(bundle folder, run id) of the run whose record covers the checkpoint of ``step`` this bundle's run
    resumes from, among this bundle and ``bundles``; None when no record covers it."""
    import os

    from tutorrl.evidence.lineage import find_record
    from tutorrl.evidence.record import load_bundle, resolve_output_dir

    root = resolve_output_dir(load_bundle(Path(bundle_path)), Path(cwd) if cwd is not None else None, roots)
    if root is None:
        return None
    hit = find_record(Path(os.path.abspath(root)), step, [Path(bundle_path), *bundles])
    return None if hit is None else (Path(hit[0]), hit[2].predicate.run.run_id)


def evidence_length(bundle_path: Path) -> int:
    """The sequence number of the bundle's newest record (0: none)."""
    from tutorrl.contract import EVIDENCE_DIR
    from tutorrl.evidence.chain import record_files

    return max(record_files(Path(bundle_path) / EVIDENCE_DIR), default=0)


def evidence_head(bundle_path: Path) -> str | None:
    """The bundle's newest record as ``NNNNNN.json@sha256:<hex>`` (what a tracker run is told); None: none yet."""
    import hashlib

    from tutorrl.contract import EVIDENCE_DIR
    from tutorrl.evidence.chain import read_record, record_files

    files = record_files(Path(bundle_path) / EVIDENCE_DIR)
    if not files:
        return None
    newest = files[max(files)]
    try:
        return f"{newest.name}@sha256:{hashlib.sha256(read_record(newest)).hexdigest()}"
    except (OSError, ValueError):
        return None


def output_dir_before_run(bundle_path: Path | BundleInfo, cwd: Path | None, roots: dict[str, str] | None = None):
    from tutorrl.evidence.record import output_dir_before_run as impl

    return impl(bundle_path, cwd, roots)
