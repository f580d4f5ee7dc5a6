"""The bundle: file contents, their digest, and the atomic write.

:func:`assemble` is pure (overrides in, bytes out). :func:`write_bundle` is the
one place the compiler touches the disk, and it never leaves a half bundle:
files go to a temporary folder beside the final one, are fsynced, and the
folder is renamed into place. Two compiles of the same spec racing each other
both end with the same, complete folder.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import time
from pathlib import Path

import msgspec
import tomli_w

from tutorrl import __version__, _files
from tutorrl.compiler.keymap import ReleaseMap
from tutorrl.compiler.resolve import Resolved
from tutorrl.compiler.spec import Spec, to_builtins
from tutorrl.compiler.templates import render_template
from tutorrl.errors import BundleError

SCHEMA = "tutorrl.bundle/1"
ID_LENGTH = 16
# The files that determine a launch, in the order a manifest lists them.
CONTENT_FILES = ("bundle.env", "launch.sh", "ray-job.json", "spec.toml")
MANIFEST = "manifest.json"
# Appended after compilation; outside the digest.
APPENDED_DIRS = ("runs", "evidence")
DIGEST_FIELD = "tutorrl_bundle"

# verl asks Ray for no GPUs on its reward workers, and Ray hides every GPU
# from a worker that asked for none. A simulator reward needs the card set
# aside for it, so Ray must leave CUDA_VISIBLE_DEVICES alone -- in the workers,
# which is why this travels in the job's runtime_env and not only in the
# driver's environment.
_REWARD_GPU_ENV = {"RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "1"}


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

    @property
    def id(self) -> str:
        return bundle_id(self.digest)


class CompiledBundle(msgspec.Struct, frozen=True):
    files: dict[str, bytes]
    manifest: Manifest

    @property
    def id(self) -> str:
        return self.manifest.id


def bundle_id(digest: str) -> str:
    return digest.removeprefix("sha256:")[:ID_LENGTH]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def canonical_json(value) -> bytes:
    """Sorted keys, two-space indent, trailing newline: stable and diffable."""
    return msgspec.json.format(msgspec.json.encode(value, order="sorted"), indent=2) + b"\n"


def job_identity(job: dict) -> dict:
    """The job document without the field that names its own bundle."""
    metadata = {k: v for k, v in job.get("metadata", {}).items() if k != DIGEST_FIELD}
    return {**job, "metadata": metadata}


def compute_digest(files: dict[str, bytes], job: dict) -> str:
    identity = {
        "schema": SCHEMA,
        "files": {
            name: sha256(canonical_json(job_identity(job)) if name == "ray-job.json" else files[name])
            for name in CONTENT_FILES
        },
    }
    return "sha256:" + sha256(canonical_json(identity))


def assemble(spec: Spec, resolved: Resolved, rmap: ReleaseMap) -> CompiledBundle:
    """Every file of the bundle for a normalised spec and its resolved overrides."""
    experiment = spec.experiment.name
    worker_env = dict(spec.env.set)
    if spec.resources.reward_gpus:
        worker_env.update(_REWARD_GPU_ENV)
    worker_env = dict(sorted(worker_env.items()))

    spec_toml = ("# The normalised spec this bundle was compiled from (every default filled in).\n"
                 + tomli_w.dumps(to_builtins(spec))).encode()
    # Overrides whose value launch.sh computes (the reward module's file before
    # verl 0.7.1), each held in a shell variable.
    runtime_vars = {i: f"reward_module_file_{n}" if n else "reward_module_file"
                    for n, i in enumerate(i for i, o in enumerate(resolved.overrides) if o.runtime)}
    launch = render_template(
        "launch.sh.j2",
        experiment=experiment, verl=rmap.release, variant=rmap.variant,
        config_name=shlex.quote(resolved.config_name),
        passthrough=spec.env.passthrough,
        imports_tutorrl=any(o.setting == "trainer.evidence_callback" for o in resolved.overrides),
        overrides=[f'"${runtime_vars[i]}"' if i in runtime_vars else shlex.quote(o.text)
                   for i, o in enumerate(resolved.overrides)],
        module_files=[(runtime_vars[i], shlex.quote(("+" if o.append else "") + o.key), shlex.quote(str(o.value)))
                      for i, o in enumerate(resolved.overrides) if i in runtime_vars],
    ).encode()
    env_file = render_template(
        "bundle.env.j2",
        experiment=experiment,
        exports=[(name, shlex.quote(value)) for name, value in worker_env.items()],
        passthrough=spec.env.passthrough,
    ).encode()
    job = {
        # Relative to the bundle folder: the runtime runs it there, or ships
        # the folder as the job's working_dir.
        "entrypoint": "bash launch.sh",
        "runtime_env": {"env_vars": worker_env},
        "metadata": {
            "tutorrl_experiment": experiment,
            "tutorrl_project": spec.experiment.project,
            "tutorrl_verl": rmap.release,
            "tutorrl_passthrough": ",".join(spec.env.passthrough),
        },
        # The driver only orchestrates: verl's own actors must get the GPUs,
        # and anything reserved for the entrypoint is taken from them.
        "entrypoint_num_cpus": 1,
        "entrypoint_num_gpus": 0,
    }
    files = {"bundle.env": env_file, "launch.sh": launch, "spec.toml": spec_toml}
    return _seal(files, job, experiment=experiment, verl=rmap.release, variant=rmap.variant,
                 keymap_digest=rmap.digest())


def _seal(files: dict[str, bytes], job: dict, *, experiment: str, verl: str, variant: str,
          keymap_digest: str) -> CompiledBundle:
    """Digest the launch files, name the digest in the job, and write the manifest."""
    files = dict(files)
    job = {**job, "metadata": {k: v for k, v in job["metadata"].items() if k != DIGEST_FIELD}}
    digest = compute_digest(files, job)
    job["metadata"][DIGEST_FIELD] = digest
    files["ray-job.json"] = canonical_json(job)
    manifest = Manifest(
        schema=SCHEMA, digest=digest, compiler=f"tutorrl {__version__}", experiment=experiment,
        verl=verl, variant=variant, keymap_digest=keymap_digest,
        files={name: sha256(files[name]) for name in CONTENT_FILES},
    )
    files[MANIFEST] = canonical_json(manifest)
    return CompiledBundle(files=files, manifest=manifest)


def reseal(compiled: CompiledBundle, **replaced: bytes) -> CompiledBundle:
    """``compiled`` with some launch files replaced, digested and sealed anew.

    Bundles are content-addressed, not signed: anyone can seal any files. This
    exists for tests and benchmarks that need a bundle the compiler would
    never emit (a stand-in launch.sh, a key verl must reject); keyword names
    are file names with ``_`` for ``.`` and ``-`` (``launch_sh=b"..."``).
    """
    names = {name.replace(".", "_").replace("-", "_"): name for name in CONTENT_FILES}
    files = {name: data for name, data in compiled.files.items() if name in CONTENT_FILES}
    for key, data in replaced.items():
        files[names[key]] = data
    job = msgspec.json.decode(files.pop("ray-job.json"))
    m = compiled.manifest
    return _seal(files, job, experiment=m.experiment, verl=m.verl, variant=m.variant, keymap_digest=m.keymap_digest)


class WriteResult(msgspec.Struct, frozen=True):
    path: Path
    created: bool


def write_bundle(compiled: CompiledBundle, out_root: str | Path) -> WriteResult:
    """Write ``compiled`` under ``out_root/<id>/`` atomically.

    If the folder already exists with the same content, nothing is written.
    """
    root = Path(out_root)
    final = root / compiled.id
    if final.exists():
        _check_existing(final, compiled)
        return WriteResult(final, created=False)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BundleError(f"cannot create the bundle folder {root}: {exc.strerror}") from None
    try:
        # Unique per process and moment; hidden, so `verify` and `check` never
        # mistake it for a bundle.
        tmp = root / f".{compiled.id}.{os.getpid()}.{time.monotonic_ns()}"
        os.mkdir(tmp, 0o700)
    except OSError as exc:
        raise BundleError(f"cannot write in {root}: {exc.strerror}") from None
    try:
        for name, data in compiled.files.items():
            _files.write_new(tmp / name, data, 0o755 if name == "launch.sh" else 0o644)
        os.chmod(tmp, 0o755)
        _files.fsync_dir(tmp)
        try:
            os.rename(tmp, final)
        except OSError:
            # Another compile of the same spec got there first.
            if not final.exists():
                raise
            _check_existing(final, compiled)
            return WriteResult(final, created=False)
        _files.fsync_dir(root)
        return WriteResult(final, created=True)
    except OSError as exc:
        raise BundleError(f"cannot write the bundle under {root}: {exc.strerror}") from None
    finally:
        if tmp.exists():  # a failed write, or a lost race
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)


def _check_existing(final: Path, compiled: CompiledBundle) -> None:
    # The manifest may name another tutorrl release; the launch files may not differ.
    for name in CONTENT_FILES:
        data = compiled.files[name]
        try:
            same = (final / name).read_bytes() == data
        except OSError:
            same = False
        if not same:
            raise BundleError(
                f"{final} exists but its {name} differs from what this spec compiles to "
                "(edited by hand, or written by another tutorrl release); "
                "check it with `tutorrl verify`, then remove it and compile again")
