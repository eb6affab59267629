"""The batch part of the backend contract (a member's outcome recorded once and counted
in the same atomic step; the count is what decides that a batch is complete), run against
every backend."""

from __future__ import annotations

import threading
import uuid

from tests.support.backends import BackendHarness
from tickwork.scheduler.backends import MemberOutcome


def _batch() -> str:
    return f"b{uuid.uuid4().hex[:12]}"  # batches are global to a backend: fresh ids


def test_each_member_counts_once_and_keeps_its_first_outcome(harness: BackendHarness) -> None:
    b = harness.backend
    batch, expires = _batch(), b.now_ms() + 60_000
    assert b.batches.read(batch) is None
    b.batches.open(batch, b'{"size":3}', expires)
    opened = b.batches.read(batch)
    assert opened is not None
    assert (opened.description, opened.settled, opened.failed, opened.outcomes) == (
        b'{"size":3}',
        0,
        0,
        {},
    )
    ok = MemberOutcome(batch, 0, False, b'{"value":1}', expires)
    assert b.batches.settle([ok]) == [(1, 0)]
    again = MemberOutcome(batch, 0, True, b'{"error":"later"}', expires)
    assert b.batches.settle([again]) == [(1, 0)], "a redelivered member adds nothing"
    bad = MemberOutcome(batch, 2, True, b'{"error":"boom"}', expires)
    last = MemberOutcome(batch, 1, False, b'{"value":2}', expires)
    assert b.batches.settle([bad, last]) == [(2, 1), (3, 1)]
    stored = b.batches.read(batch)
    assert stored is not None
    assert (stored.settled, stored.failed) == (3, 1)
    assert stored.outcomes == {0: b'{"value":1}', 1: b'{"value":2}', 2: b'{"error":"boom"}'}
    counts = b.batches.read(batch, outcomes=False)
    assert counts is not None and (counts.settled, counts.failed, counts.outcomes) == (3, 1, {})
    assert b.batches.settle([]) == []


def test_members_of_several_batches_settle_in_one_call(harness: BackendHarness) -> None:
    b = harness.backend
    one, two, expires = _batch(), _batch(), b.now_ms() + 60_000
    b.batches.open(one, b"1", expires)
    b.batches.open(two, b"2", expires)
    calls = [
        MemberOutcome(one, 0, False, b"a", expires),
        MemberOutcome(two, 0, True, b"b", expires),
        MemberOutcome(one, 1, False, b"c", expires),
        MemberOutcome(one, 1, False, b"c", expires),  # the same member twice in one call
    ]
    assert b.batches.settle(calls) == [(1, 0), (1, 1), (2, 0), (2, 0)]


def test_concurrent_settles_count_every_member_exactly_once(harness: BackendHarness) -> None:
    """Four writers settle 40 members one call each: the answers are 1..40, each once,
    so exactly one writer sees the batch complete first."""
    b = harness.backend
    batch, expires, size = _batch(), b.now_ms() + 60_000, 40
    b.batches.open(batch, b"{}", expires)
    answers: list[int] = []
    lock = threading.Lock()

    def settle(members: range) -> None:
        for member in members:
            ((settled, _),) = b.batches.settle(
                [MemberOutcome(batch, member, member % 5 == 0, b"x", expires)]
            )
            with lock:
                answers.append(settled)

    threads = [threading.Thread(target=settle, args=(range(i, size, 4),)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(answers) == list(range(1, size + 1))
    stored = b.batches.read(batch)
    assert stored is not None and (stored.settled, stored.failed) == (size, 8)
    assert sorted(stored.outcomes) == list(range(size))


def test_a_batch_is_gone_after_it_expires(harness: BackendHarness) -> None:
    b = harness.backend
    short, long = _batch(), _batch()
    b.batches.open(short, b"s", b.now_ms() + 1000)
    b.batches.open(long, b"l", b.now_ms() + 60_000)
    b.batches.settle([MemberOutcome(short, 0, False, b"x", b.now_ms() + 1000)])
    harness.advance(2100)  # sleeps on a server (Cassandra's TTL counts in seconds)
    assert b.batches.read(short) is None
    found = b.batches.read(long)
    assert found is not None and found.description == b"l"
