"""Checkpoint publication evidence appended to a bundle (`bundles/<id>/evidence/`).

Entry points for other modules; imported lazily so `import tutorrl.evidence`
costs nothing on the compile path.
"""

from __future__ import annotations

from pathlib import Path


def record_run_checkpoints(bundle_path: Path, run_id: str, finished: bool, cwd: Path | None = None,
                           roots: dict[str, str] | None = None, prior_steps=(), resumed_step: int | None = None,
                           bundles=()) -> list[Path]:
    from tutorrl.evidence.record import record_run_checkpoints as impl

    return impl(bundle_path, run_id, finished, cwd=cwd, roots=roots, prior_steps=prior_steps,
                resumed_step=resumed_step, bundles=bundles)


def output_dir_before_run(bundle_path: Path, cwd: Path | None, roots: dict[str, str] | None = None):
    from tutorrl.evidence.record import output_dir_before_run as impl

    return impl(bundle_path, cwd, roots)


def verify_evidence(bundle_path: Path, bundle_digest: str | None = None) -> list[str]:
    from tutorrl.evidence.verify import verify_evidence as impl

    return impl(bundle_path, bundle_digest)


__all__ = ["output_dir_before_run", "record_run_checkpoints", "verify_evidence"]
