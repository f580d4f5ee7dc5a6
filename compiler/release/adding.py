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


def release_files(release: str, wheel: Path) -> ReleaseFiles:
    """Everything the compiler reads for ``release``, from its wheel; writes nothing."""
    keymap = with_release(load_keymap(), release)
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
    return ReleaseFiles(release, base, compared, files, report(compared, release, diffs, built, unplaced),
                        report(compared, release, diffs, built, unplaced, limit=None), unplaced,
                        extended_ranges(keymap, release))
