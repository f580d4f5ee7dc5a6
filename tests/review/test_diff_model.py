"""Sections of the structured diff that the golden pairs do not cover."""

from __future__ import annotations

from review_helpers import base, side, with_
from tutorrl.review.model import diff_sides
from tutorrl.review.render import render


def test_spec_field_that_reaches_no_verl_key():
    # evidence_callback = false passes nothing to verl (verl's default: no
    # callback): the spec says more, the launch is the same.
    d = diff_sides(side(base()), side(with_(base(), trainer__evidence_callback=False)))
    assert not d.same and not d.experiment and "launch.sh" not in d.files
    assert [(c.setting, c.change, c.old, c.new) for c in d.spec_only] == [
        ("trainer.evidence_callback", "added", None, False)]
    assert "Spec fields that reach no verl key" in render(d, "text")
    # From true to false, the launch does change: verl loses the callback key.
    d = diff_sides(side(with_(base(), trainer__evidence_callback=True)),
                   side(with_(base(), trainer__evidence_callback=False)))
    (c,) = d.experiment
    assert (c.setting, c.old, c.new) == ("trainer.evidence_callback", True, False)
    assert c.old_keys == ["trainer.checkpoint_callback_class"] and c.new_keys == [] and not d.spec_only


def test_unset_is_verls_default_and_the_diff_says_which():
    # Setting what base leaves unset, and unsetting what it sets: each side's
    # missing value is verl's default for that side's release (from its lock).
    old = with_(base(), data__max_prompt_length=1024)
    new = with_(base(), rollout__temperature=0.7)
    d = diff_sides(side(old), side(new))
    rows = {c.setting: (c.change, c.old, c.new, c.default) for c in d.experiment}
    assert rows == {"data.max_prompt_length": ("removed", 1024, None, 512),
                    "rollout.temperature": ("added", None, 0.7, 1.0)}
    text = render(d, "text")
    assert "- data.max_prompt_length: 1024 removed   [verl: data.max_prompt_length; now verl's default 512]" in text
    assert "+ rollout.temperature: 0.7 added   [verl: actor_rollout_ref.rollout.temperature; was verl's default 1.0]" in text
    # Unset resources are verl's defaults too, in the total.
    d = diff_sides(side(base()), side(with_(base(), resources={"reward_gpus": 1})))
    rows = {c.setting: (c.change, c.old, c.new, c.default) for c in d.resources}
    assert rows == {"resources.trainer_gpus_per_node": ("removed", 7, None, 8),
                    "resources.total_gpus": ("changed", 8, 9, None)}


def test_extra_overrides_and_env_set_values():
    old = with_(base(), verl__extra_overrides=["trainer.default_hdfs_dir=null"])
    new = with_(base(), verl__extra_overrides=["trainer.del_local_ckpt_after_load=true"],
                env__set={"TOKENIZERS_PARALLELISM": "true", "HF_HUB_OFFLINE": "1"})
    d = diff_sides(side(old), side(new))
    assert [(o.change, o.text) for o in d.extra_overrides] == [
        ("removed", "trainer.default_hdfs_dir=null"), ("added", "trainer.del_local_ckpt_after_load=true")]
    assert [(e.name, e.change, e.old, e.new, e.note) for e in d.environment] == [
        ("HF_HUB_OFFLINE", "added", None, "1", ""), ("TOKENIZERS_PARALLELISM", "changed", "false", "true", "")]


def test_unread_overrides_are_shown_apart_from_extra_overrides():
    # A fork's key ([verl] unread_overrides) changes the launch: the diff names it, in its own section.
    old = with_(base(), verl__unread_overrides=["+trainer.fork_only_knob=1"])
    new = with_(base(), verl__unread_overrides=["+trainer.fork_only_knob=2"])
    d = diff_sides(side(old), side(new))
    assert d.explained and d.extra_overrides == []
    assert [(o.change, o.text) for o in d.unread_overrides] == [
        ("removed", "+trainer.fork_only_knob=1"), ("added", "+trainer.fork_only_knob=2")]
    assert "launch.sh" in d.files
    from tutorrl.review.render import render

    shown = render(d, "text")
    assert "Unread overrides ([verl] unread_overrides" in shown and "+trainer.fork_only_knob=2" in shown


def test_reward_plugin_switch_and_what_each_plugin_fills():
    new = with_(base(), resources__reward_gpus=0, reward__plugin="chess-prompted",
                reward__options={"table": "data/chess/reward_table.json", "student_model": "models/student"})
    d = diff_sides(side(base()), side(new))
    first = d.reward[0]
    assert (first.setting, first.old, first.new) == ("reward.plugin", "chess-simulator", "chess-prompted")
    rows = {c.setting: c for c in d.reward}
    # Options one by one, said to be the plug-in's (the table is the same, so not shown).
    assert rows["reward.options.adapter"].change == "removed"
    assert rows["reward.options.student_model"].change == "added"
    assert rows["reward.options.student_model"].note == "option of reward plug-in chess-prompted"
    assert "reward.options.table" not in rows
    # What each plug-in fills, entry by entry with its verl key, and whose it is.
    module = rows["reward.module"]
    assert (module.old, module.new) == ("studentsim.tutor_rl._reward_entry", "studentsim.tutor_rl._prompted_reward_entry")
    assert module.note == "filled by reward plug-in chess-prompted (was chess-simulator)"
    assert rows["reward.kwargs.adapter_path"].change == "removed"
    assert rows["reward.kwargs.adapter_path"].note == "filled by reward plug-in chess-simulator"
    assert rows["reward.kwargs.student_model"].new_keys == ["+reward.custom_reward_function.reward_kwargs.student_model"]
    assert "reward.kwargs.reward_table" not in rows and "reward.workers" not in rows  # the same on both sides
    (noset,) = [e for e in d.environment if e.name == "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"]
    assert noset.change == "removed" and noset.note == "set by reward plug-in chess-simulator"
    text = render(d, "text")
    assert "- reward.kwargs.adapter_path" in text and "+ reward.kwargs.student_model" in text
    assert "~ reward.plugin: \"chess-simulator\" -> \"chess-prompted\"" in text


def test_what_the_user_sets_is_not_the_plugins():
    # The user's own reward.workers wins over the plug-in's and is not said to be the plug-in's.
    d = diff_sides(side(base()), side(with_(base(), reward__workers=3)))
    (c,) = d.reward
    assert (c.setting, c.old, c.new) == ("reward.workers", 1, 3)
    assert c.note == "was filled by reward plug-in chess-simulator"
    d = diff_sides(side(with_(base(), reward__workers=3)), side(with_(base(), reward__workers=2)))
    (c,) = d.reward
    assert (c.setting, c.old, c.new, c.note) == ("reward.workers", 3, 2, "")
    # The user's kwargs entries win one by one; the plug-in's other entries stay.
    d = diff_sides(side(base()), side(with_(base(), reward__kwargs={"device": "cpu"})))
    rows = {c.setting: (c.change, c.note) for c in d.reward}
    assert rows == {"reward.kwargs.device": ("changed", "was filled by reward plug-in chess-simulator")}


def test_config_name_and_path_are_the_release_section():
    d = diff_sides(side(base()), side(with_(base(), experiment__config_name="my_trainer",
                                            experiment__config_path="configs")))
    assert d.release is not None and not d.spec_only and not d.experiment
    assert (d.release.old_config, d.release.new_config) == ("ppo_trainer", "my_trainer")
    assert (d.release.old_config_path, d.release.new_config_path) == ("", "configs")
    text = render(d, "text")
    assert "config: --config-name ppo_trainer -> my_trainer" in text
    assert "config folder: (verl's own configs) -> --config-path configs" in text


def test_a_change_verl_takes_and_does_not_use_is_said():
    # verl 0.9.1's v1 trainer always balances the batch: trainer.balance_batch has no effect there.
    d = diff_sides(side(base()), side(with_(base(), trainer__balance_batch=False)))
    (c,) = [c for c in d.experiment if c.setting == "trainer.balance_batch"]
    assert c.new is False and c.note == "has no effect in verl 0.9.1 (fsdp)"
    assert "has no effect in verl 0.9.1 (fsdp)" in render(d, "text")
    # A setting the release uses carries no such note.
    d = diff_sides(side(base()), side(with_(base(), rollout__temperature=0.7)))
    assert [c.note for c in d.experiment] == [""]


def test_one_one_point_oh_and_true_are_three_values_and_table_order_is_none():
    """verl sees `scale=1`, `scale=1.0` and `scale=true` as an int, a float and a bool (Python's
    1 == 1.0 == True would call them equal); a table's key order reaches no launch."""
    from tutorrl.review.model import _same

    assert not _same(1, 1.0) and not _same(1, True) and not _same(1.0, True)
    assert _same({"a": 1, "b": [1, 2]}, {"b": [1, 2], "a": 1})
    values = {"int": 1, "float": 1.0, "bool": True}
    for old_kind, old in values.items():
        for new_kind, new in values.items():
            d = diff_sides(side(with_(base(), reward__kwargs={"scale": old})),
                           side(with_(base(), reward__kwargs={"scale": new})))
            assert d.same == (old_kind == new_kind), (old_kind, new_kind)
    d = diff_sides(side(with_(base(), reward__kwargs={"a": 1, "b": 2})),
                   side(with_(base(), reward__kwargs={"b": 2, "a": 1})))
    assert d.same
