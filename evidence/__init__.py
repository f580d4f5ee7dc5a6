"""Checkpoint publication evidence appended to a bundle (`bundles/<id>/evidence/`).

Entry points for other modules; imported lazily so `import tutorrl.evidence`
costs nothing on the compile path.
"""

from __future__ import annotations

from pathlib import Path


def record_run_checkpoints(bundle_path: Path, run_id: str, finished: bool, cwd: Path | None = None,
                           roots: dict[str, str] | None = None) -> list[Path]:
    from tutorrl.evidence.record import record_run_checkpoints as impl

    return impl(bundle_path, run_id, finished, cwd=cwd, roots=roots)


def verify_evidence(bundle_path: Path, bundle_digest: str | None = None) -> list[str]:
    from tutorrl.evidence.verify import verify_evidence as impl

    return impl(bundle_path, bundle_digest)


__all__ = ["record_run_checkpoints", "verify_evidence"]
