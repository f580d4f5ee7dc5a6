"""A run record directs nothing unless this user's tutorrl wrote it on this machine.

`runs/` is outside the bundle digest: a shared or committed bundle can carry
any run.json. Crafted records (real files, real processes, a real HTTP server
on 127.0.0.1 that keeps every Authorization header it gets) are given to the
real `tutorrl runs`, `status`, `logs` and `stop`: nothing they name is removed
or signalled, and no token goes to the address they name. Records tutorrl
itself sealed still get their run closed and their head's folder removed.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest

import support
from runtime_helpers import DEAD_PID, crafted_record as _record
from tutorrl.runtime import head, lifecycle, records, trust

TOKEN = "the-users-cluster-token"


def _bundle(tmp_path: Path, record: dict, *, seal: bool = False) -> tuple[Path, Path]:
    bundle = tmp_path / "bundles" / "abcd"
    run_dir = bundle / "runs" / record["run_id"]
    run_dir.mkdir(parents=True)
    (bundle / "manifest.json").write_text("{}")
    if seal:
        records.create_record(run_dir, records.RunRecord(**{
            **record, "versions": records.Versions(**record["versions"]),
            "owner": records.Process(**record["owner"]),
            "head": records.Process(**record["head"]) if record.get("head") else None}))
    else:
        (run_dir / "run.json").write_text(json.dumps(record))
    return bundle, run_dir


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("keep me")
    return victim


@pytest.fixture
def server():
    s = support.HostileServer()
    s.routes["/api/v0/nodes"] = (200, {}, support.ray_nodes_answer())
    s.routes["/api/version"] = (200, {}, b'{"ray_version": "2.60.0"}')
    yield s
    s.close()


@pytest.fixture
def live():
    """A process of this user that a crafted record names as its follower or its head."""
    proc = subprocess.Popen(["sleep", "600"], start_new_session=True)
    yield lifecycle.this_process(proc.pid), proc
    proc.kill()
    proc.wait()


def _cli(*args, cwd: Path, **env):
    return support.cli(*args, cwd=cwd, env={"RAY_AUTH_TOKEN": TOKEN, **env}, timeout=120)


@pytest.mark.parametrize("head_dir", ["victim", "."])
@pytest.mark.parametrize("command", ["status", "runs", "logs", "stop"])
def test_a_crafted_record_removes_nothing_it_names(tmp_path, head_dir, command):
    victim = _victim(tmp_path)
    named = str(victim) if head_dir == "victim" else "."
    bundle, run_dir = _bundle(tmp_path, _record(head={"host": socket.gethostname(), "pid": DEAD_PID, "start": 1},
                                                head_dir=named))
    got = _cli(command, str(bundle if command == "runs" else run_dir), cwd=victim)
    assert (victim / "precious.txt").read_text() == "keep me"
    assert "Traceback" not in got.stderr
    assert json.loads((run_dir / "run.json").read_text())["status"] == "running"  # left as it was
    if command == "stop":
        assert got.returncode == 2 and "not verified" in got.stderr
    elif command in ("status", "runs"):
        assert got.returncode == 0 and "not verified" in got.stdout


@pytest.mark.parametrize("command", ["status", "runs", "logs", "stop"])
def test_a_crafted_cluster_record_gets_no_token(tmp_path, server, command):
    bundle, run_dir = _bundle(tmp_path, _record(address_kind="cluster", address=server.url, dashboard=server.url))
    got = _cli(command, str(bundle if command == "runs" else run_dir), cwd=tmp_path)
    assert "Traceback" not in got.stderr
    assert server.tokens_seen() == []


def test_a_crafted_embedded_record_gets_no_head_token(tmp_path, server, live):
    proc_record, proc = live
    folder = Path(tempfile.mkdtemp(prefix="trl-", dir=head._run_dir_base()))
    try:
        (folder / "token").write_text("the-heads-token")
        bundle, run_dir = _bundle(tmp_path, _record(head=lifecycle_dict(proc_record), head_dir=str(folder),
                                                    dashboard=server.url))
        got = _cli("status", str(run_dir), cwd=tmp_path)
        assert got.returncode == 0 and "Traceback" not in got.stderr
        assert server.tokens_seen() == []
        assert proc.poll() is None  # the head it names was not signalled
        assert folder.is_dir()
    finally:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


def lifecycle_dict(p: records.Process) -> dict:
    return {"host": p.host, "pid": p.pid, "start": p.start}


def test_a_crafted_record_signals_no_process(tmp_path, live):
    proc_record, proc = live
    bundle, run_dir = _bundle(tmp_path, _record(owner=lifecycle_dict(proc_record)))
    got = _cli("stop", str(run_dir), cwd=tmp_path)
    assert got.returncode == 2 and "not verified" in got.stderr and "Traceback" not in got.stderr
    assert proc.poll() is None


def test_a_sealed_record_is_still_acted_on_but_deletes_only_a_head_folder(tmp_path):
    """The same record written by tutorrl (sealed): its run is closed; a head folder of this user under
    the temp base is removed, any other folder it names is not."""
    victim = _victim(tmp_path)
    dead_head = {"host": socket.gethostname(), "pid": DEAD_PID, "start": 1}
    bundle, run_dir = _bundle(tmp_path, _record(head=dead_head, head_dir=str(victim)), seal=True)
    got = _cli("status", str(run_dir), cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    assert "not verified" not in got.stdout
    assert records.read_record(run_dir).status == "stopped"  # closed: its owner and head are gone
    assert (victim / "precious.txt").read_text() == "keep me"

    folder = Path(tempfile.mkdtemp(prefix="trl-", dir=head._run_dir_base()))
    other = tmp_path / "other"
    rec = _record(run_id="tutorrl-abcd-2", submission_id="tutorrl-abcd-2", attempt=2, head=dead_head,
                  head_dir=str(folder))
    run_dir2 = bundle / "runs" / rec["run_id"]
    run_dir2.mkdir()
    records.create_record(run_dir2, records.RunRecord(**{
        **rec, "versions": records.Versions(**rec["versions"]), "owner": records.Process(**rec["owner"]),
        "head": records.Process(**rec["head"])}))
    got = _cli("status", str(run_dir2), cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    assert not folder.exists() and not other.exists()


def test_a_sealed_cluster_record_gets_the_token_and_a_changed_one_does_not(tmp_path, server):
    bundle, run_dir = _bundle(tmp_path, _record(address_kind="cluster", address=server.url), seal=True)
    _cli("runs", str(bundle), cwd=tmp_path)
    assert server.tokens_seen() and set(server.tokens_seen()) == {f"Bearer {TOKEN}"}
    server.seen.clear()
    text = (run_dir / "run.json").read_text()
    (run_dir / "run.json").write_text(text.replace('"attempt": 1', '"attempt": 7'))
    got = _cli("runs", str(bundle), cwd=tmp_path)
    assert "not verified" in got.stdout
    assert server.tokens_seen() == []


def test_the_key_is_private_and_a_shared_key_is_not_trusted(tmp_path, monkeypatch):
    monkeypatch.setenv(trust.STATE_ENV, str(tmp_path / "state"))
    assert trust.seal(b"x") is not None
    home = tmp_path / "state"
    assert (home.stat().st_mode & 0o777) == 0o700
    assert ((home / trust.KEY_FILE).stat().st_mode & 0o777) == 0o600
    sealed = trust.seal(b"record")
    assert trust.verify(b"record", sealed) and not trust.verify(b"recorD", sealed)
    os.chmod(home / trust.KEY_FILE, 0o644)  # readable by others: anyone could forge with it
    assert not trust.verify(b"record", sealed)


@pytest.mark.parametrize("address", ["http://[::1", "http://[::1\x1b[31m]:80", "nonsense"])
def test_a_sealed_record_with_an_address_that_is_no_url_is_shown(tmp_path, address):
    bundle, run_dir = _bundle(tmp_path, _record(address_kind="cluster", address=address), seal=True)
    got = _cli("status", str(run_dir), cwd=tmp_path)
    assert got.returncode == 0 and "Traceback" not in got.stderr
    assert records.read_record(run_dir).status == "running"  # unreachable: left open, as for a cluster that is down
