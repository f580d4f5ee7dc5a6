"""Checking a bundle on disk against its manifest before anything uses it."""

from __future__ import annotations

from pathlib import Path

import msgspec

from tutorrl.compiler.bundle import (
    APPENDED_DIRS, CONTENT_FILES, DIGEST_FIELD, MANIFEST, SCHEMA, Manifest, bundle_id, compute_digest, sha256,
)
from tutorrl.compiler.load import parse_spec
from tutorrl.compiler.spec import Spec
from tutorrl.errors import BundleError


class LoadedBundle(msgspec.Struct, frozen=True):
    """A bundle whose every file matched its manifest when it was read."""

    path: Path
    manifest: Manifest
    job: dict
    spec: Spec

    @property
    def digest(self) -> str:
        return self.manifest.digest


def verify_bundle(path: str | Path) -> LoadedBundle:
    """Read ``path`` and prove it is the bundle its manifest describes.

    Raises :class:`BundleError` naming every file that does not match.
    """
    path = Path(path)
    if not path.is_dir():
        raise BundleError(f"{path}: no such bundle folder")
    try:
        manifest = msgspec.json.decode((path / MANIFEST).read_bytes(), type=Manifest)
    except FileNotFoundError:
        raise BundleError(f"{path}: no {MANIFEST}; not a tutorrl bundle") from None
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise BundleError(f"{path / MANIFEST}: not a valid manifest ({exc})") from None
    if manifest.schema != SCHEMA:
        raise BundleError(f"{path / MANIFEST}: schema {manifest.schema!r}; this tutorrl reads {SCHEMA!r}")

    problems: list[str] = []
    files: dict[str, bytes] = {}
    if sorted(manifest.files) != sorted(CONTENT_FILES):
        problems.append(f"{MANIFEST} lists {', '.join(sorted(manifest.files))}; expected {', '.join(CONTENT_FILES)}")
    for name in CONTENT_FILES:
        try:
            files[name] = (path / name).read_bytes()
        except FileNotFoundError:
            problems.append(f"{name} is missing")
            continue
        if sha256(files[name]) != manifest.files.get(name):
            problems.append(f"{name} was modified (sha256 differs from the manifest)")
    expected = set(CONTENT_FILES) | {MANIFEST} | set(APPENDED_DIRS)
    problems += [f"unexpected file {p.name}" for p in sorted(path.iterdir())
                 if p.name not in expected and not p.name.startswith(".")]

    job: dict = {}
    if "ray-job.json" in files:
        try:
            job = msgspec.json.decode(files["ray-job.json"])
        except msgspec.DecodeError:
            problems.append("ray-job.json is not valid JSON")
    if not problems:
        if job.get("metadata", {}).get(DIGEST_FIELD) != manifest.digest:
            problems.append("ray-job.json names another bundle digest")
        elif compute_digest(files, job) != manifest.digest:
            problems.append("the files do not hash to the manifest's digest")
        elif path.name != bundle_id(manifest.digest) and not path.name.startswith("."):
            problems.append(f"the folder is named {path.name}, but the digest says {bundle_id(manifest.digest)}")
    if problems:
        raise BundleError(f"{path}: bundle verification failed:\n  " + "\n  ".join(problems))
    spec, _ = parse_spec(files["spec.toml"], str(path / "spec.toml"))
    return LoadedBundle(path=path, manifest=manifest, job=job, spec=spec)
