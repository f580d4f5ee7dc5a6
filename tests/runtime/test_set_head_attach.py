"""Attaching a run to its set's head (runtime/head.py, attach) when a neighbour on the machine has shaped
the head's folder (issue 43): files that block or never end, a pid without its start time, a dashboard
address whose parsed host is not the loopback one its text starts with."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from pathlib import Path

import pytest

from tutorrl.errors import RefusedError
from tutorrl.runtime import head
from tutorrl.runtime.records import process_start_time


@pytest.fixture
def folder():
    made = Path(tempfile.mkdtemp(prefix="trl-", dir=head._run_dir_base()))
    _write(made / "token", "t0ken")
    _write(made / head.SET_HEAD_FILE, json.dumps(_doc()))
    yield made
    shutil.rmtree(made, ignore_errors=True)


def _doc(**changed) -> dict:
    return {"set_id": "set-x", "dashboard": "http://127.0.0.1:9", "pid": os.getpid(),
            "start": process_start_time(os.getpid()), **changed}


def _write(path: Path, text: str, mode: int = 0o600) -> None:
    path.unlink(missing_ok=True)
    path.write_text(text)
    os.chmod(path, mode)


def _attach_in_time(folder: Path):
    """attach, run where a blocking open would show as a thread still running, not a hung test."""
    said: list = []

    def run():
        try:
            said.append(head.attach(str(folder)))
        except RefusedError as exc:
            said.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(30)
    assert not thread.is_alive(), "attach blocked on a file of the head's folder"
    return said[0]


def test_the_head_as_published_attaches(folder):
    shared = _attach_in_time(folder)
    assert not isinstance(shared, RefusedError), shared
    assert (shared.url, shared.token) == ("http://127.0.0.1:9", "t0ken")


@pytest.mark.parametrize("name", ["token", head.SET_HEAD_FILE])
def test_a_fifo_in_the_head_folder_is_refused_without_blocking(folder, name):
    (folder / name).unlink()
    os.mkfifo(folder / name, 0o600)
    refused = _attach_in_time(folder)
    assert isinstance(refused, RefusedError) and f"{name} is not a regular file" in str(refused)


@pytest.mark.parametrize("name", ["token", head.SET_HEAD_FILE])
def test_a_file_that_never_ends_is_refused(folder, name):
    (folder / name).unlink()
    os.symlink("/dev/zero", folder / name)  # not followed
    refused = _attach_in_time(folder)
    assert isinstance(refused, RefusedError) and f"no set's Ray head there ({name} is a symlink; not followed)" \
        in str(refused)


def test_a_file_over_the_limit_is_refused(folder):
    _write(folder / "token", "t" * (head.MAX_SET_HEAD_FILE + 1))
    refused = _attach_in_time(folder)
    assert isinstance(refused, RefusedError) and f"over {head.MAX_SET_HEAD_FILE}" in str(refused)


@pytest.mark.parametrize("mode", [0o644, 0o620, 0o606])
def test_a_file_others_may_read_or_write_is_refused(folder, mode):
    os.chmod(folder / head.SET_HEAD_FILE, mode)
    refused = _attach_in_time(folder)
    assert isinstance(refused, RefusedError) and f"is not this user's alone (mode {mode:o})" in str(refused)


@pytest.mark.parametrize("changed", [{"start": None}, {"start": "1"}, {"pid": str(os.getpid())}])
def test_a_pid_without_its_start_time_is_refused(folder, changed):
    _write(folder / head.SET_HEAD_FILE, json.dumps(_doc(**changed)))
    refused = _attach_in_time(folder)
    assert isinstance(refused, RefusedError) and "no set's Ray head there" in str(refused)


def test_a_live_pid_that_started_at_another_time_is_not_the_head(folder):
    _write(folder / head.SET_HEAD_FILE, json.dumps(_doc(start=process_start_time(os.getpid()) - 1)))
    refused = _attach_in_time(folder)
    assert isinstance(refused, RefusedError) and "the set's Ray head is not running" in str(refused)


@pytest.mark.parametrize("url", ["http://127.0.0.1:1@127.0.0.2:9999", "http://user@127.0.0.1:9",
                                 "http://127.0.0.1:9@example.invalid:80", "http://10.0.0.1:9", "https://127.0.0.1:9",
                                 "http://127.0.0.1", "http://127.0.0.1:9/x?y", "http://localhost:9",
                                 "http://[::ffff:10.0.0.1]:9", "http://127.0.0.1:99999"])
def test_a_dashboard_is_accepted_only_on_a_loopback_host_with_no_userinfo(folder, url):
    _write(folder / head.SET_HEAD_FILE, json.dumps(_doc(dashboard=url)))
    refused = _attach_in_time(folder)
    assert isinstance(refused, RefusedError), url
    assert str(refused).endswith(f"the set's dashboard {url!r} is not a loopback address of this machine; the "
                                 "head's token is sent nowhere else")


@pytest.mark.parametrize("url", ["http://127.0.0.1:9", "http://127.0.0.2:9/", "http://[::1]:9"])
def test_loopback_dashboards_are_accepted(url):
    assert head.loopback_dashboard(url)
