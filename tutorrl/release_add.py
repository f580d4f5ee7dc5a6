"""``tutorrl keys add X.Y.Z`` / ``keys remove X.Y.Z``: a verl release the package does not ship, in one command.

From the release's wheel (``--wheel``, else pip's download into the wheel
cache) it writes what the package holds for each of its own releases into
the user's data folder (:mod:`tutorrl._overlay`), never the installed package:

* ``keysets/`` -- both variants' key sets, composed by ``tutorrl keys import``'s code;
* ``built/`` -- the sections verl builds into dataclasses and their fields
  (``tools/built_sections.py``'s code), so a ``+`` key such a class refuses
  is refused at compile time;
* ``lock/`` -- both locks, from the packaged key map with the release added
  (its ranges read as the base release reads them: KeyMap.read_as); a setting
  whose key the release lacks is absent there, with the timeline entry it needs;
* ``stacks/`` -- a stack record derived from the base release's
  (runtime/stack_derive.py), so the run preflight checks the job's Python;
* ``diff.txt`` (the whole release diff) and ``release.toml`` (what it was made
  from; its presence marks a complete release).

Everything is staged in a hidden folder beside the release's and renamed into
place at the end: a failed add leaves nothing. It imports both the compiler
and the runtime (the stack record is the runtime's data), so it lives in the
core package, as the API does.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from pathlib import Path

import msgspec

from tutorrl import _overlay
from tutorrl._files import fsync_dir
from tutorrl.contract import DATA_DIR_ENV
from tutorrl.errors import InputError, Problem

# What a spec's experiment.verl may say (compiler/spec/structs.py); a folder has no other name.
_PATTERN = r"^[0-9]+\.[0-9]+\.[0-9]+(\.post[0-9]+)?\Z"


def _refuse(message: str, hint: str | None = None) -> InputError:
    return InputError([Problem(message, hint=hint)])


def _check_release(release: str) -> None:
    import re

    if not re.match(_PATTERN, release):
        raise _refuse(f"{release!r} is not a verl release tutorrl can target",
                      "a release such as 0.9.2 (what a spec's experiment.verl says)")


def _record(release: str, base: str, compared: str, wheel: Path, digest: str, ranges: list[str],
            warnings: list[str], unplaced: list[str], stack: str) -> bytes:
    import tomli_w

    from tutorrl import __version__

    data = {"schema": "tutorrl.added-release/1", "release": release, "base": base, "diff_against": compared,
            "wheel": wheel.name, "wheel_sha256": digest, "tutorrl": __version__, "stack": stack,
            "extended_ranges": ranges, "unplaced": unplaced, "warnings": warnings}
    return tomli_w.dumps(data).encode()


def _write(folder: Path, name: str, data: bytes) -> None:
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = folder / name
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.chmod(path, 0o644)


def add_release(release: str, wheel: Path | None = None, wheel_cache: Path | None = None,
                moves: dict[str, str] | None = None) -> tuple[Path, list[str], list[str]]:
    """Add ``release``: (its folder, the release diff's lines, the warnings)."""
    import zipfile

    from tutorrl.compiler.release import fetch_wheel, forget_user_releases, packaged_releases, release_files
    from tutorrl.runtime import derive_stack, wheel_requirements

    _check_release(release)
    if release in packaged_releases():
        raise _refuse(f"verl {release} ships with tutorrl: its key sets, locks and stack record are the package's "
                      "and an added release never replaces them", f"a spec with verl = \"{release}\" compiles as it is")
    final = Path(_overlay.release_dir(release))
    if final.exists():
        raise _refuse(f"verl {release} is already added ({final})",
                      f"`tutorrl keys remove {release}` first to add it again")
    if wheel is None:
        wheel = fetch_wheel(release, wheel_cache)
    elif not wheel.is_file():
        raise _refuse(f"--wheel {wheel}: no such file")
    try:
        version, _ = wheel_requirements(wheel)
    except (OSError, zipfile.BadZipFile) as exc:
        raise _refuse(f"--wheel {wheel}: not a readable wheel ({exc})") from None
    if version != release:
        raise _refuse(f"{wheel.name} is verl {version or 'of no version'}, not {release}",
                      f"give the wheel of verl {release}, or run `tutorrl keys add {version}`" if version else None)
    made = release_files(release, wheel, moves)
    files, stack_warnings, derived = derive_stack(release, made.base, wheel)
    warnings = made.ranges + [u.why(release) for u in made.unplaced] + stack_warnings
    root = Path(_overlay.releases_dir())
    stage = None
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=f".{release}.", dir=root))
        for path, data in sorted({**made.files, **{f"stacks/{n}": d for n, d in files.items()}}.items()):
            folder, _, name = path.rpartition("/")
            _write(stage / folder, name, data)
        _write(stage, "diff.txt", ("\n".join(made.full) + "\n").encode())
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        # The marker last: a folder without it is never read (and the rename below publishes all at once).
        _write(stage, _overlay.MARKER, _record(release, made.base, made.compared, wheel, digest, made.ranges,
                                               warnings, [u.setting for u in made.unplaced], derived))
        os.chmod(stage, 0o700)
        os.rename(stage, final)
        fsync_dir(root)
    except BaseException as exc:
        if stage is not None:
            shutil.rmtree(stage, ignore_errors=True)
        if isinstance(exc, OSError):
            raise _refuse(f"verl {release} was not added: writing {exc.filename or root} failed "
                          f"({exc.strerror or exc}); nothing of it was left",
                          f"{DATA_DIR_ENV} chooses another data folder") from None
        raise
    forget_user_releases()
    return final, made.summary, warnings


def remove_release(release: str) -> Path:
    """Remove an added release (renamed aside first, so it is never half there)."""
    from tutorrl.compiler.release import forget_user_releases

    _check_release(release)
    final = Path(_overlay.release_dir(release))
    if not final.is_dir():
        raise _refuse(f"verl {release} was not added (no {final})",
                      "`tutorrl keys list` shows the added releases")
    try:
        aside = Path(tempfile.mkdtemp(prefix=f".{release}.removed.", dir=final.parent))
        os.rename(final, aside / release)
    except OSError as exc:
        raise _refuse(f"verl {release} was not removed: {exc.strerror or exc} ({exc.filename or final})") from None
    shutil.rmtree(aside, ignore_errors=True)
    forget_user_releases()
    return final


def _moves(given: list[str]) -> dict[str, str]:
    moves = {}
    for text in given:
        name, eq, key = text.partition("=")
        if not (eq and name.strip() and key.strip()):
            raise _refuse(f"--move {text!r}: expected SETTING=KEY",
                          "e.g. --move actor.lr=actor_rollout_ref.actor.optim.lr")
        moves[name.strip()] = key.strip()
    return moves


class AddedRelease(msgspec.Struct, frozen=True):
    """What ``tutorrl keys add`` wrote: the release's folder, the report's lines, its warnings, how long it took."""

    release: str
    folder: str
    lines: list[str]
    warnings: list[str]
    seconds: float


def add_keys(release: str, *, wheel: str | None = None, moves: list[str] | tuple[str, ...] = (),
             wheel_cache: str | None = None) -> AddedRelease:
    """A verl release added to the user's data folder (``moves``: ``SETTING=KEY`` for keys it renamed)."""
    started = time.monotonic()
    moved = _moves(list(moves))
    folder, lines, warnings = add_release(release, Path(wheel).expanduser() if wheel else None,
                                          Path(wheel_cache) if wheel_cache else None, moved)
    return AddedRelease(release, str(folder), list(lines), list(warnings), time.monotonic() - started)
