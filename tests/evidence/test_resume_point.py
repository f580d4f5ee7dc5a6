"""evidence/resume_point.py: the checkpoint a retry resumes from, and record.py's `since` for its attempt.

On checkpoint folders shaped like verl's and records written by tutorrl's own
recorder; the retry itself, on real training, is tests/e2e/test_retries.py.
"""

from __future__ import annotations

from evidence_helpers import digest_of, make_bundle, make_fsdp_step

from tutorrl.evidence import choose_resume_point, evidence_length, record_run_checkpoints
from tutorrl.evidence.record import read_records
from tutorrl.evidence.resume_point import choose


def _recorded_steps(tmp_path, steps):
    ckpt = tmp_path / "ckpt"
    bundle = make_bundle(tmp_path / "b", output_dir=str(ckpt))
    for step in steps:
        make_fsdp_step(ckpt, step)
    record_run_checkpoints(bundle, "run-1", False)
    return bundle, ckpt


def test_the_newest_checkpoint_whose_files_match_its_record_is_chosen(tmp_path):
    bundle, ckpt = _recorded_steps(tmp_path, [1, 2])
    choice = choose(bundle, ckpt, digest_of(bundle))
    assert (choice.step, choice.record, choice.skipped) == (2, "000002.json", [])
    assert choice.directory == str(ckpt / "global_step_2") and choice.steps == [1, 2]
    # The face resolves the bundle's output folder the way the post-run scan does.
    assert choose_resume_point(bundle, tmp_path, {}).step == 2


def test_a_changed_file_passes_the_checkpoint_over_and_says_which(tmp_path):
    bundle, ckpt = _recorded_steps(tmp_path, [1, 2])
    shard = ckpt / "global_step_2" / "actor" / "model_world_size_2_rank_0.pt"
    data = bytearray(shard.read_bytes())
    data[100] ^= 1  # same size: only hashing again finds it
    shard.write_bytes(bytes(data))
    choice = choose(bundle, ckpt)
    assert choice.step == 1
    (why,) = choice.skipped
    assert why.startswith("global_step_2: its files, hashed again, are not those record 000002.json gave")
    assert "actor/model_world_size_2_rank_0.pt: content changed" in why


def test_unrecorded_added_removed_and_broken_records_are_each_named(tmp_path):
    bundle, ckpt = _recorded_steps(tmp_path, [1, 2, 3])
    make_fsdp_step(ckpt, 4)  # written after the scan: no record covers it
    record3 = bundle / "evidence" / "000003.json"
    record3.write_bytes(record3.read_bytes().replace(b'"payload"', b'"payload" ', 1))
    (ckpt / "global_step_2" / "extra.bin").write_bytes(b"x")
    (ckpt / "global_step_1" / "data.pt").unlink()
    choice = choose(bundle, ckpt, digest_of(bundle))
    assert choice.step is None and choice.directory is None
    assert [line.split(":", 1)[0] for line in choice.skipped] == [
        "global_step_4", "global_step_3", "global_step_2", "global_step_1"]
    assert choice.skipped[0].startswith("global_step_4: no evidence record of this bundle covers it")
    # An edited record no longer reads as one: its step is covered by none, and the chain says which.
    assert "no evidence record" in choice.skipped[1] and "000003.json" in choice.skipped[1]
    assert "extra.bin: not in its record" in choice.skipped[2]
    assert "data.pt: missing" in choice.skipped[3]


def test_no_checkpoints_means_from_scratch(tmp_path):
    bundle = make_bundle(tmp_path / "b", output_dir=str(tmp_path / "ckpt"))
    choice = choose(bundle, tmp_path / "ckpt")
    assert (choice.step, choice.skipped, choice.steps) == (None, [], [])


def test_an_attempt_records_again_the_steps_it_wrote_again_and_links_its_first(tmp_path):
    """A retry from step 1 writes global_step_2 again: `since` makes it the attempt's to record."""
    bundle, ckpt = _recorded_steps(tmp_path, [1, 2])
    since = evidence_length(bundle)
    assert since == 2
    make_fsdp_step(ckpt, 2)  # verl writes step 2 again, then 3
    make_fsdp_step(ckpt, 3)
    # Without `since` the rewritten step 2 would count as recorded already.
    record_run_checkpoints(bundle, "run-1", True, prior_steps=[1], resumed_step=1, since=since)
    statements = [s for _, s in read_records(bundle)]
    assert [s.predicate.checkpoint.step for s in statements] == [1, 2, 2, 3]
    assert statements[2].predicate.lineage.record == "000001.json"
    assert statements[3].predicate.lineage is None
    # A second scan of the same attempt records nothing twice.
    assert record_run_checkpoints(bundle, "run-1", True, prior_steps=[1], resumed_step=1, since=since) == []
    assert choose(bundle, ckpt).step == 3
