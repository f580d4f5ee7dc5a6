"""The evidence user path, end to end through the real `tutorrl` command:
compile a spec, save checkpoints where it says, record them, list them, verify
the bundle with its evidence, and see tampering refused."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import support

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "evidence"))

from evidence_helpers import make_fsdp_step  # noqa: E402

OUTPUT_DIR = "checkpoints/chess-tutor/grpo"  # the example spec's trainer.output_dir


def test_record_list_verify_and_refuse_tampering(tmp_path):
    shutil.copy(support.SPECS / "chess_tutor_grpo.toml", tmp_path / "spec.toml")
    compiled = support.cli("compile", "spec.toml", cwd=tmp_path)
    assert compiled.returncode == 0, compiled.stderr
    bundle = compiled.stdout.strip().splitlines()[-1]
    assert bundle.startswith("bundles/")
    digest = json.loads((tmp_path / bundle / "manifest.json").read_text())["digest"]
    assert Path(bundle).name == digest.removeprefix("sha256:")[:16]

    # Step 20 is a complete save; without an engine, publication is not
    # claimed, so the verdict is partial and the command exits 0.
    make_fsdp_step(tmp_path / OUTPUT_DIR, 20)
    added = support.cli("evidence", bundle, "--add", OUTPUT_DIR, cwd=tmp_path)
    assert added.returncode == 0, added.stderr
    assert "000001.json" in added.stdout and "step 20" in added.stdout and "PARTIAL" in added.stdout

    # Step 40 lost its dataloader state: recorded, but the verdict is fail (exit 1).
    make_fsdp_step(tmp_path / OUTPUT_DIR, 40, data_pt=False)
    failed = support.cli("evidence", bundle, "--add", OUTPUT_DIR, cwd=tmp_path)
    assert failed.returncode == 1, failed.stderr
    assert "000002.json" in failed.stdout and "step 40" in failed.stdout and "FAIL" in failed.stdout
    assert "checkpoint.dataloader_state" in failed.stdout and "Traceback" not in failed.stderr

    listed = support.cli("evidence", bundle, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    records = [line for line in listed.stdout.splitlines() if not line.startswith("    ")]
    assert len(records) == 2
    assert records[0].startswith("000001.json") and "step 20" in records[0] and "PARTIAL" in records[0]
    assert records[1].startswith("000002.json") and "step 40" in records[1] and "FAIL" in records[1]
    # Under each record, each check short of a pass and why: PARTIAL's skip, FAIL's failure first.
    first, second = listed.stdout.split("\n000002.json")
    assert "\n    skipped publication.engines_answered: no rollout engine URL to ask" in first
    assert second.splitlines()[1].startswith("    checkpoint.dataloader_state: data.pt missing")  # why it failed

    as_json = support.cli("evidence", bundle, "--json", cwd=tmp_path)
    assert as_json.returncode == 0, as_json.stderr
    docs = json.loads(as_json.stdout)
    assert [d["predicate"]["checkpoint"]["step"] for d in docs] == [20, 40]
    assert [d["predicate"]["verdict"]["status"] for d in docs] == ["partial", "fail"]
    assert all(d["predicate"]["bundle"] == {"digest": digest, "verl": "0.9.1"} for d in docs)
    assert [d["predicate"]["chain"]["sequence"] for d in docs] == [1, 2]
    # From the bundle's folder (bundles/<id>) to the checkpoints' (checkpoints/chess-tutor/grpo).
    assert all(d["predicate"]["checkpoint"]["root"] == "../../" + OUTPUT_DIR for d in docs)

    verified = support.cli("verify", bundle, cwd=tmp_path)
    assert verified.returncode == 0, verified.stderr
    assert digest in verified.stdout

    record = tmp_path / bundle / "evidence" / "000001.json"
    original = record.read_bytes()
    pos = len(original) // 2
    record.write_bytes(original[:pos] + bytes([original[pos] ^ 0x01]) + original[pos + 1:])
    broken = support.cli("verify", bundle, cwd=tmp_path)
    assert broken.returncode == 2
    assert "evidence verification failed" in broken.stderr and "000001.json" in broken.stderr
    assert "Traceback" not in broken.stderr
    record.write_bytes(original)
    assert support.cli("verify", bundle, cwd=tmp_path).returncode == 0

    evidence_before = sorted((p.name, p.read_bytes()) for p in (tmp_path / bundle / "evidence").iterdir())
    launch = tmp_path / bundle / "launch.sh"
    launch.write_text(launch.read_text() + "echo tampered\n")
    refused = support.cli("evidence", bundle, "--add", OUTPUT_DIR, cwd=tmp_path)
    assert refused.returncode == 2
    assert "launch.sh was modified" in refused.stderr and "Traceback" not in refused.stderr
    assert refused.stdout == ""
    assert sorted((p.name, p.read_bytes()) for p in (tmp_path / bundle / "evidence").iterdir()) == evidence_before
    listing = support.cli("evidence", bundle, cwd=tmp_path)
    assert listing.returncode == 2 and "launch.sh was modified" in listing.stderr and listing.stdout == ""
