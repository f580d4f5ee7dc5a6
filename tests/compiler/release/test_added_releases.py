"""Releases a user added (`tutorrl keys add`): read after the packaged ones, never in their place,
and a closed range of the key map read for them as for the release before them.

The folders here are made from the packaged 0.9.1 data under another release's name (what `keys add`
writes for a release whose config did not change: tests/e2e/test_release_add.py makes one from a real
wheel); nothing is downloaded."""

from __future__ import annotations

import msgspec
import pytest

import support
from tutorrl.cli import main
from tutorrl.compiler.release import (
    available_keysets,
    forget_user_releases,
    load_built,
    load_keymap,
    load_keyset,
    load_lock,
    packaged_releases,
    supported_releases,
    user_releases,
)
from tutorrl.compiler.release.added import shadowed
from tutorrl.compiler.release.adding import extended_ranges, with_release
from tutorrl.compiler.release.keymap import Fact, build_lock
from tutorrl.compiler.release.keysets import KeyInfo
from tutorrl.compiler.release.release_diff import key_diff, place, report
from tutorrl.errors import SpecError

RELEASE_DIR = support.REPO / "compiler" / "release"


@pytest.fixture
def data(tmp_path, monkeypatch):
    monkeypatch.setenv("TUTORRL_DATA_DIR", str(tmp_path))
    forget_user_releases()
    yield tmp_path
    monkeypatch.undo()
    forget_user_releases()


def _as(data: bytes, old: str, new: str) -> bytes:
    return data.replace(f'"release": "{old}"'.encode(), f'"release": "{new}"'.encode())


def fake_release(root, release: str, source: str = "0.9.1", marker: bool = True, stack: bool = True):
    """The packaged ``source``'s key sets, built sections and locks as ``release``'s folder."""
    folder = root / "verl" / release
    for kind, packaged in (("keysets", "keysets"), ("built", "built"), ("lock", "keymap/lock")):
        (folder / kind).mkdir(parents=True)
        for variant in ("fsdp", "megatron"):
            data = (RELEASE_DIR / packaged / f"verl-{source}-{variant}.json").read_bytes()
            (folder / kind / f"verl-{release}-{variant}.json").write_bytes(_as(data, source, release))
    if stack:
        (folder / "stacks").mkdir()
        (folder / "stacks" / f"verl-{release}.toml").write_text(
            f'[release."{release}"]\nmodules = ["verl.trainer.main_ppo"]\nkey = ["verl", "torch"]\n'
            f'[release."{release}".engine.vllm]\nkey = ["vllm"]\n')
        (folder / "stacks" / f"verl-{release}-vllm.txt").write_text(f"# python: 3.11\nverl=={release}\ntorch==2.11.0\n")
    if marker:
        (folder / "release.toml").write_text(f'release = "{release}"\n')
    return folder


def test_an_added_release_is_read_after_the_packaged_ones(data):
    from tutorrl.compiler import compile_bytes
    from tutorrl.runtime.stack import stack_for

    fake_release(data, "0.9.2")
    forget_user_releases()
    assert user_releases() == ("0.9.2",) and "0.9.2" not in packaged_releases()
    assert supported_releases()[-2:] == ["0.9.1", "0.9.2"]
    keymap = load_keymap()
    assert keymap.releases[-1] == "0.9.2" and keymap.added == ("0.9.2",) and "0.9.2" not in keymap.packaged()
    assert load_lock("0.9.2", "fsdp").release == "0.9.2"
    assert load_keyset("0.9.2", "megatron").release == "0.9.2"
    assert ("0.9.2", "fsdp") in available_keysets()
    assert "actor_rollout_ref.actor" in load_built("0.9.2", "fsdp").sections
    stack = stack_for("0.9.2", "vllm")
    assert stack is not None and stack.pins == {"verl": "0.9.2", "torch": "2.11.0"}
    assert stack.constraints == data / "verl" / "0.9.2" / "stacks" / "verl-0.9.2-vllm.txt"
    spec = (support.SPECS / "chess_tutor_grpo.toml").read_text().replace('verl = "0.9.1"', 'verl = "0.9.2"')
    assert b"verl 0.9.2" in compile_bytes(spec.encode(), "spec.toml").files["launch.sh"]


def test_without_it_the_release_is_refused_naming_the_command(data):
    with pytest.raises(SpecError) as err:
        load_lock("0.9.2", "fsdp")
    assert "verl 0.9.2 is not supported" in err.value.problems[0].message
    assert "`tutorrl keys add 0.9.2`" in err.value.problems[0].hint


def test_a_packaged_release_is_never_shadowed(data, capsys):
    folder = fake_release(data, "0.9.1", source="0.9.0")  # 0.9.0's data under 0.9.1's name
    forget_user_releases()
    assert shadowed() == ("0.9.1",) and user_releases() == ()
    packaged = (RELEASE_DIR / "keymap" / "lock" / "verl-0.9.1-fsdp.json").read_bytes()
    assert load_lock("0.9.1", "fsdp") == msgspec.json.decode(packaged, type=type(load_lock("0.9.1", "fsdp")))
    assert load_keyset("0.9.1", "fsdp") == load_keyset("0.9.1", "fsdp")
    assert len(load_keyset("0.9.1", "megatron").keys) == 943  # the package's, not 0.9.0's
    assert supported_releases().count("0.9.1") == 1 and load_keymap().added == ()
    assert main(["keys", "list"]) == 0
    err = capsys.readouterr().err
    assert "verl 0.9.1 was added" in err and "now ships with tutorrl" in err and str(folder) in err
    # And `keys add` refuses a packaged release before reading anything.
    assert main(["keys", "add", "0.9.1", "--wheel", "no-such.whl"]) == 2
    assert "ships with tutorrl" in capsys.readouterr().err


def test_an_incomplete_or_staged_folder_is_no_release(data):
    fake_release(data, "0.9.3", marker=False)  # no release.toml: never finished
    staged = fake_release(data, "0.9.4")
    staged.rename(data / "verl" / ".0.9.4.abc123")  # a stage not yet renamed into place
    forget_user_releases()
    assert user_releases() == () and supported_releases()[-1] == "0.9.1"


def test_keys_add_refuses_what_it_cannot_add(data, capsys):
    fake_release(data, "0.9.2")
    forget_user_releases()
    assert main(["keys", "add", "0.9.2", "--wheel", "x.whl"]) == 2
    assert "verl 0.9.2 is already added" in capsys.readouterr().err
    assert main(["keys", "add", "0.9", "--wheel", "x.whl"]) == 2
    assert "'0.9' is not a verl release" in capsys.readouterr().err
    assert main(["keys", "add", "0.9.5", "--wheel", str(data / "none.whl")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["keys", "remove", "0.9.2"]) == 0
    assert user_releases() == () and not (data / "verl" / "0.9.2").exists()
    assert main(["keys", "remove", "0.9.2"]) == 2
    assert "verl 0.9.2 was not added" in capsys.readouterr().err


def test_a_closed_range_reaching_the_base_release_extends_to_an_added_one():
    """The rule (KeyMap.read_as): an added release reads every range as the newest packaged
    release before it does. A range ending at 0.9.1 holds for 0.9.2; one that ended at 0.9.0 does not."""
    keymap = with_release(load_keymap(), "0.9.2")
    facts = msgspec.structs.replace(keymap.facts, passthrough=keymap.facts.passthrough + (
        Fact(key="trainer.reaches_base", releases="0.6.0..0.9.1", read_by="test"),
        Fact(key="trainer.ended_before", releases="0.6.0..0.9.0", read_by="test")))
    keymap = msgspec.structs.replace(keymap, facts=facts)
    assert keymap.read_as("0.9.2") == "0.9.1" and keymap.read_as("0.9.1") == "0.9.1"
    keyset = load_keyset("0.9.1", "fsdp")
    lock = build_lock("0.9.2", "fsdp", keymap, msgspec.structs.replace(keyset, release="0.9.2"))
    assert "trainer.reaches_base" in lock.passthrough and "trainer.ended_before" not in lock.passthrough
    said = extended_ranges(keymap, "0.9.2")
    assert any("trainer.reaches_base (releases 0.6.0..0.9.1)" in s for s in said)
    assert not any("ended_before" in s for s in said)
    # A release between packaged ones reads as the one before it: 0.8.1 as 0.8.0.
    between = with_release(load_keymap(), "0.8.1")
    assert between.read_as("0.8.1") == "0.8.0"


def test_the_release_diff_names_moves_defaults_and_the_settings_that_need_a_timeline_entry():
    before = load_keyset("0.9.1", "fsdp")
    keys = dict(before.keys)
    keys["actor_rollout_ref.actor.optimizer_config.lr"] = keys.pop("actor_rollout_ref.actor.optim.lr")
    keys["trainer.total_epochs"] = KeyInfo(default=7, type="int")
    keys["trainer.brand_new"] = KeyInfo(default=True, type="bool")
    del keys["trainer.val_before_train"]
    after = msgspec.structs.replace(before, release="0.9.2", keys=keys)
    diff = key_diff(before, after)
    assert diff.moved == {"actor_rollout_ref.actor.optim.lr": "actor_rollout_ref.actor.optimizer_config.lr"}
    assert diff.added == ["trainer.brand_new"] and diff.removed == ["trainer.val_before_train"]
    assert diff.defaults == {"trainer.total_epochs": (30, 7)}
    keymap = with_release(load_keymap(), "0.9.2")
    lock, unplaced = place("0.9.2", "fsdp", keymap, after, diff.moved)
    # A setting whose key moved (the move named), and one whose key vanished.
    assert [u.setting for u in unplaced] == ["actor.lr", "trainer.val_before_train"]
    assert "actor.lr" not in lock.targets and "trainer.val_before_train" not in lock.targets
    assert "--move trainer.val_before_train=<its new key>" in lock.absent["trainer.val_before_train"]
    why = lock.absent["actor.lr"]
    assert "'actor_rollout_ref.actor.optimizer_config.lr'" in why
    assert "`tutorrl keys add 0.9.2 --move actor.lr=actor_rollout_ref.actor.optimizer_config.lr`" in why
    assert 'since."0.9.2" = "actor_rollout_ref.actor.optimizer_config.lr"' in why
    text = "\n".join(report("0.9.1", "0.9.2", {"fsdp": diff}, {"fsdp": []}, unplaced))
    assert "keys moved: 1" in text and "trainer.total_epochs: 30 -> 7" in text
    assert "spec settings that need a timeline entry: 2" in text


def test_a_move_places_the_setting_and_later_added_releases_keep_it(data):
    from tutorrl.compiler.release.adding import moves_toml, with_moves
    from tutorrl.errors import InputError

    before = load_keyset("0.9.1", "fsdp")
    keys = dict(before.keys)
    keys["actor_rollout_ref.actor.optimizer_config.lr"] = keys.pop("actor_rollout_ref.actor.optim.lr")
    after = msgspec.structs.replace(before, release="0.9.2", keys=keys)
    moves = {"actor.lr": "actor_rollout_ref.actor.optimizer_config.lr"}
    keymap = with_moves(with_release(load_keymap(), "0.9.2"), "0.9.2", moves)
    lock, unplaced = place("0.9.2", "fsdp", keymap, after, {})
    assert unplaced == [] and lock.targets["actor.lr"].key == "actor_rollout_ref.actor.optimizer_config.lr"
    with pytest.raises(InputError, match="no setting 'actor.lrr'") as err:
        with_moves(load_keymap(), "0.9.2", {"actor.lrr": "x"})
    assert "did you mean 'actor.lr'" in err.value.render()
    # Written beside the release's data, the entry is the map's from then on: 0.9.2 and a later added
    # release read the new key, the packaged releases the old one.
    folder = fake_release(data, "0.9.2")
    (folder / "keymap.toml").write_bytes(moves_toml("0.9.2", moves))
    fake_release(data, "0.9.3")
    forget_user_releases()
    setting = load_keymap().setting["actor.lr"]
    assert setting.at("0.9.3", "fsdp").key == setting.at("0.9.2", "megatron").key == moves["actor.lr"]
    assert setting.at("0.9.1", "fsdp").key == "actor_rollout_ref.actor.optim.lr"
