"""`tutorrl status` of a retried run (`--retries`): each attempt's status, the step it resumed from, the
step it reached, and the tracker runs, in the text and the JSON. A run record written as a retried run
writes it (the real command in a subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from runtime_helpers import crafted_record

ATTEMPTS = [
    {"submission_id": "tutorrl-abcd-1", "started": "2026-01-01T00:00:00.000Z", "ended": "2026-01-01T00:01:00.000Z",
     "status": "failed", "exit_code": 1, "trained": [], "reached_step": None},
    {"submission_id": "tutorrl-abcd-1-r1", "started": "2026-01-01T00:01:01.000Z", "status": "failed",
     "exit_code": 1, "trained": [1, 2], "reached_step": 2},
    {"submission_id": "tutorrl-abcd-1-r2", "started": "2026-01-01T00:03:00.000Z", "status": "succeeded",
     "exit_code": 0, "resumed_step": 1, "resumed_from": "/ckpt/global_step_1", "resumed_record": "000001.json",
     "skipped": ["global_step_2: its files, hashed again, are not those record 000002.json gave"],
     "trained": [2, 3, 4], "reached_step": 4},
]


def _status(tmp_path: Path, *args: str, **changes) -> subprocess.CompletedProcess:
    run_dir = tmp_path / "bundles" / "abcd" / "runs" / "tutorrl-abcd-1"
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir.parent.parent / "manifest.json").write_text("{}")
    record = crafted_record(status="succeeded", exit_code=0, submission_id="tutorrl-abcd-1-r2", **changes)
    (run_dir / "run.json").write_text(json.dumps(record))
    return subprocess.run([sys.executable, "-m", "tutorrl", "status", str(run_dir), *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)


def test_the_text_has_a_line_for_each_attempt(tmp_path):
    got = _status(tmp_path, retries=2, attempts=ATTEMPTS, tracker_id="tutorrl-abcd-1-0a1b",
                  mlflow_run_id="f" * 32)
    assert got.returncode == 0, got.stderr
    lines = got.stdout.splitlines()
    at = lines.index("  attempts:  3 of at most 3")
    assert lines[at + 1:at + 5] == [
        "    1. tutorrl-abcd-1: failed (exit 1), from scratch",
        "    2. tutorrl-abcd-1-r1: failed (exit 1), from scratch, reached step 2",
        "    3. tutorrl-abcd-1-r2: succeeded (exit 0), resumed from step 1, reached step 4",
        "       not resumed from global_step_2: its files, hashed again, are not those record 000002.json gave",
    ]
    assert f"  tracker:   wandb tutorrl-abcd-1-0a1b; mlflow {'f' * 32}" in lines


def test_an_attempt_still_running_says_so(tmp_path):
    running = [*ATTEMPTS[:2], {"submission_id": "tutorrl-abcd-1-r2", "started": "2026-01-01T00:03:00.000Z",
                               "resumed_step": 2}]
    got = _status(tmp_path, retries=3, attempts=running)
    assert got.returncode == 0, got.stderr
    assert "  attempts:  3 of at most 4" in got.stdout
    assert "    3. tutorrl-abcd-1-r2: running, resumed from step 2\n" in got.stdout


def test_the_json_has_each_attempts_status_resumed_and_reached_step(tmp_path):
    got = _status(tmp_path, "--format", "json", retries=2, attempts=ATTEMPTS)
    assert got.returncode == 0, got.stderr
    body = json.loads(got.stdout)
    assert body["retries"] == 2
    assert [(a["status"], a["resumed_step"], a["reached_step"]) for a in body["attempts"]] == [
        ("failed", None, None), ("failed", None, 2), ("succeeded", 1, 4)]
    assert body["attempts"][2]["resumed_from"] == "/ckpt/global_step_1"


def test_a_run_without_retries_shows_no_attempts(tmp_path):
    got = _status(tmp_path)
    assert got.returncode == 0, got.stderr
    assert "attempts:" not in got.stdout and "tracker:" not in got.stdout
