"""What evidence needs from a bundle: its digest, verl release and output dir.

Always read through `tutorrl.compiler.verify_bundle`: a bundle whose files do
not match its manifest is refused (`BundleError`) before anything is recorded
against it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from tutorrl.compiler import verify_bundle

if TYPE_CHECKING:
    from tutorrl.compiler import LoadedBundle


class BundleInfo(msgspec.Struct, frozen=True):
    path: Path
    digest: str
    verl: str
    # As written in the spec, or verl's default resolved against it: may be
    # relative to the run's cwd.
    output_dir: str
    model_path: str
    # [evidence] publication_control: run the perturbing sensitivity control.
    publication_control: bool = False
    # The spec's evidence.on_failure: "record" (also when unset) or "stop".
    on_failure: str = "record"
    # Each [roots] entry's default, for an output_dir written "$ROOT/...".
    root_defaults: dict[str, str] = {}
    # rollout.engine as verl sees it ("hf": generation inside the training worker, no server).
    rollout_engine: str = ""
    # trainer.resume_mode / resume_from as verl sees them: which checkpoint a run resumes from.
    resume_mode: str = ""
    resume_from: str = ""


def load_bundle(path: Path) -> BundleInfo:
    # Recording evidence (in the trainer, after a run, by hand) is not the gate
    # a launch passes: `run` and `verify` refuse a bundle they cannot re-derive
    # unless the user accepted it, and the records name the digest either way.
    return bundle_info(verify_bundle(path, trust_digests=True))


def bundle_info(loaded: LoadedBundle, path: Path | None = None) -> BundleInfo:
    """What evidence needs of a bundle already verified (the runtime holds one for its run):
    nothing is read or re-derived again. ``path``: the bundle's folder as the caller names
    it (default: as it was verified)."""
    from tutorrl.compiler.pipeline import effective

    value = effective(loaded.spec)
    return BundleInfo(
        path=Path(loaded.path if path is None else path), digest=loaded.manifest.digest, verl=loaded.manifest.verl,
        output_dir=str(value("trainer.output_dir") or ""), model_path=str(value("model.path") or ""),
        publication_control=bool(loaded.spec.evidence.publication_control),
        on_failure=loaded.spec.evidence.on_failure or "record",
        root_defaults={name: root.default for name, root in sorted(loaded.spec.roots.items()) if root.default},
        rollout_engine=str(value("rollout.engine") or ""),
        resume_mode=str(value("trainer.resume_mode") or ""), resume_from=str(value("trainer.resume_from") or ""),
    )
