"""evidence/lineage.py: which checkpoints are a run's, and the record of the one it resumed from.

The real thing runs in tests/e2e/test_real_training.py (verl resumes its own
checkpoint); these pin the rules on checkpoint folders shaped like verl's,
without a training run.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import support
from evidence_helpers import make_bundle, make_fsdp_step

from tutorrl import api
from tutorrl.evidence import record_run_checkpoints
from tutorrl.evidence.schema import Head
from tutorrl.evidence.statement import canonical, digest
from tutorrl.evidence.lineage import before_run, verify_link
from tutorrl.evidence.record import read_records


def test_before_run_names_the_steps_there_and_the_one_verl_resumes_from(tmp_path):
    root = tmp_path / "ckpt"
    assert before_run(root, "auto", None).steps == []
    make_fsdp_step(root, 1)
    make_fsdp_step(root, 2)
    assert before_run(root, "auto", None).steps == [1, 2]
    assert before_run(root, "auto", None).resumed_step == 2           # the tracker's step
    assert before_run(root, "disable", None).resumed_step is None     # verl starts afresh
    assert before_run(root, "resume_path", str(root / "global_step_1")).resumed_step == 1
    (root / "latest_checkpointed_iteration.txt").write_text("7")      # names no folder: verl would not resume it
    assert before_run(root, "auto", None).resumed_step is None


def _two_runs(tmp_path: Path):
    ckpt = tmp_path / "ckpt"
    first = make_bundle(tmp_path / "a", output_dir=str(ckpt))
    make_fsdp_step(ckpt, 1)
    record_run_checkpoints(first, "run-a", True)
    make_fsdp_step(ckpt, 2)  # the resumed run's checkpoint, in a second bundle (another spec) on the same folder
    second = make_bundle(tmp_path / "b", output_dir=str(ckpt), model_path="other")
    record_run_checkpoints(second, "run-b", True, prior_steps=[1], resumed_step=1, bundles=[first])
    return first, second


def test_a_resumed_run_claims_only_its_own_checkpoint_and_links_the_one_it_resumed_from(tmp_path):
    first, second = _two_runs(tmp_path)
    (only,) = [s for _, s in read_records(second)]
    assert only.predicate.checkpoint.step == 2  # step 1 is the first run's, already recorded there
    lineage = only.predicate.lineage
    (_path, vouching), = [(p, s) for p, s in read_records(first)]
    assert lineage.step == 1 and lineage.bundle == vouching.predicate.bundle.digest
    assert lineage.record == "000001.json"
    assert lineage.record_digest == "sha256:" + hashlib.sha256((first / "evidence" / "000001.json").read_bytes()).hexdigest()
    assert lineage.files_root == vouching.predicate.checkpoint.files.root
    check = next(c for c in only.predicate.verdict.checks if c.id == "lineage.resumed_from")
    assert check.status == "pass"
    assert verify_link("000001.json", lineage, second)[0] == []


def test_a_linked_record_changed_afterwards_is_named(tmp_path):
    first, second = _two_runs(tmp_path)
    (only,) = [s for _, s in read_records(second)]
    target = first / "evidence" / "000001.json"
    target.write_bytes(target.read_bytes() + b"\n")
    problems, _notes, _unlinked = verify_link("000001.json", only.predicate.lineage, second)
    assert problems and "edited or replaced" in problems[0] and str(target) in problems[0]


def test_a_checkpoint_changed_since_its_record_fails_the_lineage_check(tmp_path):
    ckpt = tmp_path / "ckpt"
    first = make_bundle(tmp_path / "a", output_dir=str(ckpt))
    step1 = make_fsdp_step(ckpt, 1)
    record_run_checkpoints(first, "run-a", True)
    (step1 / "data.pt").write_bytes(b"changed after it was recorded")
    make_fsdp_step(ckpt, 2)
    second = make_bundle(tmp_path / "b", output_dir=str(ckpt), model_path="other")
    record_run_checkpoints(second, "run-b", True, prior_steps=[1], resumed_step=1, bundles=[first])
    (only,) = [s for _, s in read_records(second)]
    check = next(c for c in only.predicate.verdict.checks if c.id == "lineage.resumed_from")
    assert check.status == "fail" and "changed since it was recorded" in check.detail


def test_a_resumed_checkpoint_no_record_covers_is_said_not_invented(tmp_path):
    ckpt = tmp_path / "ckpt"
    make_fsdp_step(ckpt, 1)  # written by a run nobody recorded
    make_fsdp_step(ckpt, 2)
    second = make_bundle(tmp_path / "b", output_dir=str(ckpt))
    record_run_checkpoints(second, "run-b", True, prior_steps=[1], resumed_step=1, bundles=[])
    (only,) = [s for _, s in read_records(second)]
    assert only.predicate.lineage.record is None
    check = next(c for c in only.predicate.verdict.checks if c.id == "lineage.resumed_from")
    assert check.status == "skipped"


def _resumed_from_the_second_of_two(tmp_path: Path):
    """A first bundle that recorded steps 1 and 2; a second that resumed from step 2 and recorded step 3."""
    ckpt = tmp_path / "ckpt"
    first = make_bundle(tmp_path / "a", output_dir=str(ckpt))
    make_fsdp_step(ckpt, 1)
    make_fsdp_step(ckpt, 2)
    record_run_checkpoints(first, "run-a", True)
    make_fsdp_step(ckpt, 3)
    second = make_bundle(tmp_path / "b", output_dir=str(ckpt), model_path="other")
    record_run_checkpoints(second, "run-b", True, prior_steps=[1, 2], resumed_step=2, bundles=[first])
    assert api.verify(first).ok and api.verify(second).ok
    return ckpt, first, second


def test_a_linked_record_deleted_while_its_bundle_is_there_fails_the_resumed_bundles_verify(tmp_path):
    _ckpt, first, second = _resumed_from_the_second_of_two(tmp_path)
    (first / "evidence" / "000002.json").unlink()
    found = api.verify(second)
    assert not found.ok
    (problem,) = found.problems
    assert problem.startswith("000001.json: the record it resumed from, 000002.json of bundle sha256:")
    assert "is gone from" in problem and "while that bundle is still at" in problem
    assert not api.verify(first).ok  # HEAD still names record 2


def test_a_linked_record_deleted_and_head_rewritten_still_fails_though_its_own_chain_verifies(tmp_path):
    _ckpt, first, second = _resumed_from_the_second_of_two(tmp_path)
    evdir = first / "evidence"
    (evdir / "000002.json").unlink()
    # The unsigned truncation the first chain cannot see on its own: HEAD names record 1 again.
    (evdir / "HEAD").write_bytes(canonical(Head(sequence=1, digest=digest((evdir / "000001.json").read_bytes()))))
    assert api.verify(first).ok and api.verify(first).records == 1
    found = api.verify(second)
    assert not found.ok and "000002.json of bundle" in found.problems[0] and "is gone from" in found.problems[0]


def test_a_linked_bundle_gone_altogether_is_said_and_fails_only_when_lineage_is_required(tmp_path):
    _ckpt, first, second = _resumed_from_the_second_of_two(tmp_path)
    shutil.rmtree(first)
    found = api.verify(second)
    assert found.ok and found.lineage == []
    (said,) = found.unlinked
    assert said.startswith("000001.json: resumed from 000002.json of bundle sha256:") and "no bundle is at" in said
    required = api.verify(second, require_lineage=True)
    assert not required.ok and required.problems == [said]
    shown = support.cli("verify", str(second), "--require-lineage")
    assert shown.returncode == 2 and "no bundle is at" in shown.stderr and "Traceback" not in shown.stderr
    noted = support.cli("verify", str(second))
    assert noted.returncode == 0 and "note: lineage: 000001.json: resumed from 000002.json" in noted.stderr
    # --format json carries the same lines, under "unlinked", whether or not they fail.
    import json

    as_json = support.cli("verify", str(second), "--format", "json")
    assert as_json.returncode == 0 and json.loads(as_json.stdout)["unlinked"] == [said]
    required_json = support.cli("verify", str(second), "--format", "json", "--require-lineage")
    doc = json.loads(required_json.stdout)
    assert required_json.returncode == 2 and doc["ok"] is False and doc["unlinked"] == doc["problems"] == [said]


def test_rehash_hashes_the_checkpoint_a_run_resumed_from_and_the_note_says_what_was_checked(tmp_path):
    ckpt, _first, second = _resumed_from_the_second_of_two(tmp_path)
    (note,) = api.verify(second).lineage
    assert "link checked" in note and "its files not re-hashed: --rehash does" in note
    assert api.verify(second, rehash=True).ok
    (ckpt / "global_step_2" / "data.pt").write_bytes(b"dataloader, but not as recorded")
    assert api.verify(second).ok  # the link compares records; only --rehash reads the files
    found = api.verify(second, rehash=True)
    assert "re-hashed too" in found.lineage[0]
    (problem,) = found.problems
    assert problem.startswith("lineage of 000001.json: 000002.json of bundle sha256:") and "(step 2)" in problem
    assert "global_step_2/data.pt" in problem


def test_bundles_and_checkpoints_moved_together_still_verify_lineage_included(tmp_path):
    _ckpt, first, second = _resumed_from_the_second_of_two(tmp_path / "here")
    (third,) = [s for _, s in read_records(second)]
    assert third.predicate.checkpoint.root == "../../ckpt"  # from the bundle's folder, not this machine's root
    assert third.predicate.lineage.bundle_path == f"../../a/{first.name}"
    shutil.move(tmp_path / "here", tmp_path / "there")
    moved_first, moved_second = (tmp_path / "there" / p.relative_to(tmp_path / "here") for p in (first, second))
    assert api.verify(moved_first, rehash=True).ok
    found = api.verify(moved_second, rehash=True, require_lineage=True, require_checkpoints=True)
    assert found.ok and found.not_on_disk == [] and "link checked" in found.lineage[0]
    # The new place is what was hashed: a changed byte there is found.
    (tmp_path / "there" / "ckpt" / "global_step_3" / "data.pt").write_bytes(b"changed")
    assert not api.verify(moved_second, rehash=True).ok


def test_records_written_with_an_absolute_root_still_verify_and_rehash(tmp_path):
    """Records before roots were relative named the absolute folder: they are read as they are."""
    import msgspec

    from tutorrl.evidence.chain import read_record
    from tutorrl.evidence.statement import decode_record

    ckpt = tmp_path / "ckpt"
    first = make_bundle(tmp_path / "a", output_dir=str(ckpt))
    make_fsdp_step(ckpt, 1)
    record_run_checkpoints(first, "run-a", True)
    record = first / "evidence" / "000001.json"
    statement = decode_record(read_record(record)).statement
    old = msgspec.structs.replace(statement.predicate.checkpoint, root=str(ckpt))
    from tutorrl.evidence.statement import encode_record

    rewritten = encode_record(msgspec.structs.replace(statement, predicate=msgspec.structs.replace(
        statement.predicate, checkpoint=old)), [])
    record.write_bytes(rewritten)
    (first / "evidence" / "HEAD").write_bytes(canonical(Head(sequence=1, digest=digest(rewritten))))
    assert api.verify(first, rehash=True).ok
    (ckpt / "global_step_1" / "data.pt").write_bytes(b"changed")
    assert str(ckpt / "global_step_1" / "data.pt") in api.verify(first, rehash=True).problems[0]
