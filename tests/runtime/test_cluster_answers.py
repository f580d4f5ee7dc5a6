"""Whatever an --address answers, tutorrl says what is wrong: never a traceback, never a hang.

A real HTTP server on 127.0.0.1 (started and stopped by the test) serves each
generated answer to the real client (`runtime/cluster.py`): garbage bytes,
JSON of the wrong shape, deep nesting, huge integers, negative or non-numeric
resource amounts, HTTP errors. The answer must be a `Resources` or a
`RefusedError` (exit 2 at the CLI), nothing else.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import support
from tutorrl.errors import RefusedError
from tutorrl.runtime.cluster import Resources, cluster_resources


@pytest.fixture(scope="module")
def server():
    canned = support.CannedServer()
    yield canned
    canned.close()


def _ask(server, status: int, body: bytes):
    server.answer(status, body)
    try:
        return cluster_resources(server.url, {})
    except RefusedError as exc:
        return exc


def _deep(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**30), max_value=10**30) | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=30)


def _nodes_answer(nodes) -> bytes:
    return json.dumps({"result": True, "data": {"result": {"result": nodes}}}).encode()


_bodies = st.one_of(
    st.binary(max_size=200),
    _json_values.map(lambda v: json.dumps(v).encode()),
    st.integers(min_value=1, max_value=3000).map(_deep),
    st.lists(st.fixed_dictionaries({"state": st.sampled_from(["ALIVE", "DEAD", 3]),
                                    "resources_total": _json_values}), max_size=3).map(_nodes_answer),
    st.just(b'{"result": true, "data": {"result": {"result": [{"state": "ALIVE", "resources_total": {"GPU": '
            + b"9" * 5000 + b"}}]}}}"),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(status=st.sampled_from([200, 200, 200, 404, 500]), body=_bodies)
def test_any_answer_is_resources_or_a_refusal(server, status, body):
    got = _ask(server, status, body)
    assert isinstance(got, (Resources, RefusedError)), got
    if isinstance(got, Resources):
        assert all(v >= 0 for v in got.total.values())


def test_a_dashboard_answer_is_summed(server):
    nodes = [{"state": "ALIVE", "resources_total": {"GPU": 8.0, "CPU": 64}},
             {"state": "DEAD", "resources_total": {"GPU": 8.0}},
             {"state": "ALIVE", "resources_total": {"GPU": 4}}]
    got = _ask(server, 200, _nodes_answer(nodes))
    assert isinstance(got, Resources) and got.gpus == 12.0 and got.alive_nodes == 2


@pytest.mark.parametrize("body,words", [
    (b"<html>hello</html>", "is --address a Ray dashboard?"),
    (_deep(5000), "is --address a Ray dashboard?"),
    (b'{"result": true, "data": {"result": {"result": [{"state": "ALIVE", "resources_total": {"GPU": -1}}]}}}',
     "not a non-negative number"),
])
def test_what_is_wrong_is_said(server, body, words):
    got = _ask(server, 200, body)
    assert isinstance(got, RefusedError) and words in str(got)


def test_an_answer_that_never_ends_is_a_refusal(server):
    from tutorrl.runtime import cluster

    server.trickle = 0.05  # each byte inside the socket timeout; the whole answer never
    try:
        with pytest.raises(RefusedError, match="no complete answer within 0.5 s"):
            cluster._get_json(server.url + "/api/v0/nodes", {}, timeout=0.5)
    finally:
        server.trickle = None


@pytest.mark.parametrize("stall", ["continue", "headers"])
def test_an_answer_whose_head_never_ends_is_a_refusal(server, stall):
    """The limit holds from the connect, not from the body: `100 Continue` without end, or a header
    sent a byte at a time, each inside the socket timeout, once held the reader for ever."""
    from tutorrl.runtime import cluster

    server.stall = stall
    try:
        with pytest.raises(RefusedError, match="no complete answer within 0.5 s"):
            cluster._get_json(server.url + "/api/v0/nodes", {}, timeout=0.5)
    finally:
        server.stall = None


@pytest.mark.parametrize("address", ["http://[::1", "ftp://x\x1b[31m", "http://[::1\x1b[31m]:80", "http://head:99999",
                                     "http://head:port"])
def test_an_address_urllib_cannot_take_apart_is_a_refusal(address):
    from tutorrl.runtime.cluster import normalise_address

    with pytest.raises(RefusedError, match="expected the dashboard URL"):
        normalise_address(address)
