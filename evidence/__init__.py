"""Checkpoint publication evidence appended to a bundle (`bundles/<id>/evidence/`).

Entry points for other modules; imported lazily so `import tutorrl.evidence`
costs nothing on the compile path.
"""

from __future__ import annotations

from pathlib import Path


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


def verify_evidence(bundle_path: Path, bundle_digest: str | None = None) -> list[str]:
    from tutorrl.evidence.verify import verify_evidence as impl

    return impl(bundle_path, bundle_digest)


# The package's face (tutorrl/_face.py): the names other packages may import,
# each loaded on first use; the TYPE_CHECKING imports are for editors.
from typing import TYPE_CHECKING  # noqa: E402 - the face follows the wrappers above

from tutorrl._face import attach  # noqa: E402

if TYPE_CHECKING:
    from tutorrl.evidence.anchor import parse_anchor
    from tutorrl.evidence.bundle import BundleInfo, bundle_info, load_bundle
    from tutorrl.evidence.cli_impl import recorded_line
    from tutorrl.evidence.lineage import Before
    from tutorrl.evidence.merged import Merge, inspect_model, model_dir_problem, record_model, source_checkpoint
    from tutorrl.evidence.record import read_entry, read_records
    from tutorrl.evidence.sign import ENV_KEY, configured_key_path, find_signer, load_trusted
    from tutorrl.evidence.verify import check_evidence, rehash_evidence

_EXPORTS = {
    "anchor": ("parse_anchor",),
    "bundle": ("BundleInfo", "bundle_info", "load_bundle"),
    "cli_impl": ("recorded_line",),
    "lineage": ("Before",),
    "merged": ("Merge", "inspect_model", "model_dir_problem", "record_model", "source_checkpoint"),
    "record": ("read_entry", "read_records"),
    "sign": ("ENV_KEY", "configured_key_path", "find_signer", "load_trusted"),
    "verify": ("check_evidence", "rehash_evidence"),
}
__getattr__, __dir__ = attach(__name__, _EXPORTS)

__all__ = [
    "Before",
    "BundleInfo",
    "ENV_KEY",
    "Merge",
    "bundle_info",
    "check_evidence",
    "configured_key_path",
    "find_signer",
    "inspect_model",
    "load_bundle",
    "load_trusted",
    "choose_resume_point",
    "evidence_head",
    "evidence_length",
    "model_dir_problem",
    "resumed_run",
    "output_dir_before_run",
    "parse_anchor",
    "read_entry",
    "read_records",
    "record_model",
    "record_run_checkpoints",
    "recorded_line",
    "rehash_evidence",
    "source_checkpoint",
    "verify_evidence",
]
