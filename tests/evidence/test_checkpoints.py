import json

import pytest

from evidence_helpers import make_fsdp_step
from tutorrl.evidence.checkpoints import find_step_dirs, inspect_step, read_tracker, tracker_checks


def _status(checks, cid):
    return {c.id: c.status for c in checks}[cid]


@pytest.mark.parametrize("text,step", [("40", 40), ("40\n", 40), (" 7 \n", 7), ("release", None), ("+4", None), ("", None)])
def test_tracker_parsing(tmp_path, text, step):
    (tmp_path / "latest_checkpointed_iteration.txt").write_text(text)
    t = read_tracker(tmp_path)
    assert t.present and t.step == step


def test_tracker_against_directories(tmp_path):
    make_fsdp_step(tmp_path, 2)
    make_fsdp_step(tmp_path, 4)
    assert [s.step for s in find_step_dirs(tmp_path)] == [2, 4]
    t = read_tracker(tmp_path)
    assert _status(tracker_checks(tmp_path, t, 4), "tracker.agrees") == "pass"
    assert _status(tracker_checks(tmp_path, t, 2), "tracker.agrees") == "skipped"  # names a later step
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("2")
    assert _status(tracker_checks(tmp_path, read_tracker(tmp_path), 4), "tracker.agrees") == "fail"
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("9")
    assert _status(tracker_checks(tmp_path, read_tracker(tmp_path), 4), "tracker.target_exists") == "fail"
    (tmp_path / "latest_checkpointed_iteration.txt").unlink()
    assert _status(tracker_checks(tmp_path, read_tracker(tmp_path), 4), "tracker.agrees") == "skipped"
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("release")
    assert _status(tracker_checks(tmp_path, read_tracker(tmp_path), 4), "tracker.agrees") == "fail"


def test_fsdp_complete_and_incomplete(tmp_path):
    d = make_fsdp_step(tmp_path, 1, world=4)
    roles, checks = inspect_step(d)
    assert roles[0].layout == "fsdp" and roles[0].world_size == 4
    assert _status(checks, "layout.actor") == "pass" and _status(checks, "checkpoint.dataloader_state") == "pass"
    (d / "actor" / "optim_world_size_4_rank_2.pt").unlink()
    (d / "actor" / "model_world_size_4_rank_3.pt").write_bytes(b"")
    _, checks = inspect_step(d)
    detail = {c.id: c.detail for c in checks}["layout.actor"]
    assert _status(checks, "layout.actor") == "fail" and "optim_world_size_4_rank_{2}" in detail and "empty" in detail
    (d / "actor" / "model_world_size_2_rank_0.pt").write_bytes(b"x")
    (d / "data.pt").unlink()
    _, checks = inspect_step(d)
    assert "world size 2" in {c.id: c.detail for c in checks}["layout.actor"]
    assert _status(checks, "checkpoint.dataloader_state") == "fail"


def test_fsdp_without_huggingface_dir_or_config(tmp_path):
    d = make_fsdp_step(tmp_path, 1, hf=False)
    import shutil

    shutil.rmtree(d / "actor" / "huggingface")
    (d / "actor" / "fsdp_config.json").write_text("{}")
    _, checks = inspect_step(d)
    detail = {c.id: c.detail for c in checks}["layout.actor"]
    assert "huggingface/" in detail and "world_size" in detail


def _megatron(tmp_path, missing=False, escape=False):
    role = tmp_path / "global_step_3" / "actor"
    for sub in ("model/dist_ckpt", "model/huggingface", "optimizer/dist_ckpt", "extra/dist_ckpt"):
        (role / sub).mkdir(parents=True)
    (role / "transformer_config.json").write_text("{}")
    contents = {
        "model": {"path": "model/dist_ckpt", "format": "dist_ckpt"},
        "optimizer": {"path": "optimizer/dist_ckpt", "format": "dist_ckpt"},
        "transformer_config": {"path": "transformer_config.json", "format": "json"},
        "rng_state": {"path": "extra/dist_ckpt", "format": "dist_ckpt"},
    }
    if missing:
        contents["hf_model"] = {"path": "model/huggingface/model.safetensors", "format": "safetensors"}
    if escape:
        contents["x"] = {"path": "../../etc", "format": "?"}
    (role / "ckpt_contents.json").write_text(json.dumps({
        "schema_version": 2, "framework": "megatron", "world_size": 8, "contents": contents,
        "directories": {"model": "weights"},
    }))
    (tmp_path / "global_step_3" / "data.pt").write_bytes(b"d")
    return tmp_path / "global_step_3"


def test_megatron_v2(tmp_path):
    roles, checks = inspect_step(_megatron(tmp_path / "ok"))
    assert roles[0].layout == "megatron-v2" and roles[0].world_size == 8 and _status(checks, "layout.actor") == "pass"
    _, checks = inspect_step(_megatron(tmp_path / "missing", missing=True))
    assert _status(checks, "layout.actor") == "fail"
    _, checks = inspect_step(_megatron(tmp_path / "escape", escape=True))
    assert "leaves the checkpoint" in {c.id: c.detail for c in checks}["layout.actor"]


def test_megatron_v1_is_skipped_not_passed(tmp_path):
    (tmp_path / "global_step_1" / "actor" / "dist_ckpt").mkdir(parents=True)
    (tmp_path / "global_step_1" / "data.pt").write_bytes(b"d")
    roles, checks = inspect_step(tmp_path / "global_step_1")
    assert roles[0].layout == "megatron-v1" and _status(checks, "layout.actor") == "skipped"


def test_no_role_is_a_failure(tmp_path):
    (tmp_path / "global_step_1" / "junk").mkdir(parents=True)
    _, checks = inspect_step(tmp_path / "global_step_1")
    assert _status(checks, "layout.roles") == "fail"
