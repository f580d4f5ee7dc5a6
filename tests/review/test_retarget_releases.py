"""Retargeting a spec between real releases of the key map.

Picks the oldest and newest releases of ``load_keymap().releases`` that the
example compiles for, so moves are exercised with whatever releases the key
map supports; with a single release the refusal of an unmapped one is checked
instead (so the test never skips silently).
"""

from __future__ import annotations

import pytest

from review_helpers import base, side, with_
from tutorrl.compiler.pipeline.resolve import resolve
from tutorrl.compiler.release import keymap as keymap_module
from tutorrl.compiler.release.keymap import load_keymap
from tutorrl.compiler.spec.flat import settings, variant_of
from tutorrl.errors import SpecError
from tutorrl.review.model import diff_sides


def _compiles(release: str) -> bool:
    try:
        side(with_(base(), experiment__verl=release))
    except SpecError:
        return False
    return True


def test_retarget_between_real_releases():
    releases = [r for r in load_keymap().releases if _compiles(r)]
    if len(releases) < 2:
        with pytest.raises(SpecError, match="not supported"):
            side(with_(base(), experiment__verl="0.0.1"))
        return
    old_release, new_release = releases[0], releases[-1]
    old, new = side(with_(base(), experiment__verl=old_release)), side(base() | {"experiment": {
        **base()["experiment"], "verl": new_release}})
    d = diff_sides(old, new)
    assert d.release is not None
    assert (d.release.old, d.release.new) == (old_release, new_release)
    # Same spec: the only settings that change are those the reward plug-in
    # fills per release (e.g. reward workers, where verl has a pool to size);
    # each is said to be the plug-in's.
    a, b = dict(settings(old.spec)), dict(settings(new.spec))
    differ = {s for s in a.keys() | b.keys() if s not in a or s not in b or a[s] != b[s]}
    assert not d.experiment and not d.resources
    assert {c.setting for c in d.reward} == differ
    assert all(c.note == "filled by reward plug-in chess-simulator" for c in d.reward)
    # The moves are exactly the settings the compiler writes to other keys (or
    # spells otherwise) in the two releases: its own overrides are the oracle.
    wa, wb = _written(old), _written(new)
    expected = {s for s in wa.keys() & wb.keys() if wa[s] != wb[s]}
    assert expected, "two releases this far apart move some key"
    assert {m.table or m.setting for m in d.release.moved} == expected


def _written(side) -> dict[str, set]:
    """{setting: {(key as written, spelling)}} of the overrides the compiler emits for a side."""
    lock = keymap_module.load_lock(side.manifest.verl, variant_of(side.spec))
    resolved, problems = resolve(side.spec, lock)
    assert problems == []
    out: dict[str, set] = {}
    for o in resolved.overrides:
        if o.setting != "variant":
            out.setdefault(o.setting, set()).add((("+" if o.append else "") + o.key, o.spelling))
    return out


def test_unsupported_release_is_refused():
    with pytest.raises(SpecError, match="not supported"):
        side(with_(base(), experiment__verl="0.0.1"))


def test_a_change_of_entry_point_is_said_with_its_module_and_config():
    from tutorrl.review.render import render

    ppo = side(with_(base(), experiment__verl="0.9.1"))
    fa = side(base() | {"experiment": {**base()["experiment"], "verl": "0.9.1", "entry": "fully_async"}})
    d = diff_sides(ppo, fa)
    assert d.release is not None and d.release.old == d.release.new == "0.9.1"
    assert (d.release.old_entry, d.release.new_entry) == ("", "verl.experimental.fully_async_policy.fully_async_main")
    assert (d.release.old_config, d.release.new_config) == ("ppo_trainer", "fully_async_ppo_trainer")
    text = render(d, "text")
    assert ("entry point: python -m verl.trainer.main_ppo -> "
            "python -m verl.experimental.fully_async_policy.fully_async_main") in text
    # The same entry on both sides says nothing of it.
    assert diff_sides(fa, fa).release is None
