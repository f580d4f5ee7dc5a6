import json

import pytest

from evidence_helpers import digest_of, make_bundle, make_fsdp_step
from tutorrl.evidence import record_run_checkpoints
from tutorrl.evidence.verify import verify_evidence
from tutorrl.errors import BundleError
from tutorrl.evidence.record import read_records


def test_post_run_scan_records_each_checkpoint_once(tmp_path, monkeypatch):
    work = tmp_path / "work"
    bundle = make_bundle(tmp_path / "bundles", output_dir="ckpts")
    make_fsdp_step(work / "ckpts", 2)
    make_fsdp_step(work / "ckpts", 4)
    written = record_run_checkpoints(bundle, "run-a", True, cwd=work)
    assert [p.name for p in written] == ["000001.json", "000002.json"]
    assert record_run_checkpoints(bundle, "run-a", True, cwd=work) == []
    monkeypatch.chdir(work)  # cwd defaults to the current directory
    make_fsdp_step(work / "ckpts", 6)
    assert len(record_run_checkpoints(bundle, "run-b", False)) == 1
    records = [s for _, s in read_records(bundle)]
    assert [s.predicate.checkpoint.step for s in records] == [2, 4, 6]
    assert [s.predicate.run.finished for s in records] == [True, True, False]
    assert {s.predicate.run.source for s in records} == {"post-run-scan"}
    assert verify_evidence(bundle, digest_of(bundle)) == [] and verify_evidence(bundle) == []


def test_interrupted_save_is_recorded_as_failing(tmp_path):
    bundle = make_bundle(tmp_path / "bundles", output_dir=str(tmp_path / "ckpts"))
    make_fsdp_step(tmp_path / "ckpts", 1)
    make_fsdp_step(tmp_path / "ckpts", 2, tracker=False, data_pt=False)
    (tmp_path / "ckpts" / "global_step_2" / "actor" / "model_world_size_2_rank_1.pt").unlink()
    record_run_checkpoints(bundle, "r", False)
    s = read_records(bundle)[-1][1]
    checks = {c.id: c.status for c in s.predicate.verdict.checks}
    assert s.predicate.verdict.status == "fail"
    assert checks["tracker.agrees"] == "fail" and checks["layout.actor"] == "fail"
    assert checks["checkpoint.dataloader_state"] == "fail"
    assert checks["publication.engines_answered"] == "skipped"  # never claimed without an engine


def test_record_contents(tmp_path):
    bundle = make_bundle(tmp_path / "bundles", output_dir=str(tmp_path / "ckpts"))
    step = make_fsdp_step(tmp_path / "ckpts", 3)
    (path,) = record_run_checkpoints(bundle, "r", True)
    import base64

    # The file is a DSSE envelope (unsigned here: no key in the test's environment) around the statement.
    envelope = json.loads(path.read_bytes())
    assert envelope["payloadType"] == "application/vnd.in-toto+json" and envelope["signatures"] == []
    payload = base64.b64decode(envelope["payload"])
    doc = json.loads(payload)
    assert doc["_type"] == "https://in-toto.io/Statement/v1"
    assert doc["predicateType"].startswith("https://tutorrl.dev/")
    names = [s["name"] for s in doc["subject"]]
    assert names == sorted(names) and "global_step_3/actor/huggingface/model.safetensors" in names
    p = doc["predicate"]
    assert p["bundle"] == {"digest": digest_of(bundle), "verl": "0.9.1"} and p["chain"] == {"sequence": 1, "previous": None}
    (st,) = p["checkpoint"]["safetensors"]
    assert {t["dtype"] for t in st["tensors"]} == {"BF16", "F32"}
    import hashlib

    raw = (step / "actor" / "huggingface" / "model.safetensors").read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    for t in st["tensors"]:
        a, b = header[t["name"]]["data_offsets"]
        assert t["sha256"] == hashlib.sha256(raw[8 + n + a:8 + n + b]).hexdigest()
    assert all(c["status"] in ("pass", "fail", "skipped") and c["detail"] for c in p["verdict"]["checks"])
    assert path.read_bytes().endswith(b"}\n") and payload.endswith(b"}\n") and b" " not in payload.split(b'"detail"')[0]


def test_no_checkpoints_no_records(tmp_path):
    # A compiled bundle always names an output dir (normalize fills it in); with
    # nothing saved there yet, the scan records nothing and creates nothing.
    bundle = make_bundle(tmp_path / "bundles", output_dir=str(tmp_path / "ckpts"))
    assert record_run_checkpoints(bundle, "r", True) == []
    (tmp_path / "ckpts").mkdir()
    assert record_run_checkpoints(bundle, "r", True) == []
    assert not (bundle / "evidence").exists()


def test_hand_made_or_tampered_bundle_is_refused_before_recording(tmp_path):
    fake = tmp_path / "b"
    fake.mkdir()
    (fake / "manifest.json").write_text(json.dumps({"digest": "sha256:" + "ab" * 32, "verl": "0.9.1"}))
    (fake / "spec.toml").write_text('[trainer]\noutput_dir = "ckpts"\n')
    make_fsdp_step(tmp_path / "ckpts", 1)
    with pytest.raises(BundleError, match="manifest"):
        record_run_checkpoints(fake, "r", True, cwd=tmp_path)
    assert not (fake / "evidence").exists()

    bundle = make_bundle(tmp_path / "bundles", output_dir=str(tmp_path / "ckpts"))
    (bundle / "launch.sh").write_text("echo tampered\n")
    with pytest.raises(BundleError, match="launch.sh was modified"):
        record_run_checkpoints(bundle, "r", True)
    assert not (bundle / "evidence").exists()


def test_the_post_run_scan_takes_the_runs_bundle_and_reads_the_chain_once(tmp_path, monkeypatch):
    """After a run the runtime hands evidence the bundle it verified: no re-derivation
    (a recompile of spec.toml), and the chain is read once for the whole scan."""
    import msgspec

    from tutorrl.compiler import verify_bundle
    from tutorrl.compiler.pipeline import verify as verify_module
    from tutorrl.evidence import record as record_module
    from tutorrl.runtime import lifecycle
    from tutorrl.runtime.records import RunRecord

    work = tmp_path / "work"
    bundle = make_bundle(tmp_path / "bundles", output_dir="ckpts")
    make_fsdp_step(work / "ckpts", 2)
    make_fsdp_step(work / "ckpts", 4)
    record_run_checkpoints(bundle, "run-a", True, cwd=work)  # an earlier run's record of step 2 and 4
    make_fsdp_step(work / "ckpts", 6)
    loaded = verify_bundle(bundle)
    calls = {"rederive": 0, "chain": 0}
    rederive, read = verify_module._rederive, record_module.read_records

    def counted_rederive(*args, **kwargs):
        calls["rederive"] += 1
        return rederive(*args, **kwargs)

    def counted_read(*args, **kwargs):
        calls["chain"] += 1
        return read(*args, **kwargs)

    monkeypatch.setattr(verify_module, "_rederive", counted_rederive)
    monkeypatch.setattr(record_module, "read_records", counted_read)
    # The package's face keeps a name once asked for (tutorrl/_face.py): an earlier test's lookup would
    # otherwise hand the scan the uncounted function.
    import tutorrl.evidence as evidence_face

    monkeypatch.setattr(evidence_face, "read_records", counted_read, raising=False)
    record = msgspec.convert({
        "schema": 1, "run_id": "run-b", "bundle": str(bundle), "submission_id": "s", "attempt": 1,
        "address_kind": "embedded", "address": "http://127.0.0.1:1", "dry_run": False,
        "versions": {"tutorrl": "0", "ray": None, "python": "3"}, "started": "t", "status": "failed",
        "submitted": True, "cwd": str(work), "prior_steps": [2, 4]}, RunRecord)
    notes = []

    class Progress:
        def note(self, line):
            notes.append(line)

    lifecycle.scan_evidence(bundle, record, Progress(), loaded=loaded)
    assert calls == {"rederive": 0, "chain": 1}
    # This run's one record (step 6) is what the scan reports, read back from the file it wrote.
    assert [s.predicate.checkpoint.step for _, s in read(bundle)] == [2, 4, 6]
    assert len([n for n in notes if "000003.json" in n]) == 1 and not [n for n in notes if "000001" in n], notes
    # A later command closing the record has no bundle in hand: it verifies it, once.
    make_fsdp_step(work / "ckpts", 8)
    record.run_id = "run-c"
    record.prior_steps = [2, 4, 6]
    lifecycle.scan_evidence(bundle, record, Progress())
    assert calls == {"rederive": 1, "chain": 2}
