"""Checking a bundle on disk against its manifest before anything uses it."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from tutorrl.compiler.bundle import Manifest, bundle_id
from tutorrl.compiler.bundle.manifest import compute_digest, sha256
from tutorrl.compiler.spec import Spec, parse_spec
from tutorrl.contract import APPENDED_DIRS, BUNDLE_SCHEMA as SCHEMA, CONTENT_FILES, DIGEST_FIELD, MANIFEST
from tutorrl.errors import BundleError


class LoadedBundle(msgspec.Struct, frozen=True):
    """A bundle whose every file matched its manifest when it was read."""

    path: Path
    manifest: Manifest
    job: dict
    spec: Spec
    # What could not be proven (a bundle of another tutorrl release is checked
    # by its digests only); empty when the bundle was re-derived byte for byte.
    warnings: tuple[str, ...] = ()

    @property
    def digest(self) -> str:
        return self.manifest.digest


def _has_experiment(path: Path) -> bool | None:
    """Whether the small file's TOML has an ``[experiment]`` table; None where
    it cannot say (unreadable, too big, not UTF-8, not TOML)."""
    from tutorrl import _toml

    try:
        if path.stat().st_size > 1 << 20:
            return None
        return isinstance(_toml.loads(path.read_text("utf-8")).get("experiment"), dict)
    except (OSError, UnicodeDecodeError, _toml.TOMLDecodeError):
        return None


def _looks_like_spec(path: Path) -> bool:
    """A file whose TOML has an ``[experiment]`` table, or a ``.toml`` that does
    not parse (a spec with a mistake: compiling it says where). A ``.toml``
    that parses without one (``pyproject.toml``) is no spec."""
    found = _has_experiment(path)
    return found if found is not None else path.suffix == ".toml"


def require_bundle_folder(path: str | Path) -> Path:
    """``path`` if it is a bundle folder; otherwise say what it is and what to do.

    Users hand a spec where a bundle is wanted (``tutorrl run specs/x.toml``),
    a file inside a bundle, the bundle root, or the spec folder; each gets its
    own message and the command that gets them going, never a bare "no such
    bundle folder".
    """
    import shlex  # here, not at module level: the compile path imports this module

    shown = str(path)
    path = Path(path)
    if path.is_dir():
        if (path / MANIFEST).exists():
            return path
        if any((path / name).exists() for name in CONTENT_FILES):
            raise BundleError(f"{shown}: no {MANIFEST}; not a tutorrl bundle (or one whose manifest was removed)")
        children = sorted(p.name for p in path.iterdir() if p.is_dir() and (p / MANIFEST).is_file())
        if children:
            listed = ", ".join(str(path / c) for c in children[:3]) + (", ..." if len(children) > 3 else "")
            raise BundleError(f"{shown} is a folder of bundles, not a bundle folder; give one of them: {listed}")
        # Only a file that parses as a spec is suggested: the repository root's
        # pyproject.toml is no spec to compile. The first few are enough.
        specs = [p for p in sorted(path.glob("*.toml"))[:32] if p.is_file() and _has_experiment(p)]
        if specs:
            raise BundleError(f"{shown} is a folder of spec files, not a bundle folder; compile a spec first: "
                              f"tutorrl compile {shlex.quote(str(specs[0]))}")
        raise BundleError(f"{shown}: no {MANIFEST}; not a tutorrl bundle (a bundle folder is what "
                          "`tutorrl compile SPEC` writes and prints)")
    if path.exists():
        if _looks_like_spec(path):
            raise BundleError(f"{shown} is a spec file, not a bundle folder; compile it first: "
                              f"tutorrl compile {shlex.quote(shown)}")
        if (path.parent / MANIFEST).is_file():
            raise BundleError(f"{shown} is a file inside the bundle folder {path.parent}; "
                              f"give the folder: {shlex.quote(str(path.parent))}")
        raise BundleError(f"{shown} is a file, not a bundle folder (a bundle folder is what "
                          "`tutorrl compile SPEC` writes and prints)")
    raise BundleError(f"{shown}: no such bundle folder")


# Accepting a bundle this tutorrl cannot re-derive, on its digests alone: the
# Named in the refusal: the command line's way to accept such a bundle (tutorrl/_argparse.py).
from tutorrl.contract import TRUST_DIGESTS_ENV  # noqa: E402


def verify_bundle(path: str | Path, *, trust_digests: bool = False) -> LoadedBundle:
    """Read ``path`` and prove it is the bundle its manifest describes.

    Raises :class:`BundleError` naming every file that does not match, and for a
    bundle whose launch does not follow from its spec.toml -- unless
    ``trust_digests`` accepts one that another tutorrl release built on its
    digests alone, with a warning. Nothing here reads the environment: the
    command line turns ``--trust-digests`` (or ``TUTORRL_TRUST_DIGESTS=1``)
    into this argument.
    """
    path = require_bundle_folder(path)
    try:
        # The bounded reader: a manifest that is a folder, a FIFO or a link to
        # /dev/zero is named, never read as bytes without end or waited on.
        manifest_bytes = _read_regular(path / MANIFEST)
        manifest = msgspec.json.decode(manifest_bytes, type=Manifest)
    except FileNotFoundError:
        raise BundleError(f"{path}: no {MANIFEST}; not a tutorrl bundle") from None
    except BundleError as exc:
        raise BundleError(f"{path}: bundle verification failed:\n  {exc}") from None
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise BundleError(f"{path / MANIFEST}: not a valid manifest ({exc})") from None
    except RecursionError:
        raise BundleError(f"{path / MANIFEST}: not a valid manifest (nested without end)") from None
    if manifest.schema != SCHEMA:
        raise BundleError(f"{path / MANIFEST}: schema {manifest.schema!r}; this tutorrl reads {SCHEMA!r}")

    problems: list[str] = []
    files: dict[str, bytes] = {}
    if sorted(manifest.files) != sorted(CONTENT_FILES):
        problems.append(f"{MANIFEST} lists {', '.join(sorted(manifest.files))}; expected {', '.join(CONTENT_FILES)}")
    for name in CONTENT_FILES:
        try:
            files[name] = _read_regular(path / name)
        except FileNotFoundError:
            problems.append(f"{name} is missing")
            continue
        except BundleError as exc:
            problems.append(str(exc))
            continue
        if sha256(files[name]) != manifest.files.get(name):
            problems.append(f"{name} was modified (sha256 differs from the manifest)")
    expected = set(CONTENT_FILES) | {MANIFEST} | set(APPENDED_DIRS)
    # Every entry counts, hidden ones included: nothing may ride along unseen.
    problems += [f"unexpected file {p.name}" for p in sorted(path.iterdir()) if p.name not in expected]
    for name in APPENDED_DIRS:
        entry = path / name
        if entry.is_symlink():
            # Records written through a link would land outside the bundle.
            problems.append(f"{name} is a symlink; it must be a folder inside the bundle")
        elif entry.exists() and not entry.is_dir():
            problems.append(f"{name} is a file; it must be a folder inside the bundle")
        elif entry.is_dir():
            problems += [f"{rel} holds a private key: anyone with the bundle can sign its evidence; move the key "
                         "out of the bundle (and make a new one: this one travelled with it)"
                         for rel in _private_keys(entry, name)]

    job: dict = {}
    if "ray-job.json" in files:
        from tutorrl._read import ReadError, decode_json

        try:
            job = decode_json(files["ray-job.json"], name="ray-job.json")
        except ReadError as exc:
            problems.append(str(exc))
        else:
            if not isinstance(job, dict):
                problems.append("ray-job.json is not a JSON object")
                job = {}
    if not problems:
        metadata = job.get("metadata")
        if not isinstance(metadata, dict) or metadata.get(DIGEST_FIELD) != manifest.digest:
            problems.append("ray-job.json names another bundle digest")
        elif compute_digest(files, job) != manifest.digest:
            problems.append("the files do not hash to the manifest's digest")
        else:
            # The folder's own name, not the name as given: `verify .` inside the
            # bundle names "" (and `..`, `bundles/x/..` likewise). No name is
            # exempt -- a hidden one (".x", "...") used to pass unchecked.
            name = os.path.basename(os.path.realpath(path))
            if name != bundle_id(manifest.digest):
                problems.append(f"the folder is named {name}, but the digest says {bundle_id(manifest.digest)}")
    if problems:
        raise BundleError(f"{path}: bundle verification failed:\n  " + "\n  ".join(problems))
    spec, _ = parse_spec(files["spec.toml"], str(path / "spec.toml"))
    warnings = _rederive(path, manifest, manifest_bytes, files, trust_digests)
    warnings = (*warnings, *_recipe_code(path, spec))
    return LoadedBundle(path=path, manifest=manifest, job=job, spec=spec, warnings=warnings)


def _recipe_code(path: Path, spec: Spec) -> tuple[str, ...]:
    """A recipe's folder (the spec's [experiment.recipe], found here as launch.sh finds it where the job
    runs) re-hashed against the files the bundle pins: a :class:`BundleError` naming each file changed,
    added or removed; a warning where the folder is not here (launch.sh checks it where the job starts)."""
    recipe = spec.experiment.recipe
    if recipe is None:
        return ()
    from tutorrl.compiler.pipeline.recipe_code import changes, folder_of, recipe_files

    folder = folder_of(recipe.path, spec.roots, os.environ)
    if folder is None or not os.path.isdir(folder):
        shown = recipe.path if folder in (None, recipe.path) else f"{recipe.path} ({folder})"
        return (f"the recipe folder {shown} is absent here, so its code was not checked against the "
                f"bundle's pin ({recipe.digest}); launch.sh checks it where the job starts",)
    found = changes(recipe.files, recipe_files(folder))
    if found:
        listed = "\n  ".join(found[:20]) + (f"\n  ... and {len(found) - 20} more" if len(found) > 20 else "")
        raise BundleError(f"{path}: the recipe code in {folder} changed after compile (the bundle pins "
                          f"{recipe.digest}):\n  {listed}\nrestore it, or compile the spec again")
    return ()


# A PEM private key is well under this; a file any larger is not one, and is not read.
_KEY_FILE_BYTES = 16 << 10
# The appended folders hold a few records per checkpoint and a few files per
# run; past this many entries the look for keys stops (it is a courtesy check).
_KEY_SCAN_ENTRIES = 20_000


def _private_keys(folder: Path, shown: str) -> list[str]:
    """Files under ``folder`` (runs/ or evidence/) that hold a PEM private key.

    A signing key kept in the bundle signs for whoever copies the bundle, so
    ``evidence keygen`` refuses to write one there; one put there by hand (or
    through a link) is named here. Only small regular files are read, never
    through a link, never a FIFO or device (the bounded reader refuses them).
    """
    import stat

    from tutorrl._read import ReadError, read_file

    found, seen = [], 0
    for root, dirs, names in os.walk(folder):
        dirs.sort()
        for name in sorted(names):
            seen += 1
            if seen > _KEY_SCAN_ENTRIES:
                return found
            full = os.path.join(root, name)
            try:
                st = os.lstat(full)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode) or st.st_size > _KEY_FILE_BYTES:
                continue
            try:
                data = read_file(full, _KEY_FILE_BYTES)
            except (OSError, ReadError):
                continue
            if b"PRIVATE KEY-----" in data and b"-----BEGIN" in data:
                found.append(os.path.join(shown, os.path.relpath(full, folder)))
    return found


# A bundle file is a few KiB; anything much larger was not written by tutorrl.
MAX_FILE_BYTES = 16 << 20


def _read_regular(path: Path) -> bytes:
    """A bundle file's bytes, through the one bounded reader (a link, FIFO, device or folder is refused)."""
    from tutorrl._read import ReadError, read_file

    try:
        return read_file(path, MAX_FILE_BYTES, name=path.name)
    except ReadError as exc:
        raise BundleError(str(exc)) from None


def _rederive(path: Path, manifest: Manifest, manifest_bytes: bytes, files: dict[str, bytes],
              trust_digests: bool) -> tuple[str, ...]:
    """Compile the bundle's own spec.toml again and require the very same bytes.

    Digests only prove the files are the ones the manifest names; anyone can
    reseal edited files. The compiler is deterministic, so what a bundle
    claims can be re-derived (as Nix re-derives a store path): every launch
    file and the manifest must come out byte for byte. The manifest's
    `compiler` field is the sealer's own claim, so it never decides whether
    to re-derive: a bundle that re-derives is proven whatever it claims (a
    release that emits the same launch keeps every bundle), and one that does
    not is refused -- tampered, or built by a release whose launch differs --
    unless the user accepts it on its digests alone.
    """
    from tutorrl import __version__
    from tutorrl.compiler.bundle.manifest import manifest_json
    from tutorrl.compiler.pipeline.compile import compile_bytes
    from tutorrl.errors import TutorrlError

    here = f"tutorrl {__version__}"
    try:
        compiled = compile_bytes(files["spec.toml"], str(path / "spec.toml"))
    except TutorrlError as exc:
        why = [f"spec.toml does not compile with {here}: {exc.render().splitlines()[0]}"]
    else:
        why = [f"{name} does not follow from spec.toml (recompiling the spec gives other bytes)"
               for name in CONTENT_FILES if compiled.files[name] != files[name]]
        if not why:
            if compiled.files[MANIFEST] == manifest_bytes:
                return ()
            # Provenance (the source files of a composed spec, a sweep's point)
            # is the compiler's record of its inputs, which spec.toml alone
            # cannot re-derive: the rest of the manifest must follow from it.
            bare = msgspec.structs.replace(manifest, sources={}, point={}, set=[])
            if manifest_json(bare) == compiled.files[MANIFEST]:
                return ()
            claimed = msgspec.structs.replace(bare, compiler=here)
            if manifest_json(claimed) == compiled.files[MANIFEST]:
                return (f"{path.name} says it was compiled by {manifest.compiler}; {here} re-derives the same "
                        "launch from its spec",)
            why = [f"{MANIFEST} does not follow from spec.toml (recompiling the spec gives other bytes)"]
    if manifest.compiler == here or not trust_digests:
        claim = "" if manifest.compiler == here else (
            f"; its manifest says {manifest.compiler!r} built it -- the sealer's claim, not proof: recompile its "
            f"spec with {here}, verify it with that release, or accept it on its digests alone with "
            f"--trust-digests ({TRUST_DIGESTS_ENV}=1)")
        raise BundleError(f"{path}: bundle verification failed:\n  " + "\n  ".join(why) + claim)
    return (f"{path.name} accepted on its digests alone (--trust-digests): {'; '.join(why)}; it says it was "
            f"compiled by {manifest.compiler}",)
