"""Golden outputs of `tutorrl diff` for the changes reviewers see most.

Bundle ids and digests are masked (see ``review_helpers.masked``): the files
guard how a diff reads, not the compiler's bytes. Regenerate with
TUTORRL_REGEN_GOLDEN=1 and review the change like code.
"""

from __future__ import annotations

import json
import sys

import msgspec
import pytest

from review_helpers import base, check_golden, side, with_
from tutorrl.compiler.release import keymap as keymap_module
from tutorrl.review.model import diff_sides
from tutorrl.review.render import render

FORMATS = {"text": "txt", "markdown": "md", "json": "json"}


def _pair(name: str):
    b = base()
    if name == "setting-changed":
        return b, with_(b, actor__lr=2e-6)
    if name == "secret-added":
        return b, with_(b, env__passthrough=["WANDB_API_KEY"], trainer__loggers=["console", "wandb"])
    if name == "gpus-changed":
        # 8 trainer GPUs and a second reward GPU: the layout a bigger box allows.
        return b, with_(b, resources__trainer_gpus_per_node=8, resources__reward_gpus=2,
                        reward__options__device="cuda:8")
    if name == "setting-unset":
        # One setting unset (back to verl's default), one set that was verl's default.
        return with_(b, data__max_prompt_length=1024), with_(b, rollout__temperature=0.7)
    if name == "nothing-changed":
        # Reordered, and the plug-in's defaults spelled out: the same launch.
        new = with_(b, reward__options__mate_clip_cp=1000, reward__options__alpha_style=0.5)
        new["data"] = dict(reversed(list(new["data"].items())))
        return b, new
    raise KeyError(name)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", ["setting-changed", "setting-unset", "secret-added", "gpus-changed",
                                  "nothing-changed"])
def test_golden(name, fmt):
    old, new = _pair(name)
    diff = diff_sides(side(old, "old.toml"), side(new, "new.toml"))
    assert diff.same is (name == "nothing-changed")
    check_golden(f"{name}.{FORMATS[fmt]}", render(diff, fmt))


def test_secret_values_never_shown():
    old, new = _pair("secret-added")
    for fmt in FORMATS:
        out = render(diff_sides(side(old), side(new)), fmt)
        assert "WANDB_API_KEY" in out
    diff = json.loads(render(diff_sides(side(old), side(new)), "json"))
    (entry,) = [e for e in diff["environment"] if e["name"] == "WANDB_API_KEY"]
    assert entry == {"name": "WANDB_API_KEY", "kind": "passthrough", "change": "added"}


# ------------------------------------------------------------- retargeting

# A fictional release, older than any real one, with the reward moved to the
# top level as verl had it before 0.7: a move whose output does not depend on
# how the real key map evolves. Its lock is 0.9.1's with those keys moved.
FAKE = "0.0.1"
_MOVED = {
    "reward.module": ("custom_reward_function.path", "plain"),
    "reward.function": ("custom_reward_function.name", "plain"),
    "reward.kwargs": ("custom_reward_function.reward_kwargs", "plain"),
}


@pytest.fixture
def fake_release(monkeypatch):
    real = keymap_module.load_lock

    def load_lock(release, variant, entry=None):
        lock = real("0.9.1" if release == FAKE else release, variant, entry)
        if release != FAKE:
            return lock
        targets = dict(lock.targets)
        for name, (key, spelling) in _MOVED.items():
            targets[name] = msgspec.structs.replace(targets[name], key=key, spelling=spelling)
        return msgspec.structs.replace(lock, release=FAKE, targets=targets, ignored=())

    import tutorrl.compiler.release as release_face

    for module in [release_face, *(m for n, m in sorted(sys.modules.items()) if n.startswith("tutorrl."))]:
        if getattr(module, "load_lock", None) is real:  # the face caches it too
            monkeypatch.setattr(module, "load_lock", load_lock)
    return FAKE


@pytest.mark.parametrize("fmt", FORMATS)
def test_golden_retargeted(fake_release, fmt):
    old = with_(base(), experiment__verl=fake_release)
    diff = diff_sides(side(old, "old.toml"), side(base(), "new.toml"))
    assert diff.release is not None and diff.release.moved
    # The fictional release has a reward worker pool (its lock is 0.9.1's with
    # the reward moved), so the plug-in fills the same settings on both sides.
    assert not diff.experiment and not diff.resources and not diff.reward, "a retarget changes keys, not settings"
    check_golden(f"retargeted.{FORMATS[fmt]}", render(diff, fmt))


def test_golden_compiler_changed(tmp_path):
    """Only launch.sh differs (a new compiler): the raw file diff is the last resort.
    This tutorrl cannot re-derive the other release's bundle: the reviewer accepts it on its digests."""
    import shutil

    from tutorrl.compiler import compile_bytes, write_bundle
    from tutorrl.compiler.bundle.manifest import reseal
    from tutorrl.review.sides import bundle_side
    from review_helpers import toml_bytes

    compiled = compile_bytes(toml_bytes(base()), "spec.toml")
    old = write_bundle(compiled, tmp_path / "a").path
    # What a later tutorrl might write for the same spec: one more comment line.
    launch = compiled.files["launch.sh"].replace(b"set -euo pipefail\n", b"set -euo pipefail\n# new\n")
    new = write_bundle(reseal(compiled, launch_sh=launch), tmp_path / "b").path
    diff = diff_sides(bundle_side(old, "a", trust_digests=True), bundle_side(new, "b", trust_digests=True))
    assert not diff.same and not diff.explained
    assert diff.files == ["launch.sh", "ray-job.json"]
    assert "+# new" in diff.file_diffs["launch.sh"]
    check_golden("compiler-changed.txt", render(diff, "text"))
    shutil.rmtree(tmp_path)
