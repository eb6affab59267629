"""The result-record part of the backend contract (records kept by message id for a
retention time, replaced by a later put), run against every backend."""

from __future__ import annotations

import uuid

from tests.support.backends import BackendHarness


def _id() -> str:
    return f"r{uuid.uuid4().hex[:12]}"  # results are global to a backend: fresh ids


def test_results_are_kept_by_id_and_replaced_by_a_later_put(harness: BackendHarness) -> None:
    b = harness.backend
    one, two, never = _id(), _id(), _id()
    b.results.put([(one, b'{"status":"running"}', 60_000), (two, b"\x00binary\xff", 60_000)])
    assert b.results.get([one, two, never]) == {
        one: b'{"status":"running"}',
        two: b"\x00binary\xff",
    }
    b.results.put([(one, b'{"status":"succeeded"}', 60_000)])
    assert b.results.get([one]) == {one: b'{"status":"succeeded"}'}
    assert b.results.get([]) == {}
    b.results.put([])


def test_a_result_is_gone_after_its_retention(harness: BackendHarness) -> None:
    b = harness.backend
    short, long = _id(), _id()
    b.results.put([(short, b"x", 1000), (long, b"y", 60_000)])
    harness.advance(2100)  # sleeps on a server (Cassandra's TTL counts in seconds)
    assert b.results.get([short, long]) == {long: b"y"}
