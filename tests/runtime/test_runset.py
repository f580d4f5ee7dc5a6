"""Running a set of bundles: N at a time on one embedded head, one status table, one stop.

The slow tests start real Ray heads (an embedded one through `tutorrl run`
itself, or the loopback cluster of conftest.py) and dry-run real bundles with
the real verl (CPU install), as tests/e2e/test_run_dryrun.py does for single
runs, or run stand-in launches a test holds open. The tests of a detached
set's wait give the job's Python a stand-in `ray` that is held starting (or
fails at once), so a signal lands in that window by a file appearing, not by
timing.
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
from runtime_helpers import ECHO_LAUNCH, clean_env, procs_with_env, records_of, wait_for

TUTORRL = [sys.executable, "-m", "tutorrl"]
BASE = (support.SPECS / "chess_tutor_grpo.toml").read_bytes()


def _env(state: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env["TUTORRL_STATE_HOME"] = str(state)
    return env


def _sweep(tmp_path: Path, grid: str, extra: str = "") -> Path:
    (tmp_path / "specs").mkdir(exist_ok=True)
    (tmp_path / "specs" / "base.toml").write_bytes(BASE)
    (tmp_path / "specs" / "sweep.toml").write_text(f'[experiment]\nextends = "base.toml"\n\n[sweep]\ngrid = {grid}\n'
                                                   + extra)
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
    (["run", "SWEEP", "specs/sweep.toml"], ["is a spec file, not a bundle folder"]),
    (["status", "set-nothing"], ["no such set"]),
    (["stop", "set-nothing"], ["no such set"]),
    (["run", "SWEEP", "--upload", "--dry-run"], ["--upload only applies with --address"]),
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


def test_status_lists_the_open_sets_and_the_last_ten_that_ended_and_all_with_all(tmp_path, monkeypatch):
    from tutorrl.runtime import lifecycle, runset

    state = tmp_path / "state"
    monkeypatch.setenv("TUTORRL_STATE_HOME", str(state))

    def record(n: int, status: str, owner=None) -> runset.SetRecord:
        # Started in order n; ended in the reverse order, so "the last to end" is not "the last started".
        return runset.SetRecord(set_id=f"set-{n:03d}", started=f"2026-01-01T00:{n:02d}:00.000Z", cwd=str(tmp_path),
                                bundles=[], points=[], max_parallel=1, address="", address_kind="embedded",
                                dry_run=True, status=status, owner=owner,
                                ended=None if status == "running" else f"2026-01-02T00:{59 - n:02d}:00.000Z")

    for n in range(14):
        runset._write(record(n, "succeeded" if n % 2 else "failed"))
    runset._write(record(14, "running", lifecycle.this_process()))  # open: its owner (this test) is alive
    env = _env(state)

    def listed(*extra):
        proc = subprocess.run([*TUTORRL, "status", *extra], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr
        return proc

    recent = listed()
    shown = [line.split()[0] for line in recent.stdout.splitlines() if line.startswith("set-")]
    # The ten that ended last are the ten started first (0..9); the open one always.
    assert shown == [f"set-{n:03d}" for n in (*range(10), 14)]
    assert "4 older sets that ended not shown" in recent.stderr and "--all" in recent.stderr
    every = listed("--all")
    assert [line.split()[0] for line in every.stdout.splitlines() if line.startswith("set-")] == [
        f"set-{n:03d}" for n in range(15)]
    assert "not shown" not in every.stderr
    as_json = json.loads(listed("--format", "json").stdout)
    assert [e["set_id"] for e in as_json] == shown
    assert len(json.loads(listed("--all", "--format", "json").stdout)) == 15
    refused = subprocess.run([*TUTORRL, "status", "set-000", "--all"], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=120)
    assert refused.returncode == 2 and "takes no run or set id" in refused.stderr


def test_a_run_is_given_the_sets_head_only_where_a_live_set_head_is(tmp_path, monkeypatch):
    import tempfile

    from tutorrl.errors import RefusedError
    from tutorrl.runtime import head

    # Not a head's folder (not a trl-* folder right under the temp base): refused, nothing read from it.
    with pytest.raises(RefusedError, match="no set's Ray head there"):
        head.attach(str(tmp_path))
    folder = Path(tempfile.mkdtemp(prefix="trl-", dir=head._run_dir_base()))
    try:
        (folder / "token").write_text("t0ken")
        os.chmod(folder / "token", 0o600)  # as the head writes it
        # A head's folder that no set published: a single run's head is no set's to share.
        with pytest.raises(RefusedError, match="no set's Ray head there"):
            head.attach(str(folder))
        assert not head.is_shared(str(folder))
        # Published by a head process that has exited: not running.
        gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True)
        (folder / head.SET_HEAD_FILE).write_text(json.dumps(
            {"set_id": "set-x", "dashboard": "http://127.0.0.1:9", "pid": int(gone.stdout), "start": 1}))
        os.chmod(folder / head.SET_HEAD_FILE, 0o600)
        assert head.is_shared(str(folder))
        with pytest.raises(RefusedError, match="is not running"):
            head.attach(str(folder))
        # A live one (this test's own process stands in for the head).
        from tutorrl.runtime.records import process_start_time

        (folder / head.SET_HEAD_FILE).write_text(json.dumps(
            {"set_id": "set-x", "dashboard": "http://127.0.0.1:9", "pid": os.getpid(),
             "start": process_start_time(os.getpid())}))
        shared = head.attach(str(folder))
        assert (shared.url, shared.token, shared.run_dir) == ("http://127.0.0.1:9", "t0ken", folder)
        assert shared.headers == {"Authorization": "Bearer t0ken"}
    finally:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


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


SECRET = "pw-set-7d2a$odd"


def _bytes_under(*folders: Path) -> bytes:
    return b"".join(p.read_bytes() for f in folders for p in f.rglob("*") if p.is_file())


@pytest.mark.slow
@pytest.mark.needs_ray  # an embedded head
def test_a_sweep_compiled_reviewed_and_dry_run_four_at_a_time(tmp_path):
    # A passthrough secret: the runs take it as on an embedded head of their own, never written down.
    # The user: one base, one sweep, 12 bundles.
    folder = _sweep(tmp_path, '{ "actor.lr" = [1e-6, 3e-6, 1e-5], "rollout.n" = [4, 8], "data.seed" = [1, 2] }',
                    '\n[env]\npassthrough = ["MY_SECRET"]\n')
    bundles = sorted(folder.iterdir())
    assert len(bundles) == 12
    # Reviewed as one matrix: what varies, one column per launch.
    diff = subprocess.run([*TUTORRL, "diff", str(folder), "--format", "json"], capture_output=True, text=True)
    assert diff.returncode == 1, diff.stderr
    matrix = json.loads(diff.stdout)
    assert set(matrix["settings"]) == {"experiment.name", "actor.lr", "rollout.n", "data.seed"}
    assert sorted(matrix["settings"]["rollout.n"]) == [4] * 6 + [8] * 6
    assert len(set(matrix["settings"]["experiment.name"])) == 12

    env = _env(tmp_path / "state") | {"MY_SECRET": SECRET}
    proc = subprocess.run([*TUTORRL, "run", str(folder), "--max-parallel", "4", "--dry-run"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=580)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stderr.count("starting embedded Ray head") == 1
    records = [json.loads(p.read_text()) for p in folder.glob("*/runs/*/run.json")]
    assert len(records) == 12 and {r["status"] for r in records} == {"succeeded"}
    # One head: every run recorded the same embedded head (its process, its folder, its dashboard).
    assert {r["address_kind"] for r in records} == {"embedded"}
    assert len({(r["address"], r["head_dir"], r["head"]["pid"]) for r in records}) == 1
    assert all(r["dry_run"] for r in records)
    assert not Path(records[0]["head_dir"]).exists()  # stopped, its folder gone, when the set ended
    assert SECRET.encode() not in _bytes_under(folder, tmp_path / "state")
    assert 2 <= _overlap(records) <= 4, _overlap(records)
    # One table: point, state, step k/N, last reward.
    status = subprocess.run([*TUTORRL, "status", _set_id(proc.stderr)], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=120)
    assert status.returncode == 0, status.stderr
    lines = status.stdout.splitlines()
    assert lines[1].split() == ["POINT", "STATE", "STEP", "LAST", "REWARD", "RUN"]
    assert len(lines) == 2 + 12 and all("succeeded (dry run)" in line for line in lines[2:])
    assert lines[2].startswith("actor.lr=1e-06, data.seed=1, rollout.n=4")
    assert {line.split()[-1] for line in lines[2:]} == {r["run_id"] for r in records}


@pytest.mark.slow
@pytest.mark.needs_ray  # an embedded head
def test_a_quiet_set_shows_each_runs_own_lines_as_one_quiet_run_does(tmp_path):
    folder = _sweep(tmp_path, '{ "actor.lr" = [1e-6, 3e-6] }')
    proc = subprocess.run([*TUTORRL, "run", str(folder), "--dry-run", "--quiet"], cwd=tmp_path,
                          env=_env(tmp_path / "state"), capture_output=True, text=True, timeout=580)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run_ids = [json.loads(p.read_text())["run_id"] for p in folder.glob("*/runs/*/run.json")]
    assert len(run_ids) == 2
    for run_id in run_ids:
        # Each run's own lines, under its [k/N]: its run id's state lines, never verl's log.
        assert any(line.startswith(("tutorrl: [1/2] " + run_id, "tutorrl: [2/2] " + run_id))
                   for line in proc.stderr.splitlines()), proc.stderr
    # Nothing but tutorrl's lines: no run's job log (verl's, Ray's) reaches the terminal.
    assert [line for line in proc.stderr.splitlines() if line and not line.startswith("tutorrl: ")] == []


@pytest.mark.slow
@pytest.mark.needs_ray  # an embedded head
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


# --- Detached, on stand-in launches a test can hold open.

GATED = """#!/usr/bin/env bash
set -euo pipefail
printf '%s' "$MY_SECRET" | sha256sum | cut -c1-16 > "$GATE/seen-$POINT"
touch "$GATE/started-$POINT"
while [ ! -e "$GATE/release-$POINT" ]; do sleep 0.2; done
echo "point $POINT done"
"""


def _api(url: str, token: str, path: str) -> bytes:
    import urllib.request

    req = urllib.request.Request(url + path, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return resp.read()


@pytest.mark.slow
@pytest.mark.needs_ray  # an embedded head
def test_a_detached_set_runs_two_at_a_time_on_one_head_and_keeps_its_secret(make_bundle, workdir, tmp_path):
    import hashlib

    gate = workdir / "gate"
    gate.mkdir()
    bundles = [make_bundle(GATED, env={"GATE": str(gate), "POINT": str(n)}, passthrough=["MY_SECRET"])
               for n in (1, 2, 3)]
    state = tmp_path / "state"
    env = clean_env(MY_SECRET=SECRET, TUTORRL_EMBEDDED_NUM_GPUS="1", TUTORRL_STATE_HOME=str(state))
    detach = subprocess.run([*TUTORRL, "run", *map(str, bundles), "--max-parallel", "2", "--detach"], cwd=workdir,
                            env=env, capture_output=True, text=True, timeout=300)
    assert detach.returncode == 0, detach.stderr
    set_id = detach.stdout.strip()
    assert set_id.startswith("set-") and f"tutorrl status {set_id}" in detach.stderr
    doc = json.loads((state / "sets" / f"{set_id}.json").read_text())
    supervisor = doc["owner"]["pid"]
    try:
        wait_for(lambda: all((gate / f"started-{n}").exists() for n in (1, 2)), 120, "two runs started")
        assert not (gate / "started-3").exists()  # (and below: it started only once the first was released)
        # `tutorrl status` lists the set as one row, its runs not as runs of their own.
        listed = subprocess.run([*TUTORRL, "status"], cwd=workdir, env=env, capture_output=True, text=True,
                                timeout=120)
        assert listed.returncode == 0, listed.stderr
        rows = [line for line in listed.stdout.splitlines() if line.startswith("set-")]
        assert len(rows) == 1 and rows[0].split()[:2] == [set_id, "running"] and "(detached)" in rows[0]
        assert "tutorrl-" not in listed.stdout
        as_json = json.loads(subprocess.run([*TUTORRL, "status", "--format", "json"], cwd=workdir, env=env,
                                            capture_output=True, text=True, timeout=120).stdout)
        assert [(e["kind"], e["set_id"], e["bundles"]) for e in as_json] == [("set", set_id, 3)]
        (gate / "release-1").touch()
        wait_for(lambda: (gate / "started-3").exists(), 120, "the third run, once the first ended")
        # The set's head, while it runs: Ray's own records of the jobs hold no secret value.
        doc = json.loads((state / "sets" / f"{set_id}.json").read_text())
        head_dir = Path(doc["head_dir"])
        token = (head_dir / "token").read_text().strip()
        jobs = json.loads(_api(doc["address"], token, "/api/jobs/"))
        assert len(jobs) == 3 and all("MY_SECRET" not in json.dumps(j["runtime_env"]) for j in jobs)
        assert SECRET.encode() not in json.dumps(jobs).encode()
        assert SECRET.encode() not in _bytes_under(head_dir / "ray")
        table = subprocess.run([*TUTORRL, "status", set_id], cwd=workdir, env=env, capture_output=True, text=True,
                               timeout=120)
        assert table.returncode == 0 and len(table.stdout.splitlines()) == 2 + 3, table.stdout + table.stderr
        for n in (2, 3):
            (gate / f"release-{n}").touch()

        def ended():
            d = json.loads((state / "sets" / f"{set_id}.json").read_text())
            return d["status"] != "running" and d

        doc = wait_for(ended, 180, "the set to end")
    finally:
        for release in (gate / f"release-{n}" for n in (1, 2, 3)):
            if not release.exists():  # (touching one again would move the time the third run is held to)
                release.touch()
    assert doc["status"] == "succeeded", doc
    # Every job saw the value (its digest, written by the job), on the one head the set started.
    digest = hashlib.sha256(SECRET.encode()).hexdigest()[:16]
    assert [(gate / f"seen-{n}").read_text().strip() for n in (1, 2, 3)] == [digest] * 3
    records = [json.loads(p.read_text()) for b in bundles for p in b.glob("runs/*/run.json")]
    assert len(records) == 3 and {r["status"] for r in records} == {"succeeded"}
    assert {(r["address_kind"], r["address"], r["head_dir"], r["head"]["pid"]) for r in records} == {
        ("embedded", doc["address"], doc["head_dir"], doc["head"]["pid"])}
    assert SECRET.encode() not in _bytes_under(*bundles, state)
    # At most two at once: the third started after the first was let go, and no instant held three runs.
    assert (gate / "started-3").stat().st_mtime_ns >= (gate / "release-1").stat().st_mtime_ns
    assert _overlap(records) <= 2
    wait_for(lambda: not _alive(supervisor), 60, "the supervisor to exit")
    assert not head_dir.exists() and procs_with_env("TUTORRL_RUN_ID", set_id) == []


@pytest.mark.slow
@pytest.mark.needs_ray  # an embedded head
def test_one_run_of_a_detached_set_stops_alone_then_the_set_stops(make_bundle, workdir, tmp_path):
    gate = workdir / "gate"
    gate.mkdir()
    bundles = [make_bundle(GATED, env={"GATE": str(gate), "POINT": str(n)}, passthrough=["MY_SECRET"])
               for n in (1, 2)]
    state = tmp_path / "state"
    env = clean_env(MY_SECRET=SECRET, TUTORRL_EMBEDDED_NUM_GPUS="1", TUTORRL_STATE_HOME=str(state))
    detach = subprocess.run([*TUTORRL, "run", *map(str, bundles), "--detach"], cwd=workdir, env=env,
                            capture_output=True, text=True, timeout=300)
    assert detach.returncode == 0, detach.stderr
    set_id = detach.stdout.strip()
    record_path = state / "sets" / f"{set_id}.json"

    def run_of(bundle):
        def claimed():
            return json.loads(record_path.read_text())["runs"].get(str(bundle.resolve()))
        return claimed

    first = Path(wait_for(run_of(bundles[0]), 120, "the first run's record"))
    wait_for(lambda: (gate / "started-1").exists(), 120, "the first job")
    # Stopping one run of the set stops its job, not the set's head: the set goes on with the next.
    stop = subprocess.run([*TUTORRL, "stop", str(first)], cwd=workdir, env=env, capture_output=True, text=True,
                          timeout=200)
    assert stop.returncode == 0, stop.stderr
    assert json.loads((first / "run.json").read_text())["status"] == "stopped"
    second = Path(wait_for(run_of(bundles[1]), 120, "the second run's record"))
    wait_for(lambda: (gate / "started-2").exists(), 120, "the second job, on the same head")
    a, b = (json.loads((p / "run.json").read_text()) for p in (first, second))
    assert (a["head"], a["head_dir"]) == (b["head"], b["head_dir"])
    stop = subprocess.run([*TUTORRL, "stop", set_id], cwd=workdir, env=env, capture_output=True, text=True,
                          timeout=200)
    assert stop.returncode == 0, stop.stderr
    doc = json.loads(record_path.read_text())
    assert doc["status"] == "stopped" and doc["exit_codes"] == {str(bundles[0].resolve()): 130,
                                                                  str(bundles[1].resolve()): 130}
    assert json.loads((second / "run.json").read_text())["status"] == "stopped"
    assert not (gate / "release-2").exists()  # the job was stopped, not let go
    assert not Path(a["head_dir"]).exists() and procs_with_env("TUTORRL_RUN_ID", set_id) == []


def _alive(pid: int) -> bool:
    try:
        return b"zombie" not in Path(f"/proc/{pid}/status").read_bytes()
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.needs_ray  # an embedded head
def test_a_set_run_with_upload_ships_each_bundle_as_its_jobs_working_dir(ray_cluster, make_bundle, workdir, tmp_path):
    # A loopback cluster: without --upload each run would take this machine's files (test_run_cluster.py).
    bundles = [make_bundle(ECHO_LAUNCH + 'echo "cwd=[$(pwd)]"\n', env={"A": str(n)}, passthrough=["MY_SECRET"])
               for n in (1, 2)]
    state = tmp_path / "state"
    env = clean_env(MY_SECRET="x", RAY_AUTH_TOKEN=ray_cluster["token"], TUTORRL_STATE_HOME=str(state))
    proc = subprocess.run([*TUTORRL, "run", *map(str, bundles), "--address", ray_cluster["url"], "--dry-run",
                           "--upload"], cwd=workdir, env=env, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    records = [r for b in bundles for r in records_of(b)]
    assert len(records) == 2 and all(r["working_dir_upload"] and r["status"] == "succeeded" for r in records)
    assert {r["address"] for r in records} == {ray_cluster["url"]}
    set_id = _set_id(proc.stderr)
    assert json.loads((state / "sets" / f"{set_id}.json").read_text())["upload"] is True
    # Each job ran in Ray's copy of its own bundle, not in the folder tutorrl ran from.
    logs = [(state / "sets" / set_id / f"{n:04d}.log").read_text() for n in (1, 2)]
    for n, log in enumerate(logs, 1):
        assert "runtime_resources/working_dir_files" in log and f"cwd=[{workdir}]" not in log
        assert f"driver A=[{n}]" in log


HELD_HEAD = """#!/usr/bin/env bash
touch "$HEAD_GATE"
exec sleep 600
"""


def _detach_held_set(make_bundle, workdir, tmp_path):
    """`run --detach` of a two-bundle set whose head is held starting: the job's Python has a `ray`
    beside it that never comes up, the window `run --detach` waits through before it says
    "detached". Returns the launcher, the file that says the head is starting, the state folder
    the environment and the bundles."""
    fake = tmp_path / "fake-python"
    fake.mkdir()
    (fake / "python").symlink_to(sys.executable)
    (fake / "ray").write_text(HELD_HEAD)
    (fake / "ray").chmod(0o755)
    gate = tmp_path / "head-starting"
    bundles = [make_bundle(GATED, env={"GATE": str(tmp_path), "POINT": str(n)}) for n in (1, 2)]
    state = tmp_path / "state"
    env = clean_env(TUTORRL_STATE_HOME=str(state), TUTORRL_PYTHON=str(fake / "python"), HEAD_GATE=str(gate),
                    TUTORRL_EMBEDDED_NUM_GPUS="1")
    launcher = subprocess.Popen([*TUTORRL, "run", *map(str, bundles), "--detach"], cwd=workdir, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return launcher, gate, state, env, bundles


@pytest.mark.parametrize("signum", [pytest.param(15, id="SIGTERM"), pytest.param(2, id="SIGINT")])
def test_a_signal_before_a_set_is_detached_stops_it_and_says_what_started(make_bundle, workdir, tmp_path, signum):
    import signal

    launcher, gate, state, env, bundles = _detach_held_set(make_bundle, workdir, tmp_path)
    supervisor = None
    try:
        wait_for(lambda: gate.exists() or launcher.poll() is not None, 120, "the set's head to be starting")
        assert gate.exists(), launcher.communicate()[1] + "".join(
            p.read_text() for p in state.glob("sets/*/supervisor.log"))
        (record_path,) = (state / "sets").glob("set-*.json")
        supervisor = json.loads(record_path.read_text())["owner"]["pid"]
        assert supervisor != launcher.pid  # the supervisor holds the set; the launcher still waits
        launcher.send_signal(signum)
        out, err = launcher.communicate(timeout=200)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
        if supervisor is not None and _alive(supervisor):  # (a failed test: it stops its held head itself)
            os.kill(supervisor, signal.SIGTERM)
            wait_for(lambda: not _alive(supervisor), 60, "the supervisor left running to stop")
    set_id = record_path.stem
    assert launcher.returncode == 130, err
    assert out == ""  # no set id: the set was never detached
    assert f"{signal.Signals(signum).name} before the set was detached" in err and "Traceback" not in err
    assert "0 of 2 runs started, 2 not started" in err
    doc = json.loads(record_path.read_text())
    assert doc["status"] == "stopped" and doc["ended"] and doc["runs"] == {} and doc["exit_codes"] == {}
    assert not list(tmp_path.glob("started-*")) and not any(list(b.glob("runs/*")) for b in bundles)
    # Nothing left behind: the supervisor has exited, the held head was stopped and its folder removed.
    assert not _alive(supervisor)
    assert procs_with_env("TUTORRL_RUN_ID", set_id) == []
    assert doc["head_dir"] is None or not Path(doc["head_dir"]).exists()
    table = subprocess.run([*TUTORRL, "status", set_id], cwd=workdir, env=env, capture_output=True, text=True,
                           timeout=120)
    assert table.returncode == 0 and table.stdout.count("not started") == 2, table.stdout


def test_a_detached_set_whose_head_does_not_start_is_not_said_to_be_detached(make_bundle, workdir, tmp_path):
    fake = tmp_path / "fake-python"
    fake.mkdir()
    (fake / "python").symlink_to(sys.executable)
    (fake / "ray").write_text("#!/usr/bin/env bash\necho 'no ray here' >&2\nexit 3\n")
    (fake / "ray").chmod(0o755)
    bundles = [make_bundle(GATED, env={"GATE": str(tmp_path), "POINT": str(n)}) for n in (1, 2)]
    state = tmp_path / "state"
    env = clean_env(TUTORRL_STATE_HOME=str(state), TUTORRL_PYTHON=str(fake / "python"),
                    TUTORRL_EMBEDDED_NUM_GPUS="1")
    proc = subprocess.run([*TUTORRL, "run", *map(str, bundles), "--detach"], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode not in (0, 130) and proc.stdout == "", proc.stderr
    assert "runs on after this shell exits" not in proc.stderr and "Traceback" not in proc.stderr
    (record_path,) = (state / "sets").glob("set-*.json")
    doc = json.loads(record_path.read_text())
    assert doc["status"] == "failed" and doc["runs"] == {} and doc["address"] == ""
    log = (state / "sets" / record_path.stem / "supervisor.log").read_text()
    assert "exited with code 3" in log and "no ray here" in log
    assert not _alive(doc["owner"]["pid"]) and procs_with_env("TUTORRL_RUN_ID", record_path.stem) == []


def test_run_set_returns_what_the_set_came_to(make_bundle, workdir, tmp_path, monkeypatch, capsys):
    """The API's set: the same detach whose head does not start, called in-process: a typed SetRun (its rows,
    the command's exit code), and nothing on standard output (the set's table is the handler's to print)."""
    import tutorrl

    fake = tmp_path / "fake-python"
    fake.mkdir()
    (fake / "python").symlink_to(sys.executable)
    (fake / "ray").write_text("#!/usr/bin/env bash\necho 'no ray here' >&2\nexit 3\n")
    (fake / "ray").chmod(0o755)
    bundles = [make_bundle(GATED, env={"GATE": str(tmp_path), "POINT": str(n)}) for n in (1, 2)]
    for name, value in clean_env(TUTORRL_STATE_HOME=str(tmp_path / "state"), TUTORRL_PYTHON=str(fake / "python"),
                                 TUTORRL_EMBEDDED_NUM_GPUS="1").items():
        monkeypatch.setenv(name, value)
    for name in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(workdir)
    done = tutorrl.run_set([str(b) for b in bundles], detach=True, trust_digests=True)
    (record_path,) = (tmp_path / "state" / "sets").glob("set-*.json")
    assert done.set_id == record_path.stem and done.status == "failed" and done.detached
    assert done.exit_code not in (0, 130)
    assert [(r.bundle, r.run, r.state, r.exit_code) for r in done.state.rows] == [
        (str(b.resolve()), None, "not started", None) for b in bundles]
    assert capsys.readouterr().out == ""


def test_a_set_stopped_by_tutorrl_stop_before_it_is_detached_is_not_said_to_be_detached(make_bundle, workdir,
                                                                                        tmp_path):
    launcher, gate, state, env, bundles = _detach_held_set(make_bundle, workdir, tmp_path)
    try:
        wait_for(lambda: gate.exists() or launcher.poll() is not None, 120, "the set's head to be starting")
        assert gate.exists(), launcher.communicate()[1]
        (record_path,) = (state / "sets").glob("set-*.json")
        stop = subprocess.run([*TUTORRL, "stop", record_path.stem], cwd=workdir, env=env, capture_output=True,
                              text=True, timeout=200)
        out, err = launcher.communicate(timeout=200)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    assert stop.returncode == 0, stop.stderr
    assert launcher.returncode == 130 and out == "", err
    assert "stopped before it was detached" in err and "runs on after this shell exits" not in err
    doc = json.loads(record_path.read_text())
    assert doc["status"] == "stopped" and doc["address"] == "" and doc["head_dir"] is None
    assert procs_with_env("TUTORRL_RUN_ID", record_path.stem) == []


def test_status_lists_the_single_runs_that_ended_last_and_every_one_with_all(tmp_path, monkeypatch):
    from tutorrl.runtime import lifecycle, records

    state = tmp_path / "state"
    monkeypatch.setenv("TUTORRL_STATE_HOME", str(state))
    for n in range(12):
        run_dir = tmp_path / "bundles" / f"b{n:02d}" / "runs" / f"tutorrl-b{n:02d}-1"
        run_dir.mkdir(parents=True)
        (run_dir / records.LOG_FILE).write_text(f"step:{n + 1} - critic/score/mean:0.5\n")
        records.create_record(run_dir, records.RunRecord(
            schema=1, run_id=run_dir.name, bundle="sha256:" + "0" * 64, submission_id=run_dir.name, attempt=1,
            address_kind="embedded", address="http://127.0.0.1:1", dry_run=False,
            versions=records.Versions(tutorrl="0", ray="2.60.0", python="3.11"),
            # Ended in the reverse order of their names: "the last to end" is not "the last named".
            started="2026-01-01T00:00:00.000Z", ended=f"2026-01-01T00:{59 - n:02d}:00.000Z",
            status="succeeded" if n % 2 else "failed", exit_code=0 if n % 2 else 1))
        lifecycle.index_run(run_dir)
    env = _env(state)

    def listed(*extra):
        proc = subprocess.run([*TUTORRL, "status", *extra], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr
        return proc

    recent = listed()
    lines = recent.stdout.splitlines()
    assert lines[0].split() == ["RUN", "STATE", "EXIT", "STEP", "ENDED", "(UTC)", "BUNDLE"]
    # Oldest to end first: b09 ended earliest of the ten shown, b00 last; b10 and b11 left out.
    assert [line.split()[0] for line in lines[1:]] == [f"tutorrl-b{n:02d}-1" for n in range(9, -1, -1)]
    assert lines[-1].split() == ["tutorrl-b00-1", "failed", "1", "1/?", "2026-01-01T00:59:00.000Z", "bundles/b00"]
    assert "2 older runs that ended not shown" in recent.stderr and "--all" in recent.stderr
    every = listed("--all")
    assert len(every.stdout.splitlines()) == 13 and "not shown" not in every.stderr
    as_json = json.loads(listed("--format", "json").stdout)
    assert [(e["kind"], e["run_id"], e["status"]) for e in as_json][-1] == ("run", "tutorrl-b00-1", "failed")
    assert len(as_json) == 10
