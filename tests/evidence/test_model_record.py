"""evidence/merged.py: the record of a model `tutorrl model` made from a recorded checkpoint.

verl's merger itself runs in tests/e2e/test_real_training.py (on a checkpoint
verl wrote) and tests/runtime/test_model_command.py (the command's refusals);
these pin the record on checkpoint folders shaped like verl's and a merged
folder shaped like the merger's output (config, tokenizer, safetensors).
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
from pathlib import Path

import pytest
from evidence_helpers import make_bundle, make_fsdp_step, model_tensors, write_safetensors

from tutorrl import api
from tutorrl.errors import CheckpointError
from tutorrl.evidence import record_run_checkpoints
from tutorrl.evidence.lineage import find_record
from tutorrl.evidence.merged import Merge, inspect_model, model_dir_problem, record_model, source_checkpoint
from tutorrl.evidence.verify import model_problems
from tutorrl.evidence.record import read_records

MERGE = Merge(merger="verl.model_merger", backend="fsdp", verl="0.9.1")


def _recorded(tmp_path: Path, steps=(1, 2)):
    ckpt = tmp_path / "ckpt"
    bundle = make_bundle(tmp_path / "b", output_dir=str(ckpt))
    for step in steps:
        make_fsdp_step(ckpt, step)
    record_run_checkpoints(bundle, "run-a", True)
    return ckpt, bundle


def _merged_folder(where: Path) -> Path:
    """What verl's merger writes for an FSDP checkpoint: config, generation config, tokenizer, weights."""
    where.mkdir(parents=True)
    (where / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    (where / "generation_config.json").write_text("{}")
    (where / "tokenizer.json").write_text('{"version": "1.0"}')
    write_safetensors(where / "model.safetensors", model_tensors(7))
    return where


def _make_model(bundle: Path, out: Path, step: int | None = None) -> Path:
    source = source_checkpoint(bundle, step)
    tmp = _merged_folder(out.with_name("." + out.name + ".tmp"))
    hashed = inspect_model(tmp)
    tmp.rename(out)
    return record_model(source, out, MERGE, hashed=hashed)


def _statement(path: Path) -> dict:
    return json.loads(base64.b64decode(json.loads(path.read_text())["payload"]))


def test_the_model_record_lists_each_merged_file_and_links_the_checkpoint_record(tmp_path):
    ckpt, bundle = _recorded(tmp_path)
    out = tmp_path / "model"
    record = _make_model(bundle, out)
    assert record.name == "000003.json"
    statement = _statement(record)
    predicate = statement["predicate"]
    on_disk = {p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
               for p in out.rglob("*") if p.is_file()}
    assert {s["name"]: s["digest"]["sha256"] for s in statement["subject"]} == {
        f"model/{name}": d for name, d in on_disk.items()}
    assert predicate["run"]["source"] == "model-merger" and predicate["run"]["run_id"] == "run-a"
    assert predicate["checkpoint"]["directory"] == "model" and predicate["checkpoint"]["step"] == 2
    assert predicate["checkpoint"]["root"] == "../.."  # relative to the bundle: they move together
    (export,) = predicate["checkpoint"]["safetensors"]
    assert export["file"] == "model.safetensors" and export["tensor_count"] == 3
    assert predicate["model"] == {"merger": "verl.model_merger", "backend": "fsdp", "verl": "0.9.1"}
    linked = bundle / "evidence" / "000002.json"
    lineage = predicate["lineage"]
    assert lineage == {
        "step": 2, "directory": "global_step_2", "bundle": predicate["bundle"]["digest"], "record": "000002.json",
        "record_digest": "sha256:" + hashlib.sha256(linked.read_bytes()).hexdigest(), "bundle_path": ".",
        "files_root": _statement(linked)["predicate"]["checkpoint"]["files"]["root"]}
    checks = {c["id"]: c["status"] for c in predicate["verdict"]["checks"]}
    assert checks == {"lineage.merged_from": "pass", "export.safetensors": "pass"}
    found = api.verify(bundle, rehash=True)
    assert found.ok, found.problems
    assert any(line.startswith("000003.json: merged from 000002.json of bundle") and "link checked" in line
               for line in found.lineage)


def test_an_older_step_is_merged_on_request(tmp_path):
    _ckpt, bundle = _recorded(tmp_path)
    record = _make_model(bundle, tmp_path / "model", step=1)
    assert _statement(record)["predicate"]["lineage"]["record"] == "000001.json"


def test_a_flipped_byte_in_a_merged_file_fails_rehash_naming_it(tmp_path):
    _ckpt, bundle = _recorded(tmp_path)
    out = tmp_path / "model"
    _make_model(bundle, out)
    weights = out / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    assert api.verify(bundle).ok  # without --rehash the files are not read
    found = api.verify(bundle, rehash=True)
    assert not found.ok
    (problem,) = found.problems
    assert problem.startswith("000003.json (model of step 2): ") and str(weights) in problem
    assert "content changed" in problem


def test_the_linked_checkpoint_record_edited_fails_naming_it(tmp_path):
    _ckpt, bundle = _recorded(tmp_path)
    _make_model(bundle, tmp_path / "model")
    linked = bundle / "evidence" / "000002.json"
    linked.write_bytes(linked.read_bytes() + b" ")
    found = api.verify(bundle)
    assert not found.ok
    assert any(p.startswith("000003.json: the record it merged from, ") and str(linked) in p
               and "edited or replaced" in p for p in found.problems), found.problems


def test_the_linked_checkpoint_removed_is_said_by_rehash(tmp_path):
    ckpt, bundle = _recorded(tmp_path)
    _make_model(bundle, tmp_path / "model")
    shutil.rmtree(ckpt / "global_step_2")
    found = api.verify(bundle, rehash=True, require_checkpoints=True)
    assert not found.ok and any("lineage of 000003.json" in p for p in found.problems)


def test_a_checkpoint_changed_since_its_record_is_refused_naming_the_file(tmp_path):
    ckpt, bundle = _recorded(tmp_path)
    shard = ckpt / "global_step_2" / "actor" / "model_world_size_2_rank_0.pt"
    shard.write_bytes(b"x" + shard.read_bytes()[1:])
    with pytest.raises(CheckpointError) as err:
        source_checkpoint(bundle)
    assert "000002.json (step 2)" in str(err.value) and str(shard) in str(err.value)
    assert "content changed" in str(err.value)
    (ckpt / "global_step_2" / "stray.bin").write_bytes(b"added")
    with pytest.raises(CheckpointError, match="stray.bin: not in the record"):
        source_checkpoint(bundle)


def test_refusals_name_what_is_missing(tmp_path):
    ckpt, bundle = _recorded(tmp_path)
    with pytest.raises(CheckpointError, match="no record of step 5; recorded steps: 1, 2"):
        source_checkpoint(bundle, 5)
    shutil.rmtree(ckpt / "global_step_1")
    with pytest.raises(CheckpointError, match="no longer on disk"):
        source_checkpoint(bundle, 1)
    empty = make_bundle(tmp_path / "empty", output_dir=str(tmp_path / "nothing"))
    with pytest.raises(CheckpointError, match="no checkpoint is recorded"):
        source_checkpoint(empty)


def test_a_chain_that_does_not_verify_is_refused(tmp_path):
    _ckpt, bundle = _recorded(tmp_path)
    (bundle / "evidence" / "000001.json").unlink()
    with pytest.raises(CheckpointError, match="its evidence does not verify"):
        source_checkpoint(bundle)


def test_a_record_that_failed_its_checks_is_refused(tmp_path):
    ckpt = tmp_path / "ckpt"
    bundle = make_bundle(tmp_path / "b", output_dir=str(ckpt))
    make_fsdp_step(ckpt, 1)
    (ckpt / "global_step_1" / "actor" / "huggingface" / "model.safetensors").write_bytes(b"\xff" * 16)
    record_run_checkpoints(bundle, "run-a", True)
    with pytest.raises(CheckpointError, match=r"failed its checks \(export.safetensors"):
        source_checkpoint(bundle)


def test_a_model_folder_beside_the_checkpoints_is_never_taken_for_one(tmp_path):
    """find_record matches the checkpoint's directory: a model of step 2 in the checkpoint root is no
    record of global_step_2, and the post-run scan still sees steps its records do not cover."""
    ckpt, bundle = _recorded(tmp_path, steps=(1, 2))
    _make_model(bundle, ckpt / "merged")
    bundle_path, path, statement = find_record(ckpt, 2, [bundle])
    assert path.name == "000002.json" and statement.predicate.model is None
    make_fsdp_step(ckpt, 3)
    written = record_run_checkpoints(bundle, "run-b", True)
    assert [p.name for p in written] == ["000004.json"]
    # A model record is not a checkpoint to merge: the newest step is still the checkpoint's.
    assert source_checkpoint(bundle).record.name == "000004.json"


def test_the_model_record_is_signed_when_a_key_is_configured(tmp_path, monkeypatch):
    from tutorrl.evidence.sign import ENV_KEY, generate_key

    signer = generate_key(tmp_path / "key")
    monkeypatch.setenv(ENV_KEY, str(signer.path))
    _ckpt, bundle = _recorded(tmp_path)
    record = _make_model(bundle, tmp_path / "model")
    (signature,) = json.loads(record.read_text())["signatures"]
    assert signature["keyid"] == signer.keyid
    assert api.verify(bundle, trust=[tmp_path / "key.pub"]).ok


def test_a_model_record_must_say_how_it_was_made_and_link_its_checkpoint(tmp_path):
    _ckpt, bundle = _recorded(tmp_path)
    _make_model(bundle, tmp_path / "model")
    (path, statement), = [(p, s) for p, s in read_records(bundle) if p.name == "000003.json"]
    import msgspec

    unlinked = msgspec.structs.replace(statement.predicate, lineage=None)
    assert "000003.json: a model-merger record that links no checkpoint record" in model_problems(
        "000003.json", msgspec.structs.replace(statement, predicate=unlinked))
    no_model = msgspec.structs.replace(statement.predicate, model=None)
    assert "000003.json: a model-merger record without its model section" in model_problems(
        "000003.json", msgspec.structs.replace(statement, predicate=no_model))


def test_evidence_lists_the_model_record(tmp_path, capsys):
    from tutorrl.cli import main

    _ckpt, bundle = _recorded(tmp_path)
    _make_model(bundle, tmp_path / "model")
    assert main(["evidence", str(bundle)]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("000003.json  step 2 ") and "[model-merger, finished]" in last
    assert "model ../../model from 000002.json (global_step_2)" in last


def test_the_out_folder_must_be_new(tmp_path):
    assert model_dir_problem(tmp_path / "new") is None
    (tmp_path / "taken").mkdir()
    assert "already exists" in model_dir_problem(tmp_path / "taken")
    assert "no such folder" in model_dir_problem(tmp_path / "missing" / "new")
