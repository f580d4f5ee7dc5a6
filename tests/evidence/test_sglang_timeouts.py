"""A silent sglang engine costs `tutorrl evidence --engine` seconds, not minutes: its info routes
are bounded on their own, and one engine's whole reading by its budget. Real HTTP servers on 127.0.0.1."""

from __future__ import annotations

import threading

import pytest

import support
from tutorrl.evidence import sglang


@pytest.fixture
def engine():
    server = support.HostileServer()
    yield server
    server.close()


def _within(seconds: float, call):
    """call() in a thread: what it returned (or raises what it raised), or AssertionError if still waiting."""
    got: list = []

    def main():
        try:
            got.append((call(), None))
        except Exception as exc:  # noqa: BLE001 - re-raised below
            got.append((None, exc))

    worker = threading.Thread(target=main, daemon=True)
    worker.start()
    worker.join(seconds)
    assert got, f"still waiting after {seconds} s"
    value, error = got[0]
    if error is not None:
        raise error
    return value


@pytest.mark.parametrize("silent", ["/model_info", "/get_model_info", "/get_weight_version"])
def test_a_silent_info_route_is_bounded_apart_from_the_whole(engine, monkeypatch, silent):
    monkeypatch.setattr(sglang, "INFO_TIMEOUT_S", 0.5, raising=False)
    engine.routes["/model_info"] = (404, {}, b"{}") if silent != "/model_info" else "silent"
    engine.routes["/get_model_info"] = "silent" if silent == "/get_model_info" else (200, {}, b"{}")
    engine.routes["/get_weight_version"] = "silent"
    reading = _within(30, lambda: sglang.read_engine(engine.url))  # the default budget: 120 s
    if silent == "/get_weight_version":
        # Never asked (404 in sglang 0.5.8-0.5.20, gone from 0.5.21): a silent one costs nothing,
        # and no version is an answer; the checksum route then says what is missing.
        assert reading.observation.weight_version is None
    else:
        assert reading.observation.error and f"{silent}: no complete answer within 0.5 s" in reading.observation.error


def test_read_weight_version_is_bounded_too(engine, monkeypatch):
    monkeypatch.setattr(sglang, "INFO_TIMEOUT_S", 0.5, raising=False)
    engine.routes["/model_info"] = "silent"
    with pytest.raises(sglang.EngineError, match="within 0.5 s"):
        _within(30, lambda: sglang.read_weight_version(engine.url))
