"""`tutorrl verify --rehash`: recorded checkpoints hashed again, each file that no longer matches named."""

import json
import shutil

import pytest

from evidence_helpers import make_bundle, make_fsdp_step
from tutorrl.cli import main


def _recorded(tmp_path, steps):
    bundle = make_bundle(tmp_path / "bundles")
    for step in steps:
        make_fsdp_step(tmp_path / "ckpts", step)
        assert main(["evidence", str(bundle), "--add", str(tmp_path / "ckpts" / f"global_step_{step}")]) == 0
    return bundle


def test_untouched_checkpoints_match(tmp_path, capsys):
    bundle = _recorded(tmp_path, [1, 2])
    capsys.readouterr()
    assert main(["verify", str(bundle), "--rehash", "--jobs", "2"]) == 0
    out, err = capsys.readouterr()
    assert "re-hashed and matches (0 no longer on disk)" in out
    assert "rehash: 2 recorded checkpoint(s) on disk" in err
    assert "rehash: 000001.json (step 1): matches" in err and "rehash: 000002.json (step 2): matches" in err


def test_edited_removed_and_added_files_are_each_named(tmp_path, capsys):
    bundle = _recorded(tmp_path, [1, 2])
    step1 = tmp_path / "ckpts" / "global_step_1" / "actor"
    shard = step1 / "model_world_size_2_rank_0.pt"
    data = bytearray(shard.read_bytes())
    data[100] ^= 0xFF  # same size, different bytes: only a hash sees it
    shard.write_bytes(bytes(data))
    (step1 / "optim_world_size_2_rank_1.pt").unlink()
    (step1 / "extra_state_world_size_2_rank_0.pt").write_bytes(b"shorter")
    (tmp_path / "ckpts" / "global_step_2" / "notes.txt").write_text("added later")
    # Plain verify checks the records, not the checkpoints: it still passes.
    assert main(["verify", str(bundle)]) == 0
    capsys.readouterr()
    assert main(["verify", str(bundle), "--rehash"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"000001.json (step 1): {shard}: content changed" in err
    assert f"000001.json (step 1): {step1 / 'optim_world_size_2_rank_1.pt'}: missing" in err
    assert f"000001.json (step 1): {step1 / 'extra_state_world_size_2_rank_0.pt'}: 7 bytes, recorded 2048" in err
    assert "000002.json (step 2)" in err and "notes.txt: not in the record (added since)" in err
    assert "rehash: 000001.json (step 1): 3 file(s) do not match" in err


def test_checkpoints_gone_from_disk_are_reported_not_failed(tmp_path, capsys):
    bundle = _recorded(tmp_path, [1, 2])
    shutil.rmtree(tmp_path / "ckpts" / "global_step_1")  # retention
    capsys.readouterr()
    assert main(["verify", str(bundle), "--rehash"]) == 0
    out, err = capsys.readouterr()
    assert "note: 000001.json (step 1): " in err and "is no longer on disk" in err
    assert "(1 no longer on disk)" in out
    assert main(["verify", str(bundle), "--rehash", "--require-checkpoints", "--format", "json"]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False and len(doc["not_on_disk"]) == 1 and doc["problems"] == doc["not_on_disk"]


def test_rehash_options_are_checked(tmp_path, capsys):
    bundle = _recorded(tmp_path, [])
    assert main(["verify", str(bundle), "--jobs", "2"]) == 2
    assert "only apply with --rehash" in capsys.readouterr().err
    with pytest.raises(SystemExit) as refused:  # argparse's own refusal
        main(["verify", str(bundle), "--rehash", "--jobs", "0"])
    assert refused.value.code == 2
    assert "expected a whole number of at least 1, got '0'" in capsys.readouterr().err
