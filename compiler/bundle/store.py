"""Writing a bundle to disk: the one place the compiler touches the disk.

It never leaves a half bundle: files go to a temporary folder beside the final
one, which is renamed into place (not fsynced: see :func:`write_bundle`). Two
compiles of the same spec racing each other both end with the same, complete
folder.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import msgspec

from tutorrl import _files
from tutorrl.compiler.bundle.manifest import CompiledBundle, Manifest, manifest_json
from tutorrl.contract import CONTENT_FILES, MANIFEST
from tutorrl.errors import BundleError

if TYPE_CHECKING:
    from pathlib import Path


class WriteResult(msgspec.Struct, frozen=True):
    folder: str
    """The bundle folder: ``out_root`` as given, joined with the bundle id."""
    created: bool
    """False when the same bundle was already there (nothing was written)."""

    @property
    def path(self) -> Path:
        from pathlib import Path

        return Path(self.folder)


def write_bundle(compiled: CompiledBundle, out_root: str | Path, *, spec_dir: str | None = None,
                 rerecord: bool = False) -> WriteResult:
    """Write ``compiled`` under ``out_root/<id>/`` atomically.

    If the folder already exists with the same content, nothing is written.
    ``spec_dir``: the folder of the spec it was compiled from, where the
    sources an existing manifest records are read back (:func:`_refresh_provenance`).
    ``rerecord``: an existing manifest records this compile's provenance even
    where its record cannot be proved false here (``compile --rerecord``).
    Written with os alone: pathlib's import would be part of a cold compile.
    """
    root = os.fspath(out_root)
    final = os.path.join(root, compiled.id)
    if os.path.exists(final):
        _check_existing(final, compiled)
        _refresh_provenance(final, compiled, spec_dir, rerecord)
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


def _refresh_provenance(final: str, compiled: CompiledBundle, spec_dir: str | None = None,
                        rerecord: bool = False) -> None:
    """The same launch compiled from sources its manifest no longer tells truly (a base
    edited where it changes nothing the launch is given): its manifest says so.

    A launch may be held by several specs (a point two sweeps share, a point
    written out as a spec of its own). Its manifest records one of them, and
    keeps that record while it is still true, so compiling the holders in
    turn never rewrites it: otherwise each compile would flip it to its own
    sources, and ``tutorrl check`` and a diff of the bundles with it. The
    record is replaced only where it is empty or one of its source files,
    read from ``spec_dir``, now has another digest (recorded_still_true); a
    file not found there may be another folder's spec, and is no proof.
    ``tutorrl check``, which sees every spec, accepts the record of any spec
    that compiles to the bundle; where the record is no current spec's (its
    holder removed), it says to compile one holder with ``--rerecord``
    (``rerecord``), which replaces the record in place.

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
    if not rerecord and recorded_still_true(present, spec_dir, climbs=compiled.manifest.sources):
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


def recorded_still_true(manifest: Manifest, spec_dir: str | None, read=None, *, climbs=()) -> bool:
    """Whether ``manifest``'s provenance still tells one true way to this launch, as far as
    ``spec_dir`` shows: it names sources, each in the form the compiler writes,
    and none of them is there with another digest.

    ``read(path) -> bytes`` (default: the file on disk) raises OSError for a file not there.
    ``climbs``: the compile's own sources; a recorded source above ``spec_dir``
    (``../base.toml``) is read only where it is one of them, so a manifest
    never makes this read a file the compile did not read itself."""
    if not manifest.sources:
        return False  # a spec of one file, or none recorded: nothing to keep
    if not all(_plain_source(rel) for rel in manifest.sources):
        return False  # edited by hand: no spec records that, so no spec's record
    if spec_dir is None:
        return True
    from tutorrl.compiler.bundle.manifest import sha256

    from tutorrl._read import ReadError, read_file

    for rel, digest in manifest.sources.items():
        if rel.startswith("../") and rel not in climbs:
            continue  # another folder's base, as far as this spec shows: no proof
        path = os.path.join(spec_dir, rel)
        try:
            # A spec is at most 1 MiB (load.MAX_SPEC_BYTES); a FIFO or device there is no source.
            data = read(path) if read is not None else read_file(path, 1 << 20, follow=True)
        except (OSError, ReadError):
            continue
        if sha256(data) != digest:
            return False
    return True


def _plain_source(rel: str) -> bool:
    """Whether ``rel`` is a source path as the compiler records one: relative, in '/'
    form, normalised (so '..' only leads, for a base in a folder above), no NUL."""
    import posixpath

    return (bool(rel) and "\0" not in rel and "\\" not in rel and not rel.startswith("/")
            and posixpath.normpath(rel) == rel and rel not in (".", "..") and not rel.endswith("/.."))


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
