"""`tutorrl.runs`, `status` and `logs` from Python: typed values, and the commands print exactly those.

Real run folders (records sealed by tutorrl's own writer, a run.json that is no record, a job.log with bytes
that are not UTF-8), the real command in a subprocess beside the in-process call; no Ray (every run here has
ended, so nothing asks a head)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

import tutorrl
from tutorrl.runtime import lifecycle, records
from tutorrl.runtime.text import runs_json, runs_table, status_json, status_text

LOG = b"step:1 - critic/score/mean:0.25\nstep:2 - critic/score/mean:0.75\n\xff\xfe not utf-8\n"


@pytest.fixture
def bundle(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("TUTORRL_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "bundles" / "abcd"
    (folder / "runs").mkdir(parents=True)
    (folder / "manifest.json").write_text("{}")
    (folder / "spec.toml").write_text("[trainer]\ntotal_steps = 4\n")
    run_dir = folder / "runs" / "tutorrl-abcd-1"
    run_dir.mkdir()
    (run_dir / records.LOG_FILE).write_bytes(LOG)
    records.create_record(run_dir, records.RunRecord(
        schema=1, run_id=run_dir.name, bundle="sha256:" + "0" * 64, submission_id=run_dir.name, attempt=1,
        address_kind="embedded", address="http://127.0.0.1:1", dry_run=False,
        versions=records.Versions(tutorrl="0", ray="2.60.0", python="3.11"), started="2026-01-01T00:00:00.000Z",
        ended="2026-01-01T00:01:00.000Z", status="failed", exit_code=1, retries=1,
        attempts=[records.Attempt(submission_id=run_dir.name, started="2026-01-01T00:00:00.000Z", status="failed",
                                  exit_code=1, reached_step=2)]))
    lifecycle.index_run(run_dir)
    (folder / "runs" / "tutorrl-abcd-2").mkdir()
    (folder / "runs" / "tutorrl-abcd-2" / "run.json").write_text("no record")
    return folder


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tutorrl", *args], capture_output=True, timeout=120)


def test_runs_is_a_row_per_run_and_the_command_prints_those_rows(bundle):
    rows = tutorrl.runs(bundle)
    assert [(r.run_id, r.record is not None, r.verified) for r in rows] == [
        ("tutorrl-abcd-1", True, True), ("tutorrl-abcd-2", False, False)]
    assert rows[0].record.status == "failed" and rows[0].record.attempts[0].reached_step == 2
    table = _cli("runs", str(bundle))
    assert table.returncode == 0 and table.stdout.decode() == runs_table(rows)
    assert table.stdout.decode().splitlines()[0].split() == ["RUN", "STARTED", "(UTC)", "WHERE", "STATUS", "EXIT",
                                                             "ATTEMPTS"]
    as_json = _cli("runs", str(bundle), "--format", "json")
    assert as_json.stdout.decode() == runs_json(rows)
    assert [(d["run_id"], d["status"], d.get("verified")) for d in json.loads(as_json.stdout)] == [
        ("tutorrl-abcd-1", "failed", True), ("tutorrl-abcd-2", "unreadable", None)]


def test_status_of_a_run_is_its_state_and_its_json_is_the_record_then_what_was_checked(bundle):
    report = tutorrl.status("tutorrl-abcd-1")
    state = report.run_state
    assert report.set_state is None and not report.open and state is not None
    assert (state.record.status, state.progress.step, state.progress.total) == ("failed", 2, 4)
    assert state.progress.eta_s is None and state.dashboard is None and state.verified
    text = _cli("status", "tutorrl-abcd-1")
    assert text.returncode == 0 and text.stdout.decode() == status_text(report)
    assert "  attempts:  1 of at most 2" in text.stdout.decode()
    doc = _cli("status", "tutorrl-abcd-1", "--format", "json").stdout.decode()
    assert doc == status_json(report)
    # The key order the JSON has always had: the record's fields (its dashboard replaced by the one still
    # served, in place), then what `status` checked.
    assert "dashboard" in records.RunRecord.__struct_fields__
    assert list(json.loads(doc)) == [*records.RunRecord.__struct_fields__, "path", "log", "owner_alive", "verified",
                                     "step", "total_steps", "progress"]
    assert json.loads(doc)["progress"] == json.loads(msgspec.json.encode(state.progress))


def test_status_without_a_run_lists_the_runs_that_ended(bundle):
    report = tutorrl.status(show_all=True)
    assert [s.record.run_id for s in report.ended] == ["tutorrl-abcd-1"]
    assert (report.sets, report.open, report.hidden_sets, report.hidden_runs) == ([], [], 0, 0)
    assert _cli("status", "--all").stdout.decode() == status_text(report)


def test_logs_are_the_logs_bytes_as_they_are(bundle):
    assert b"".join(tutorrl.logs("tutorrl-abcd-1")) == LOG
    assert b"".join(tutorrl.logs(str(bundle / "runs" / "tutorrl-abcd-1"), follow=True)) == LOG  # ended: it ends
    shown = _cli("logs", "tutorrl-abcd-1")
    assert shown.returncode == 0 and shown.stdout == LOG


def test_a_run_that_is_not_there_is_refused_at_the_call_not_at_the_first_piece(bundle):
    from tutorrl.errors import RunNotFound

    with pytest.raises(RunNotFound, match="tutorrl-nope-1"):
        tutorrl.logs("tutorrl-nope-1")
    with pytest.raises(RunNotFound):
        tutorrl.status("tutorrl-nope-1")
