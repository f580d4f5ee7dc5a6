"""One side of a comparison: a bundle on disk, or a spec compiled in memory.

Both kinds end up as the same :class:`Side`, so the diff never needs to know
where its inputs came from. A bundle is read only through ``verify_bundle``:
a diff that trusted a tampered bundle would review something that will not run.
A spec is compiled with ``compile_bytes`` and never written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tutorrl.compiler import compile_bytes, verify_bundle
from tutorrl.compiler.bundle import CompiledBundle, Manifest
from tutorrl.compiler.spec import Spec, parse_spec
from tutorrl.contract import CONTENT_FILES, MANIFEST
from tutorrl.errors import BundleError, Problem, SpecError


@dataclass(frozen=True)
class Side:
    label: str
    kind: str  # "bundle" | "spec"
    manifest: Manifest
    spec: Spec  # normalised: what spec.toml in the bundle says
    job: dict
    files: dict[str, bytes]  # the content files (what the digest covers)
    # What verifying a bundle side said (accepted on its digests alone, ...): the CLI shows them.
    warnings: tuple[str, ...] = ()

    @property
    def digest(self) -> str:
        return self.manifest.digest


def load_side(path: str | Path, label: str | None = None, *, trust_digests: bool = False) -> Side:
    """A bundle folder or a spec file, whichever ``path`` is."""
    p = Path(path)
    label = label or str(path)
    if p.is_dir():
        return bundle_side(p, label, trust_digests=trust_digests)
    if not p.exists():
        raise SpecError([Problem("no such spec file or bundle folder", file=label)])
    from tutorrl.compiler.pipeline import compile_family

    # A spec that extends a base is compiled with its chain, as `tutorrl compile` does.
    family = compile_family(str(p), display_name=label)
    if len(family) > 1:
        raise SpecError([Problem(f"is a sweep of {len(family)} points, not one launch; compile it and compare "
                                 "its bundles (tutorrl diff BUNDLE BUNDLE ...)", file=label)])
    return compiled_side(family[0].bundle, label)


def bundle_side(path: Path, label: str, *, trust_digests: bool = False) -> Side:
    if not (path / MANIFEST).exists():
        raise BundleError(f"{label}: a folder without {MANIFEST} is neither a bundle nor a spec")
    loaded = verify_bundle(path, trust_digests=trust_digests)
    # verify_bundle has just hashed these bytes against the manifest.
    files = {name: (path / name).read_bytes() for name in CONTENT_FILES}
    return Side(label, "bundle", loaded.manifest, loaded.spec, loaded.job, files, tuple(loaded.warnings))


def spec_side(raw: bytes, label: str) -> Side:
    return compiled_side(compile_bytes(raw, label), label)


def compiled_side(compiled: CompiledBundle, label: str) -> Side:
    """The spec side of a spec already compiled (``tutorrl check`` compiles each spec once)."""
    files = {name: compiled.files[name] for name in CONTENT_FILES}
    # Parse the normalised spec.toml rather than re-normalising the input, so a
    # spec side and a bundle side are read by the very same path.
    spec, _ = parse_spec(files["spec.toml"], f"{label} (normalised)")
    return Side(label, "spec", compiled.manifest, spec, json.loads(files["ray-job.json"]), files)
