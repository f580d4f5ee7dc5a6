"""Sections of the structured diff that the golden pairs do not cover."""

from __future__ import annotations

from review_helpers import base, side, with_
from tutorrl.review.model import diff_sides
from tutorrl.review.render import render


def test_spec_field_that_reaches_no_verl_key():
    # LoRA rank 0 is a full fine-tune: alpha is in spec.toml but never sent to verl.
    d = diff_sides(side(base()), side(with_(base(), model__lora={"alpha": 32})))
    assert not d.same and not d.experiment
    assert [(c.setting, c.old, c.new) for c in d.spec_only] == [("model.lora.alpha", 16, 32)]
    assert "Spec fields that reach no verl key" in render(d, "text")


def test_extra_overrides_and_env_set_values():
    old = with_(base(), verl__extra_overrides=["trainer.default_hdfs_dir=null"])
    new = with_(base(), verl__extra_overrides=["trainer.val_before_train=true"],
                env__set={"TOKENIZERS_PARALLELISM": "true", "HF_HUB_OFFLINE": "1"})
    d = diff_sides(side(old), side(new))
    assert [(o.change, o.text) for o in d.extra_overrides] == [
        ("removed", "trainer.default_hdfs_dir=null"), ("added", "trainer.val_before_train=true")]
    assert [(e.name, e.change, e.old, e.new) for e in d.environment] == [
        ("HF_HUB_OFFLINE", "added", None, "1"), ("TOKENIZERS_PARALLELISM", "changed", "false", "true")]


def test_reward_kind_and_compiler_set_env():
    new = with_(base(), resources__reward_gpus=0, reward__kind="prompted",
                reward__prompted={"student_model": "models/student"})
    del new["reward"]["simulator"]
    d = diff_sides(side(base()), side(new))
    assert d.reward[0].setting == "reward.kind" and (d.reward[0].old, d.reward[0].new) == ("simulator", "prompted")
    assert {c.setting for c in d.reward} >= {"reward.module", "reward.kwargs.student_model",
                                            "reward.kwargs.adapter_path"}
    (noset,) = [e for e in d.environment if e.name == "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"]
    assert noset.change == "removed" and noset.note == "set by tutorrl"
    text = render(d, "text")
    assert "- reward.kwargs.adapter_path" in text and "+ reward.kwargs.student_model" in text
