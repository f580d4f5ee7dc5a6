"""A bundle's identity: its files' digests, the job it names, and ``manifest.json``.

The digest covers the launch files and the job's identity (``ray-job.json``
without the digest it carries); ``manifest.json`` records it with each file's
sha256. Sealing is the one place a digest is computed, so the compiler and
``reseal`` (tests, benchmarks) cannot disagree on what a bundle id means.
"""

# No `from __future__ import annotations`: msgspec would evaluate each field's
# type from a string on every compile that finds its bundle already written.
from typing import Any

import msgspec

from tutorrl import __version__, _sha256
from tutorrl.contract import BUNDLE_SCHEMA as SCHEMA, CONTENT_FILES, DIGEST_FIELD, ID_LENGTH, MANIFEST
from tutorrl.errors import Problem


class Manifest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``manifest.json``: what the bundle is and what each file must hash to."""

    schema: str
    digest: str
    compiler: str
    experiment: str
    verl: str
    variant: str
    keymap_digest: str
    files: dict[str, str]
    # The reward plug-in that filled the spec, "name version" ("" for none).
    reward_plugin: str = ""
    # The entry point launch.sh starts (keymap/entries.toml), "" for verl.trainer.main_ppo.
    entry: str = ""
    # Provenance, outside the digest: where a composed spec.toml came from.
    # Each source file (the spec, the bases it extends) by its path relative
    # to the spec's folder, with its sha256; empty for a spec of one file.
    sources: dict[str, str] = {}
    # A sweep's point: each swept setting and its value; empty outside a sweep.
    point: dict[str, Any] = {}
    # The `--set PATH=VALUE` of the compile, as given; their values are in spec.toml.
    set: list[str] = []

    @property
    def provenance(self) -> dict:
        return {"sources": self.sources, "point": self.point, "set": self.set}

    @property
    def id(self) -> str:
        return bundle_id(self.digest)


class CompiledBundle(msgspec.Struct, frozen=True):
    files: dict[str, bytes]
    manifest: Manifest
    # Rules verl does not enforce that the spec breaks (never hashed).
    warnings: tuple[Problem, ...] = ()

    @property
    def id(self) -> str:
        return self.manifest.id


def bundle_id(digest: str) -> str:
    return digest.removeprefix("sha256:")[:ID_LENGTH]


def sha256(data: bytes) -> str:
    return _sha256.sha256(data).hexdigest()


def canonical_json(value) -> bytes:
    """Sorted keys, two-space indent, trailing newline: stable and diffable."""
    return msgspec.json.format(msgspec.json.encode(value, order="sorted"), indent=2) + b"\n"


def job_identity(job: dict) -> dict:
    """The job document without the field that names its own bundle."""
    metadata = {k: v for k, v in job.get("metadata", {}).items() if k != DIGEST_FIELD}
    return {**job, "metadata": metadata}


def compute_digest(files: dict[str, bytes], job: dict, *, hashed: dict[str, str] | None = None) -> str:
    """The bundle's digest; ``hashed`` gives launch files' sha256 already computed (seal's, for its manifest)."""
    hashed = hashed or {}
    identity = {
        "schema": SCHEMA,
        "files": {
            name: sha256(canonical_json(job_identity(job))) if name == "ray-job.json"
            else hashed.get(name) or sha256(files[name])
            for name in CONTENT_FILES
        },
    }
    return "sha256:" + sha256(canonical_json(identity))


PROVENANCE = ("sources", "point", "set")


def manifest_json(manifest: Manifest) -> bytes:
    """``manifest.json``'s bytes: provenance fields left out where empty, so a
    spec of one file keeps the manifest it always had (and so does main_ppo's entry)."""
    doc = msgspec.to_builtins(manifest)
    for name in (*PROVENANCE, "entry"):
        if not doc.get(name):
            doc.pop(name, None)
    return canonical_json(doc)


def with_provenance(compiled: CompiledBundle, **provenance) -> CompiledBundle:
    """``compiled`` with its manifest's provenance set (the digest, and every launch file, unchanged)."""
    manifest = msgspec.structs.replace(compiled.manifest, **provenance)
    return msgspec.structs.replace(compiled, manifest=manifest, files={**compiled.files, MANIFEST: manifest_json(manifest)})


def seal(files: dict[str, bytes], job: dict, *, experiment: str, verl: str, variant: str,
          keymap_digest: str, reward_plugin: str = "", compiler: str = f"tutorrl {__version__}",
          entry: str = "") -> CompiledBundle:
    """Digest the launch files, name the digest in the job, and write the manifest."""
    files = dict(files)
    job = {**job, "metadata": {k: v for k, v in job["metadata"].items() if k != DIGEST_FIELD}}
    # Each launch file hashed once, for the digest and the manifest both (CPython's
    # own sha256, see tutorrl._sha256: a second hash of each would be a share of every compile).
    hashed = {name: sha256(files[name]) for name in CONTENT_FILES if name != "ray-job.json"}
    digest = compute_digest(files, job, hashed=hashed)
    job["metadata"][DIGEST_FIELD] = digest
    files["ray-job.json"] = canonical_json(job)
    hashed["ray-job.json"] = sha256(files["ray-job.json"])
    manifest = Manifest(
        schema=SCHEMA, digest=digest, compiler=compiler, experiment=experiment,
        verl=verl, variant=variant, keymap_digest=keymap_digest,
        files={name: hashed[name] for name in CONTENT_FILES}, reward_plugin=reward_plugin, entry=entry,
    )
    files[MANIFEST] = manifest_json(manifest)
    return CompiledBundle(files=files, manifest=manifest)


def reseal(compiled: CompiledBundle, **replaced: bytes) -> CompiledBundle:
    """``compiled`` with some launch files replaced, digested and sealed anew.

    Bundles are content-addressed, not signed: anyone can seal any files. This
    exists for tests and benchmarks that need a bundle the compiler would
    never emit (a stand-in launch.sh, a key verl must reject); keyword names
    are file names with ``_`` for ``.`` and ``-`` (``launch_sh=b"..."``). The
    manifest says the bundle was resealed, so `tutorrl verify` cannot take it
    for this compiler's output: it checks its digests and warns that it did
    not re-derive the launch.
    """
    names = {name.replace(".", "_").replace("-", "_"): name for name in CONTENT_FILES}
    files = {name: data for name, data in compiled.files.items() if name in CONTENT_FILES}
    for key, data in replaced.items():
        files[names[key]] = data
    job = msgspec.json.decode(files.pop("ray-job.json"))
    m = compiled.manifest
    return seal(files, job, experiment=m.experiment, verl=m.verl, variant=m.variant, keymap_digest=m.keymap_digest,
                 reward_plugin=m.reward_plugin, compiler=f"tutorrl {__version__} (resealed, not compiled)",
                 entry=m.entry)
