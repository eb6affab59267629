"""The worker-registry part of the backend contract (records refreshed by a heartbeat,
expired when it stops, removed on a clean stop), run against every backend."""

from __future__ import annotations

import time
import uuid

from tests.support.backends import BackendHarness


def test_workers_are_listed_until_they_expire_or_leave(harness: BackendHarness) -> None:
    b = harness.backend
    steady, crashed, leaving = (f"w-{uuid.uuid4().hex[:8]}" for _ in range(3))
    b.registry.put(steady, b'{"pid": 1}', 60_000)
    b.registry.put(crashed, b'{"pid": 2}', 1000)
    b.registry.put(leaving, b'{"pid": 3}', 60_000)
    found = b.registry.records()
    assert {steady, crashed, leaving} <= set(found) and found[crashed] == b'{"pid": 2}'
    b.registry.put(steady, b'{"pid": 1, "held": 4}', 60_000)
    b.registry.delete(leaving)
    harness.advance(2100)  # sleeps on a server (Cassandra's TTL counts in seconds)
    found = b.registry.records()
    assert found.get(steady) == b'{"pid": 1, "held": 4}', "a refresh replaces the record"
    assert crashed not in found, "a worker whose heartbeat stopped expires"
    assert leaving not in found, "a worker that stopped cleanly is gone at once"
    b.registry.delete("never-registered")


def test_a_record_outlives_its_ttl_when_written_late_in_a_second(harness: BackendHarness) -> None:
    """Cassandra counts a TTL from the current whole second: a record written 0.9 s into a
    second with a one-second TTL was gone 0.1 s later (a running worker vanished from the
    registry between two reads)."""
    b = harness.backend
    worker, result = f"w-{uuid.uuid4().hex[:8]}", f"r-{uuid.uuid4().hex[:8]}"
    time.sleep((0.9 - time.time() % 1.0) % 1.0)  # to 0.9 s into a wall-clock second
    b.registry.put(worker, b'{"pid": 1}', 1000)
    b.results.put([(result, b"x", 1000)])
    harness.advance(400)
    assert worker in b.registry.records(), "a record lives at least its TTL"
    assert b.results.get([result]) == {result: b"x"}
