"""`tutorrl logs RUN --follow` of a job no tutorrl run follows: Ray's log stream
(`tail_job_logs`), not the whole log fetched again every second."""

from __future__ import annotations

import types

from tutorrl.runtime import lifecycle, observe


class _Client:
    """A Jobs API client standing in for Ray's: a log stream, the whole log, the job's status."""

    def __init__(self, log: str, streamed: list[str], *, breaks: bool = False, running_polls: int = 0):
        self.log, self.streamed, self.breaks = log, streamed, breaks
        self.running_polls = running_polls  # status answers that say RUNNING after the stream stops
        self.whole_log_fetches = 0

    async def tail_job_logs(self, submission_id):
        for chunk in self.streamed:
            yield chunk
        if self.breaks:
            raise ConnectionError("websocket closed")

    def get_job_status(self, submission_id):
        if self.running_polls > 0:
            self.running_polls -= 1
            return types.SimpleNamespace(value="RUNNING")
        return types.SimpleNamespace(value="SUCCEEDED")

    def get_job_logs(self, submission_id):
        self.whole_log_fetches += 1
        return self.log


def _follow(monkeypatch, tmp_path, client) -> str:
    record = types.SimpleNamespace(status="running", owner=None, submission_id="tutorrl-abcd-1")
    reconciled = []
    monkeypatch.setattr(lifecycle, "find_run", lambda run: tmp_path)
    monkeypatch.setattr(lifecycle, "reconcile", lambda run_dir: reconciled.append(run_dir) or record)
    monkeypatch.setattr(lifecycle, "alive", lambda owner: False)
    monkeypatch.setattr(lifecycle, "client_for", lambda rec: client)
    monkeypatch.setattr(observe.time, "sleep", lambda s: None)
    pieces = list(observe.log_chunks("tutorrl-abcd-1", follow=True))
    assert len(reconciled) == 2  # before, and once the job ended
    assert all(pieces)  # no empty piece: each is something to write
    return b"".join(pieces).decode()


def test_follow_streams_the_log_and_fetches_it_whole_only_to_complete_it(monkeypatch, tmp_path):
    client = _Client("step 1\nstep 2\nstep 3\ndone\n", ["step 1\n", "step 2\n", "step 3\n"])
    assert _follow(monkeypatch, tmp_path, client) == "step 1\nstep 2\nstep 3\ndone\n"
    assert client.whole_log_fetches == 1


def test_a_stream_that_breaks_off_is_completed_from_the_polled_log_without_repeats(monkeypatch, tmp_path):
    client = _Client("step 1\nstep 2\ndone\n", ["step 1\n"], breaks=True, running_polls=2)
    assert _follow(monkeypatch, tmp_path, client) == "step 1\nstep 2\ndone\n"
