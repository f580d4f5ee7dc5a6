"""Retargeting a spec between real releases of the key map.

Picks the oldest and newest releases of ``load_keymap().releases`` that the
example compiles for, so moves are exercised with whatever releases the key
map supports; with a single release the refusal of an unmapped one is checked
instead (so the test never skips silently).
"""

from __future__ import annotations

import pytest

from review_helpers import base, side, with_
from tutorrl.compiler import keymap as keymap_module
from tutorrl.compiler.keymap import load_keymap
from tutorrl.compiler.settings import settings, variant_of
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
    # Same settings: only keys move, so no setting is reported as changed.
    assert not d.experiment and not d.reward and not d.resources
    # The moves are exactly the settings whose target differs in the key map.
    a = keymap_module.load_lock(old_release, variant_of(old.spec))
    b = keymap_module.load_lock(new_release, variant_of(new.spec))
    expected = {s for s, _ in settings(new.spec) if a.target(s) != b.target(s)}
    assert {m.setting for m in d.release.moved} == expected


def test_unsupported_release_is_refused():
    with pytest.raises(SpecError, match="not supported"):
        side(with_(base(), experiment__verl="0.0.1"))
