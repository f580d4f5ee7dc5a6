"""Checkpoint publication evidence appended to a bundle (`bundles/<id>/evidence/`).

The face other packages import from (tutorrl/_face.py): each name loaded on first use, so
`import tutorrl.evidence` costs nothing on the compile path; the TYPE_CHECKING imports are for editors.
"""

from typing import TYPE_CHECKING

from tutorrl._face import attach

if TYPE_CHECKING:
    from tutorrl.evidence.anchor import parse_anchor
    from tutorrl.evidence.bundle import bundle_info, load_bundle
    from tutorrl.evidence.lineage import Before
    from tutorrl.evidence.manual import Anchored, Entry, KeyMade, add_checkpoint, anchor_chain, make_signing_key, records_of
    from tutorrl.evidence.merged import Merge, inspect_model, model_dir_problem, record_model, source_checkpoint
    from tutorrl.evidence.record import read_entry, read_records
    from tutorrl.evidence.runs import (
        choose_resume_point,
        evidence_head,
        evidence_length,
        output_dir_before_run,
        record_run_checkpoints,
        resumed_run,
    )
    from tutorrl.evidence.sign import ENV_KEY, configured_key_path, find_signer, load_trusted
    from tutorrl.evidence.text import recorded_line
    from tutorrl.evidence.verify import check_evidence, rehash_evidence

_EXPORTS = {
    "anchor": ("parse_anchor",),
    "bundle": ("bundle_info", "load_bundle"),
    "lineage": ("Before",),
    "manual": ("Anchored", "Entry", "KeyMade", "add_checkpoint", "anchor_chain", "make_signing_key", "records_of"),
    "merged": ("Merge", "inspect_model", "model_dir_problem", "record_model", "source_checkpoint"),
    "record": ("read_entry", "read_records"),
    "runs": ("choose_resume_point", "evidence_head", "evidence_length", "output_dir_before_run",
             "record_run_checkpoints", "resumed_run"),
    "sign": ("ENV_KEY", "configured_key_path", "find_signer", "load_trusted"),
    "text": ("recorded_line",),
    "verify": ("check_evidence", "rehash_evidence"),
}
__getattr__, __dir__ = attach(__name__, _EXPORTS)

__all__ = [
    "Anchored",
    "Before",
    "ENV_KEY",
    "Entry",
    "KeyMade",
    "Merge",
    "add_checkpoint",
    "anchor_chain",
    "bundle_info",
    "check_evidence",
    "choose_resume_point",
    "configured_key_path",
    "evidence_head",
    "evidence_length",
    "find_signer",
    "inspect_model",
    "load_bundle",
    "load_trusted",
    "make_signing_key",
    "model_dir_problem",
    "output_dir_before_run",
    "parse_anchor",
    "read_entry",
    "read_records",
    "record_model",
    "record_run_checkpoints",
    "recorded_line",
    "records_of",
    "rehash_evidence",
    "resumed_run",
    "source_checkpoint",
]
