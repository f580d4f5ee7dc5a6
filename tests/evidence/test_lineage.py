"""evidence/lineage.py: which checkpoints are a run's, and the record of the one it resumed from.

The real thing runs in tests/e2e/test_real_training.py (verl resumes its own
checkpoint); these pin the rules on checkpoint folders shaped like verl's,
without a training run.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from evidence_helpers import make_bundle, make_fsdp_step

from tutorrl.evidence import record_run_checkpoints
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
    assert verify_link("000001.json", lineage)[0] == []


def test_a_linked_record_changed_afterwards_is_named(tmp_path):
    first, second = _two_runs(tmp_path)
    (only,) = [s for _, s in read_records(second)]
    target = first / "evidence" / "000001.json"
    target.write_bytes(target.read_bytes() + b"\n")
    problems, _notes = verify_link("000001.json", only.predicate.lineage)
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
