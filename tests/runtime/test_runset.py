"""Running a set of bundles: N at a time on one embedded head, one status table, one stop.

The two slow tests start one real embedded Ray head each (through `tutorrl
run` itself) and dry-run real bundles with the real verl (CPU install), as
tests/e2e/test_run_dryrun.py does for single runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

import support

TUTORRL = [sys.executable, "-m", "tutorrl"]
BASE = (support.SPECS / "chess_tutor_grpo.toml").read_bytes()


def _env(state: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env["TUTORRL_STATE_HOME"] = str(state)
    return env


def _sweep(tmp_path: Path, grid: str) -> Path:
    (tmp_path / "specs").mkdir(exist_ok=True)
    (tmp_path / "specs" / "base.toml").write_bytes(BASE)
    (tmp_path / "specs" / "sweep.toml").write_text(f'[experiment]\nextends = "base.toml"\n\n[sweep]\ngrid = {grid}\n')
    proc = subprocess.run([*TUTORRL, "compile", "specs/sweep.toml", "--out", "sweep"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return tmp_path / "sweep"


def _set_id(stderr: str) -> str:
    return next(w for line in stderr.splitlines() for w in line.split() if w.startswith("set-")).rstrip(":")


# --- Without Ray.

def test_a_folder_of_bundles_runs_in_its_sweeps_order(tmp_path):
    from tutorrl.runtime.runset import expand

    folder = _sweep(tmp_path, '{ "actor.lr" = [3e-6, 1e-5, 1e-6] }')
    names = [json.loads((b / "manifest.json").read_text())["experiment"] for b in expand([str(folder)])]
    assert names == ["chess-tutor-grpo-lr_1e-06", "chess-tutor-grpo-lr_3e-06", "chess-tutor-grpo-lr_1e-05"]
    # A bundle named twice (itself and through its folder) runs once.
    one = expand([str(folder)])[0]
    assert len(expand([str(one), str(folder)])) == 3


@pytest.mark.parametrize("argv, words", [
    (["run", "a", "b", "--max-parallel", "0"], ["not a count of runs from 1 to 256"]),
    (["run", "SWEEP", "--detach"], ["--detach runs one bundle"]),
    (["run", "SWEEP", "specs/sweep.toml"], ["is a spec file, not a bundle folder"]),
    (["status", "set-nothing"], ["no such set"]),
    (["stop", "set-nothing"], ["no such set"]),
])
def test_what_a_set_cannot_do_is_said_before_any_head_starts(tmp_path, argv, words):
    folder = _sweep(tmp_path, '{ "actor.lr" = [3e-6, 1e-6] }')
    argv = [str(folder) if w == "SWEEP" else w for w in argv]
    proc = subprocess.run([*TUTORRL, *argv], cwd=tmp_path, env=_env(tmp_path / "state"), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    for word in words:
        assert word in proc.stderr
    assert not list(folder.glob("*/runs"))


def test_a_tampered_bundle_runs_no_bundle_of_the_set(tmp_path):
    folder = _sweep(tmp_path, '{ "actor.lr" = [3e-6, 1e-6] }')
    victim = sorted(folder.iterdir())[0]
    (victim / "launch.sh").write_text((victim / "launch.sh").read_text() + "\n# edited\n")
    proc = subprocess.run([*TUTORRL, "run", str(folder), "--dry-run"], cwd=tmp_path, env=_env(tmp_path / "state"),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "none was run" in proc.stderr and victim.name in proc.stderr
    assert not list(folder.glob("*/runs"))


def test_a_relative_root_default_is_this_folder_for_a_run_on_the_sets_head(tmp_path, monkeypatch):
    from tutorrl.compiler.load import parse_spec
    from tutorrl.runtime.runset import _rooted

    monkeypatch.chdir(tmp_path)
    # TINY_ROOT and CKPT_ROOT default to relative folders.
    spec, _ = parse_spec((support.SPECS / "tiny_cpu_grpo.toml").read_bytes(), "tiny.toml")
    env = _rooted({"CKPT_ROOT": "/shared/ckpt", "PATH": "/bin"}, spec)
    assert env == {"CKPT_ROOT": "/shared/ckpt", "PATH": "/bin", "TINY_ROOT": str(tmp_path / "build" / "tiny")}


# --- On a real embedded head.

def _overlap(records: list[dict]) -> int:
    """The most runs whose [started, ended] intervals hold one instant."""
    def t(s):
        return datetime.fromisoformat(s.replace("Z", "+00:00"))

    events = sorted([(t(r["started"]), 1) for r in records] + [(t(r["ended"]), -1) for r in records],
                    key=lambda e: (e[0], e[1]))
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


@pytest.mark.slow
def test_a_sweep_compiled_reviewed_and_dry_run_four_at_a_time(tmp_path):
    folder = _sweep(tmp_path, '{ "actor.lr" = [1e-6, 3e-6, 1e-5], "rollout.n" = [4, 8] }')
    bundles = sorted(folder.iterdir())
    assert len(bundles) == 6
    # Reviewed as one matrix: what varies, one column per launch.
    diff = subprocess.run([*TUTORRL, "diff", str(folder), "--format", "json"], capture_output=True, text=True)
    assert diff.returncode == 1, diff.stderr
    matrix = json.loads(diff.stdout)
    assert set(matrix["settings"]) == {"experiment.name", "actor.lr", "rollout.n"}
    assert sorted(matrix["settings"]["rollout.n"]) == [4, 4, 4, 8, 8, 8]

    env = _env(tmp_path / "state")
    proc = subprocess.run([*TUTORRL, "run", str(folder), "--max-parallel", "4", "--dry-run"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=580)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stderr.count("starting embedded Ray head") == 1
    records = [json.loads(p.read_text()) for p in folder.glob("*/runs/*/run.json")]
    assert len(records) == 6 and {r["status"] for r in records} == {"succeeded"}
    assert all(r["dry_run"] and r["address"] == records[0]["address"] for r in records)
    assert _overlap(records) <= 4
    # One table: point, state, step k/N, last reward.
    status = subprocess.run([*TUTORRL, "status", _set_id(proc.stderr)], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=120)
    assert status.returncode == 0, status.stderr
    lines = status.stdout.splitlines()
    assert lines[1].split() == ["POINT", "STATE", "STEP", "LAST", "REWARD", "RUN"]
    assert len(lines) == 2 + 6 and all("succeeded (dry run)" in line for line in lines[2:])
    assert lines[2].startswith("actor.lr=1e-06, rollout.n=4")
    assert {line.split()[-1] for line in lines[2:]} == {r["run_id"] for r in records}


@pytest.mark.slow
def test_stopping_a_set_stops_its_run_and_starts_no_more(tmp_path):
    folder = _sweep(tmp_path, '{ "actor.lr" = [1e-6, 3e-6] }')
    env = _env(tmp_path / "state")
    runner = subprocess.Popen([*TUTORRL, "run", str(folder), "--dry-run"], cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        set_id = None
        while time.monotonic() < deadline:
            sets = list((tmp_path / "state" / "sets").glob("set-*.json")) if (tmp_path / "state" / "sets").is_dir() \
                else []
            if sets:
                set_id = sets[0].stem
                doc = json.loads(sets[0].read_text())
                if doc["runs"]:
                    break
            time.sleep(0.2)
        assert set_id is not None and doc["runs"], "the set's first run never claimed its record"
        stop = subprocess.run([*TUTORRL, "stop", set_id], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=200)
        assert stop.returncode == 0, stop.stderr
        out, err = runner.communicate(timeout=200)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
    assert runner.returncode == 130, err[-3000:]
    records = [json.loads(p.read_text()) for p in folder.glob("*/runs/*/run.json")]
    # The first run was stopped (or had just ended); the second never started.
    assert len(records) == 1 and records[0]["status"] in ("stopped", "succeeded")
    assert json.loads((tmp_path / "state" / "sets" / f"{set_id}.json").read_text())["status"] == "stopped"
    assert "not started" in out
