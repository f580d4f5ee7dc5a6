"""Checkpoint publication evidence appended to a bundle (`bundles/<id>/evidence/`).

Entry points for other modules; imported lazily so `import tutorrl.evidence`
costs nothing on the compile path.
"""

from __future__ import annotations

from pathlib import Path


def record_run_checkpoints(bundle_path: Path | BundleInfo, run_id: str, finished: bool, cwd: Path | None = None,
                           roots: dict[str, str] | None = None, prior_steps=(), resumed_step: int | None = None,
                           bundles=(), chain=None) -> list[Path]:
    from tutorrl.evidence.record import record_run_checkpoints as impl

    return impl(bundle_path, run_id, finished, cwd=cwd, roots=roots, prior_steps=prior_steps,
                resumed_step=resumed_step, bundles=bundles, chain=chain)


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
    "model_dir_problem",
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
