"""The compiler's part of ``tutorrl keys add``: a verl release's key sets, built sections,
locks and release diff, derived from its wheel as files (written by :mod:`tutorrl.release_add`).

The key sets are composed by ``tutorrl keys import``'s code, the built
sections by ``tools/built_sections.py``'s, and the locks by ``tutorrl keys
lock``'s from the packaged key map with the release added: its ranges read
as its base release reads them (:meth:`KeyMap.read_as`), and a setting whose
key the release lacks made absent there with the timeline entry it needs
(:func:`release_diff.place`).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import msgspec

from tutorrl.compiler.release.built import Built, load_built
from tutorrl.compiler.release.built_import import WheelSource, built_sections, encode_built
from tutorrl.compiler.release.keymap import KeyMap, encode_lock, load_keymap, release_tuple
from tutorrl.compiler.release.keyset_import import encode_keyset, extract_config, keysets_from_config_dir
from tutorrl.compiler.release.keysets import VARIANTS, load_keyset
from tutorrl.compiler.release.release_diff import Unplaced, built_diff, key_diff, place, report
from tutorrl.errors import InputError, Problem


class ReleaseFiles(msgspec.Struct):
    release: str
    base: str            # the newest packaged release before it: its ranges and its stack record
    compared: str        # the newest release before it, packaged or added: the diff's
    # Path under the release's folder (keysets/..., built/..., lock/...) -> bytes.
    files: dict[str, bytes]
    summary: list[str]   # the release diff, a few keys per list
    full: list[str]      # the release diff, every key
    unplaced: list[Unplaced]
    ranges: list[str]    # the closed ranges taken to reach the release


def with_release(keymap: KeyMap, release: str) -> KeyMap:
    """The key map with ``release`` added as a user release."""
    return msgspec.structs.replace(keymap, releases=sorted([*keymap.releases, release], key=release_tuple),
                                   added=(*keymap.added, release))


def extended_ranges(keymap: KeyMap, release: str) -> list[str]:
    """The closed ranges an added ``release`` is taken to fall in because they reach its base
    release (KeyMap.read_as): said, since verl may have changed there."""
    base = keymap.read_as(release)
    if release_tuple(release) <= release_tuple(base):
        return []

    def reaches(span: str) -> bool:
        high = span.split("..", 1)[1] if ".." in span else span
        return bool(high) and release_tuple(high) == release_tuple(base)

    out = [f"keymap/passthrough.toml [[{kind}]] {f.key} (releases {f.releases}) is taken to hold for {release} "
           f"as for {base}" for kind, facts in (("passthrough", keymap.facts.passthrough),
                                                ("undeclared", keymap.facts.undeclared))
           for f in facts if reaches(f.releases)]
    out += [f"keymap/verl.toml [[ignored]] {', '.join(i.keys)} (releases {i.releases}) is taken to hold for "
            f"{release} as for {base}" for i in keymap.ignored if reaches(i.releases)]
    return out


def with_moves(keymap: KeyMap, release: str, moves: dict[str, str]) -> KeyMap:
    """The key map with a timeline entry ``since."release" = key`` per setting of ``moves``."""
    unknown = sorted(set(moves) - set(keymap.setting))
    if unknown:
        import difflib

        raise InputError([Problem(f"--move {name}=...: the key map has no setting {name!r}", hint=(
            f"did you mean {near[0]!r}?" if (near := difflib.get_close_matches(name, keymap.setting, n=1))
            else "a setting is a spec field's dotted path, e.g. actor.lr")) for name in unknown])
    settings = dict(keymap.setting)
    for name, key in moves.items():
        since = dict(settings[name].since)
        since[release] = key
        settings[name] = msgspec.structs.replace(settings[name], since=since)
    return msgspec.structs.replace(keymap, setting=settings)


def moves_toml(release: str, moves: dict[str, str]) -> bytes:
    """The added release's own timeline entries, which later added releases read too (load_keymap)."""
    import json

    lines = [f"# Timeline entries `tutorrl keys add {release} --move` gave: they hold from {release} until the "
             "next entry, as the key map's own do."]
    for name, key in sorted(moves.items()):
        lines += [f"[setting.{json.dumps(name)}]", f"since.{json.dumps(release)} = {json.dumps(key)}"]
    return ("\n".join(lines) + "\n").encode()


def release_files(release: str, wheel: Path, moves: dict[str, str] | None = None) -> ReleaseFiles:
    """Everything the compiler reads for ``release``, from its wheel; writes nothing. ``moves``:
    setting -> its key from this release on (timeline entries the packaged map lacks)."""
    keymap = with_moves(with_release(load_keymap(), release), release, moves or {})
    base = keymap.read_as(release)
    earlier = [r for r in keymap.releases if release_tuple(r) < release_tuple(release)]
    compared = earlier[-1] if earlier else base
    with tempfile.TemporaryDirectory(prefix="tutorrl-keys-") as tmp:
        keysets = {ks.variant: ks for ks in keysets_from_config_dir(extract_config(wheel, Path(tmp)), release)}
    source = WheelSource.from_wheel(wheel)
    files: dict[str, bytes] = {}
    diffs, built, unplaced = {}, {}, []
    for variant in VARIANTS:
        keyset = keysets[variant]
        name = f"verl-{release}-{variant}.json"
        files[f"keysets/{name}"] = encode_keyset(keyset)
        sections = built_sections(source, keyset)
        if sections:  # as tools/built_sections.py: a release that builds nothing has no file
            files[f"built/{name}"] = encode_built(release, variant, sections)
        diffs[variant] = key_diff(load_keyset(compared, variant), keyset)
        mine = msgspec.convert({"schema": "tutorrl.built/1", "release": release, "variant": variant,
                                "sections": sections}, Built)
        built[variant] = built_diff(load_built(compared, variant), mine)
        lock, gone = place(release, variant, keymap, keyset, diffs[variant].moved)
        unplaced += gone
        files[f"lock/{name}"] = encode_lock(lock)
    if moves:
        files["keymap.toml"] = moves_toml(release, moves)
    return ReleaseFiles(release, base, compared, files, report(compared, release, diffs, built, unplaced),
                        report(compared, release, diffs, built, unplaced, limit=None), unplaced,
                        extended_ranges(keymap, release))
