"""The bundle: file contents, their digest, and the atomic write.

:func:`assemble` is pure (overrides in, bytes out). :func:`write_bundle` is the
one place the compiler touches the disk, and it never leaves a half bundle:
files go to a temporary folder beside the final one, which is renamed into
place (not fsynced: see :func:`write_bundle`). Two compiles of the same spec racing each other
both end with the same, complete folder.
"""

from __future__ import annotations

import functools
import os
import shlex
from typing import TYPE_CHECKING, Any

import msgspec
import tomli_w

from tutorrl import __version__, _files, _sha256
from tutorrl.compiler import roots
from tutorrl.compiler import spelling as spellings
from tutorrl.compiler.keymap import Lock
from tutorrl.compiler.resolve import Resolved
from tutorrl.compiler.spec import Spec, to_builtins
from tutorrl.compiler.templates import render_template
from tutorrl.errors import BundleError, Problem

if TYPE_CHECKING:
    from pathlib import Path

# The bundle's names are the contract's (tutorrl/contract.py); re-exported for the compiler's own users.
from tutorrl.contract import APPENDED_DIRS, CONTENT_FILES, DIGEST_FIELD, EVIDENCE_ON_FAILURE_ENV, ID_LENGTH, MANIFEST
from tutorrl.contract import BUNDLE_SCHEMA as SCHEMA

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


def compute_digest(files: dict[str, bytes], job: dict) -> str:
    identity = {
        "schema": SCHEMA,
        "files": {
            name: sha256(canonical_json(job_identity(job)) if name == "ray-job.json" else files[name])
            for name in CONTENT_FILES
        },
    }
    return "sha256:" + sha256(canonical_json(identity))


PROVENANCE = ("sources", "point", "set")


def manifest_json(manifest: Manifest) -> bytes:
    """``manifest.json``'s bytes: provenance fields left out where empty, so a
    spec of one file keeps the manifest it always had."""
    doc = msgspec.to_builtins(manifest)
    for name in PROVENANCE:
        if not doc.get(name):
            doc.pop(name, None)
    return canonical_json(doc)


def with_provenance(compiled: CompiledBundle, **provenance) -> CompiledBundle:
    """``compiled`` with its manifest's provenance set (the digest, and every launch file, unchanged)."""
    manifest = msgspec.structs.replace(compiled.manifest, **provenance)
    return msgspec.structs.replace(compiled, manifest=manifest, files={**compiled.files, MANIFEST: manifest_json(manifest)})


def assemble(spec: Spec, resolved: Resolved, lock: Lock, *, warnings: tuple[Problem, ...] = ()) -> CompiledBundle:
    """Every file of the bundle for a normalised spec and its resolved overrides."""
    experiment = spec.experiment.name or "unnamed"
    worker_env = dict(spec.env.set)
    if spec.evidence.on_failure == "stop":
        # Read by tutorrl.evidence.callback in verl's trainer actor; unset means "record",
        # so bundles that do not ask for "stop" are unchanged.
        worker_env[EVIDENCE_ON_FAILURE_ENV] = "stop"
    worker_env = dict(sorted(worker_env.items()))
    spec_toml = render_spec_toml(spec, lock).encode()
    # Overrides whose value launch.sh computes (the reward module's file before
    # verl 0.7.1), each held in a shell variable.
    runtime_vars = {i: f"reward_module_file_{n}" if n else "reward_module_file"
                    for n, i in enumerate(i for i, o in enumerate(resolved.overrides) if o.runtime)}
    # Overrides whose value starts with a root: launch.sh puts the job's value in.
    rooted = [i for i, o in enumerate(resolved.overrides)
              if spec.roots and not o.runtime and o.raw is None and roots.references(o.value)
              and any(name in spec.roots for name, _ in roots.references(o.value))]
    root_vars = {i: f"rooted_{n}" for n, i in enumerate(rooted)}
    runtime_vars.update(root_vars)
    head = ["--config-name", resolved.config_name]
    if resolved.config_path is not None:
        head = ["--config-path", resolved.config_path] + head
    module_files = [(runtime_vars[i], shlex.quote(o.spelled), shlex.quote(str(o.value)))
                    for i, o in enumerate(resolved.overrides) if o.runtime]
    lines = [f'"${runtime_vars[i]}"' if i in runtime_vars else shlex.quote(o.text)
             for i, o in enumerate(resolved.overrides)]
    launch = render_template(
        "launch.sh.tmpl",
        experiment=experiment, verl=lock.release, variant=lock.variant,
        config_args=" ".join(shlex.quote(a) for a in head),
        passthrough_checks="".join(
            f'\n: "${{{name}:?is passed through from the submitter but is not set in the job environment}}"'
            for name in spec.env.passthrough) + "\n",
        evidence_check=render_template("evidence_check.tmpl") if any(
            o.setting == "trainer.evidence_callback" for o in resolved.overrides) else "",
        module_files=(render_template("module_files.tmpl", verl=lock.release,
                                      module_program=shlex.quote(spellings.launch_program(lock.release)))
                      if module_files else "") + "".join(
            f'\n{var}="$("$python_bin" -c "$module_program" {key} {module})" || exit 3'
            for var, key, module in module_files) + _root_lines(spec, resolved, root_vars),
        roots=_root_checks(spec),
        overrides=" \\" + " \\".join(f"\n  {line}" for line in lines) if lines else "",
    ).encode()
    env_file = render_template(
        "bundle.env.tmpl",
        experiment=experiment,
        exports="".join(f"\nexport {name}={shlex.quote(value)}" for name, value in worker_env.items()),
        passthrough=("\n# Passed through from the submitter's environment at run time; values are never written:"
                     + "".join(f"\n#   {name}" for name in spec.env.passthrough)) if spec.env.passthrough else "",
    ).encode()
    job = {
        # Relative to the bundle folder: the runtime runs it there, or ships
        # the folder as the job's working_dir.
        "entrypoint": "bash launch.sh",
        "runtime_env": {"env_vars": worker_env},
        "metadata": {
            "tutorrl_experiment": experiment,
            "tutorrl_project": spec.experiment.project or "",
            "tutorrl_verl": lock.release,
            "tutorrl_passthrough": ",".join(spec.env.passthrough),
        },
        # The driver only orchestrates: verl's own actors must get the GPUs,
        # and anything reserved for the entrypoint is taken from them.
        "entrypoint_num_cpus": 1,
        "entrypoint_num_gpus": 0,
    }
    plugin = ""
    if spec.reward.plugin is not None:
        from tutorrl.compiler.rewards import load_plugin

        plugin = f"{spec.reward.plugin} {load_plugin(spec.reward.plugin).version}"
    files = {"bundle.env": env_file, "launch.sh": launch, "spec.toml": spec_toml}
    compiled = _seal(files, job, experiment=experiment, verl=lock.release, variant=lock.variant,
                     keymap_digest=lock.digest(), reward_plugin=plugin)
    return msgspec.structs.replace(compiled, warnings=warnings)


def _root_checks(spec: Spec) -> str:
    """Each root takes the job's value, else the spec's default, else stops the launch."""
    if not spec.roots:
        return ""
    lines = ["# Roots (the spec's [roots]): folders named by the job's environment."]
    for name, root in sorted(spec.roots.items()):
        if root.default is not None:
            lines.append(f'if [ -z "${{{name}:-}}" ]; then export {name}={shlex.quote(root.default)}; fi')
        else:
            lines.append(f': "${{{name}:?is a root of this bundle ([roots] in its spec) and is not set in the job environment}}"')
    return "\n".join(lines) + "\n"


def _root_lines(spec: Spec, resolved: Resolved, root_vars: dict[int, str]) -> str:
    if not root_vars:
        return ""
    out = [render_template("roots_program.tmpl", roots_program=shlex.quote(roots.launch_program()))]
    for i, var in root_vars.items():
        o = resolved.overrides[i]
        key = shlex.quote(o.spelled)
        out.append(f'\n{var}="$("$python_bin" -c "$roots_program" {key} {shlex.quote(roots.launch_argument(o.value))})" || exit 3')
    return "".join(out)


def render_spec_toml(spec: Spec, lock: Lock) -> str:
    """The normalised spec, then verl's default for every setting it leaves unset."""
    from tutorrl.compiler.settings import NOT_SETTINGS

    out = ["# The normalised spec this bundle was compiled from.\n", tomli_w.dumps(to_builtins(spec))]
    unset = tuple(s for s in spec_settings() if s not in NOT_SETTINGS and not _is_set(spec, s))
    # The defaults follow from the release and which settings are unset alone: a
    # sweep's points (the same settings set, other values) write them once.
    # Keyed by the lock object itself (load_lock hands out one per release), held
    # in the entry so its id names no other lock while the entry lives.
    key = (id(lock), unset)
    held = _DEFAULTS.get(key)
    if held is None or held[0] is not lock:
        held = _DEFAULTS[key] = (lock, _defaults_text(unset, lock))
        if len(_DEFAULTS) > 64:
            _DEFAULTS.pop(next(iter(_DEFAULTS)))
    out.append(held[1])
    return "".join(out)


_DEFAULTS: dict[tuple, tuple[Lock, str]] = {}


def _defaults_text(unset: tuple[str, ...], lock: Lock) -> str:
    out = []
    stated = []  # (setting, value, how)
    for setting in unset:
        target = lock.targets.get(setting)
        if target is None or target.kind == "table":
            continue
        if target.interpolation:
            stated.append((setting, target.interpolation, "  (follows another setting)"))
        elif target.default is None:
            stated.append((setting, None, ""))
        else:
            stated.append((setting, target.default, ""))
    literals = iter(_toml_values([value for _, value, _ in stated if value is not None]))
    defaults = [f"# {setting}: unset (no default)" if value is None else f"# {setting} = {next(literals)}{how}"
                for setting, value, how in stated]
    if defaults:
        out.append(f"\n# Not set here, so verl {lock.release}'s own defaults apply ({lock.variant}):\n")
        out.append("\n".join(defaults) + "\n")
    return "".join(out)


def _is_set(spec: Spec, setting: str) -> bool:
    from tutorrl.compiler.spec import get_field

    return get_field(spec, setting) is not None


def _toml_values(values: list) -> list[str]:
    """Each value on one line (a comment cannot span lines), its scalars written
    by TOML's writer in one call for all (a call each was ~0.3 ms of a compile)."""
    scalars: list = []

    def collect(value) -> None:
        if isinstance(value, list):
            for v in value:
                collect(v)
        elif isinstance(value, dict):
            for v in value.values():
                collect(v)
        else:
            scalars.append(value)

    for value in values:
        collect(value)
    # Without multi-line strings every scalar is one line: "s<i> = <literal>".
    # (Split at "\n" only: a string may hold U+0085 or U+2028, which TOML
    # writes as they are and splitlines() would break at.)
    lines = tomli_w.dumps({f"s{i}": v for i, v in enumerate(scalars)}).split("\n")[:-1]
    literals = iter(line.split(" = ", 1)[1] for line in lines)

    def write(value) -> str:
        if isinstance(value, list):
            return "[" + ", ".join(write(v) for v in value) + "]"
        if isinstance(value, dict):
            return "{ " + ", ".join(f"{k} = {write(v)}" for k, v in value.items()) + " }"
        return next(literals)

    return [write(value) for value in values]


def spec_settings() -> list[str]:
    """Every setting name the spec can express, in declaration order."""
    return _spec_settings(Spec)


@functools.cache
def _spec_settings(cls, prefix: str = "") -> list[str]:
    # The annotations are evaluated objects (spec.py does not defer them), so
    # reading them needs no typing.get_type_hints (~4 ms on every compile).
    from tutorrl.compiler.load import _struct_in

    out = []
    for name in cls.__struct_fields__:
        sub = _struct_in(cls.__annotations__[name])
        out += _spec_settings(sub, prefix + name + ".") if sub is not None else [prefix + name]
    return out


def _seal(files: dict[str, bytes], job: dict, *, experiment: str, verl: str, variant: str,
          keymap_digest: str, reward_plugin: str = "", compiler: str = f"tutorrl {__version__}") -> CompiledBundle:
    """Digest the launch files, name the digest in the job, and write the manifest."""
    files = dict(files)
    job = {**job, "metadata": {k: v for k, v in job["metadata"].items() if k != DIGEST_FIELD}}
    digest = compute_digest(files, job)
    job["metadata"][DIGEST_FIELD] = digest
    files["ray-job.json"] = canonical_json(job)
    manifest = Manifest(
        schema=SCHEMA, digest=digest, compiler=compiler, experiment=experiment,
        verl=verl, variant=variant, keymap_digest=keymap_digest,
        files={name: sha256(files[name]) for name in CONTENT_FILES}, reward_plugin=reward_plugin,
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
    return _seal(files, job, experiment=m.experiment, verl=m.verl, variant=m.variant, keymap_digest=m.keymap_digest,
                 reward_plugin=m.reward_plugin, compiler=f"tutorrl {__version__} (resealed, not compiled)")


class WriteResult(msgspec.Struct, frozen=True):
    folder: str
    """The bundle folder: ``out_root`` as given, joined with the bundle id."""
    created: bool
    """False when the same bundle was already there (nothing was written)."""

    @property
    def path(self) -> Path:
        from pathlib import Path

        return Path(self.folder)


def write_bundle(compiled: CompiledBundle, out_root: str | Path) -> WriteResult:
    """Write ``compiled`` under ``out_root/<id>/`` atomically.

    If the folder already exists with the same content, nothing is written.
    Written with os alone: pathlib's import is ~3 ms of a cold compile.
    """
    root = os.fspath(out_root)
    final = os.path.join(root, compiled.id)
    if os.path.exists(final):
        _check_existing(final, compiled)
        _refresh_provenance(final, compiled)
        return WriteResult(final, created=False)
    try:
        os.makedirs(root, exist_ok=True)
    except OSError as exc:
        raise BundleError(f"cannot create the bundle folder {root}: {exc.strerror}") from None
    try:
        # Unique per process and draw; hidden, so `verify` and `check` never
        # mistake it for a bundle.
        tmp = os.path.join(root, f".{compiled.id}.{os.getpid()}.{os.urandom(8).hex()}")
        os.mkdir(tmp, 0o700)
    except OSError as exc:
        raise BundleError(f"cannot write in {root}: {exc.strerror}") from None
    # Atomic (a hidden folder renamed into place) but not fsynced: a bundle is
    # derived data, like a compiler's output. A crash of tutorrl leaves nothing
    # half-written; a power loss right after a compile can at worst leave a
    # bundle whose files do not match, which `tutorrl verify` (re-derivation)
    # and the next compile of the same spec both name. Seven fsyncs were most
    # of a cold compile's wall time on a real disk.
    try:
        for name, data in compiled.files.items():
            _files.write_new(os.path.join(tmp, name), data, 0o755 if name == "launch.sh" else 0o644, durable=False)
        os.chmod(tmp, 0o755)
        try:
            os.rename(tmp, final)
        except OSError:
            # Another compile of the same spec got there first.
            if not os.path.exists(final):
                raise
            _check_existing(final, compiled)
            return WriteResult(final, created=False)
        return WriteResult(final, created=True)
    except OSError as exc:
        raise BundleError(f"cannot write the bundle under {root}: {exc.strerror}") from None
    finally:
        if os.path.exists(tmp):  # a failed write, or a lost race
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)


def _refresh_provenance(final: str, compiled: CompiledBundle) -> None:
    """The same launch compiled from other sources (a base edited where it changes
    nothing, a point now reached from another sweep): its manifest says so.

    Only a manifest that differs from this compile's in its provenance alone is
    replaced (atomically); one that differs otherwise is another tutorrl's
    claim, which this compile leaves for `tutorrl verify` to judge.
    """
    path = os.path.join(final, MANIFEST)
    try:
        with open(path, "rb") as fh:
            old = fh.read(1 << 20)
        present = msgspec.json.decode(old, type=Manifest)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return
    new = compiled.files[MANIFEST]
    if old == new or present.provenance == compiled.manifest.provenance:
        return
    if manifest_json(msgspec.structs.replace(present, sources={}, point={}, set=[])) != manifest_json(
            msgspec.structs.replace(compiled.manifest, sources={}, point={}, set=[])):
        return
    tmp = os.path.join(final, f".{MANIFEST}.{os.getpid()}.{os.urandom(8).hex()}")
    try:
        _files.write_new(tmp, new, 0o644, durable=False)
        os.replace(tmp, path)
    except OSError as exc:
        raise BundleError(f"cannot update {path}: {exc.strerror}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _check_existing(final: str, compiled: CompiledBundle) -> None:
    # The manifest may name another tutorrl release; the launch files may not differ.
    for name in CONTENT_FILES:
        data = compiled.files[name]
        try:
            with open(os.path.join(final, name), "rb") as fh:
                same = fh.read() == data
        except OSError:
            same = False
        if not same:
            raise BundleError(
                f"{final} exists but its {name} differs from what this spec compiles to "
                "(edited by hand, or written by another tutorrl release); "
                "check it with `tutorrl verify`, then remove it and compile again")
