"""Live progress through the real runtime: an embedded Ray head, real bash, and a
stand-in trainer that prints verl's console-logger lines from a Ray actor (as
verl's TaskRunner does) and writes verl's file-logger JSONL where
$VERL_FILE_LOGGER_PATH says. GPU training cannot run here; the formats are
verl's (verl/utils/logger/aggregate_logger.py, verl/utils/tracking.py)."""

from __future__ import annotations

import json

import pytest

from runtime_helpers import clean_env, run_tutorrl
from runtime_helpers import records_of as _records

pytestmark = [pytest.mark.slow, pytest.mark.needs_ray]

TRAINER = r'''#!/usr/bin/env bash
set -euo pipefail
python - <<'PY'
import json, os, pprint, ray
ray.init()

@ray.remote
class TaskRunner:
    def run(self):
        print("Total training steps: 4", flush=True)
        path = os.environ.get("VERL_FILE_LOGGER_PATH")
        out = open(path, "w") if path else None
        for step in (1, 2, 3):
            data = {"critic/score/mean": step / 10, "perf/time_per_step": 90.0, "actor/lr": 1e-06}
            if step < 3:  # step 3 only reaches the file logger
                print(" - ".join([f"step:{step}"] + [f"{k}:{pprint.pformat(v)}" for k, v in data.items()]),
                      flush=True)
            if out:
                out.write(json.dumps({"step": step, "data": data}) + "\n")
                out.flush()
        return path

print("file logger:", ray.get(TaskRunner.remote().run.remote()))
PY
'''


def test_metrics_follow_both_loggers_and_status_shows_them(make_bundle, workdir):
    bundle = make_bundle(TRAINER, gpus=1, loggers=("console", "file"))
    proc = run_tutorrl(["run", str(bundle)], workdir, clean_env(TUTORRL_EMBEDDED_NUM_GPUS="1"))
    assert proc.returncode == 0, proc.stderr
    (rec,) = _records(bundle)
    run_dir = bundle / "runs" / rec["run_id"]
    assert f"file logger: {run_dir.resolve()}/verl-metrics.jsonl" in proc.stdout
    points = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [p["step"] for p in points] == [1, 2, 3]
    assert [p["metrics"]["critic/score/mean"] for p in points] == [0.1, 0.2, 0.3]
    assert points[2]["source"] == "file"
    # Not a terminal: each state of the status line is one plain line.
    assert "Ray dashboard: http://127.0.0.1:" in proc.stderr
    assert "RUNNING, step 3/4, 40 steps/h, ETA 1m, score 0.3" in proc.stderr, proc.stderr

    shown = run_tutorrl(["status", rec["run_id"]], workdir)
    assert shown.returncode == 0, shown.stderr
    assert "progress:  step 3/4, 40 steps/h, score 0.3" in shown.stdout
    assert "critic/score/mean: ▁▅█" in shown.stdout and "steps 1-3, min 0.1, max 0.3, last 0.3" in shown.stdout
    data = json.loads(run_tutorrl(["status", rec["run_id"], "--format", "json"], workdir).stdout)
    assert data["step"] == 3 and data["total_steps"] == 4
    assert data["progress"]["rewards"] == [[1, 0.1], [2, 0.2], [3, 0.3]]


def test_console_only_and_a_log_without_metrics_file(make_bundle, workdir):
    bundle = make_bundle(TRAINER, gpus=1)  # loggers = ["console"]: no file logger path is given
    proc = run_tutorrl(["run", str(bundle)], workdir, clean_env(TUTORRL_EMBEDDED_NUM_GPUS="1"))
    assert proc.returncode == 0, proc.stderr
    (rec,) = _records(bundle)
    run_dir = bundle / "runs" / rec["run_id"]
    assert "file logger: None" in proc.stdout
    assert [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    # A run recorded before metrics.jsonl existed: status reads verl's lines from job.log.
    (run_dir / "metrics.jsonl").unlink()
    shown = run_tutorrl(["status", rec["run_id"]], workdir)
    assert "progress:  step 2/4, 40 steps/h, score 0.2" in shown.stdout
