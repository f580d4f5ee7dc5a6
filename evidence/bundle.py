"""What evidence needs from a bundle: its digest, verl release and output dir.

Always read through `tutorrl.compiler.verify_bundle`: a bundle whose files do
not match its manifest is refused (`BundleError`) before anything is recorded
against it.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from tutorrl.compiler import verify_bundle


class BundleInfo(msgspec.Struct, frozen=True):
    path: Path
    digest: str
    verl: str
    output_dir: str  # as written in the spec: may be relative to the run's cwd
    model_path: str


def load_bundle(path: Path) -> BundleInfo:
    loaded = verify_bundle(path)
    return BundleInfo(
        path=Path(loaded.path), digest=loaded.manifest.digest, verl=loaded.manifest.verl,
        output_dir=loaded.spec.trainer.output_dir, model_path=loaded.spec.model.path,
    )
