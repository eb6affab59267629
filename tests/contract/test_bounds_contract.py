"""The queue-bound part of the backend contract (``set_queue_bound``, ``queue_bounds`` and
``enqueue(..., bounded=True)``), run against every backend. The Redis Cluster and
Cassandra harnesses spread each queue over three shards: a cluster splits the bound into
equal shares per shard, so the tests fill every shard (many more messages than the bound)
before they count."""

from __future__ import annotations

import uuid

import pytest

from tests.support.backends import BackendHarness
from tickwork.scheduler.backends import Backend, Envelope, OnConflict, Outcome
from tickwork.scheduler.backends.records import Failure
from tickwork.scheduler.errors import ConfigurationError

BOUND = 6


def _queue() -> str:
    return f"bq-{uuid.uuid4().hex[:8]}"


def _envelopes(queue: str, count: int, now: int, key_prefix: str | None = None) -> list[Envelope]:
    return [
        Envelope(
            f"{queue}-{uuid.uuid4().hex[:12]}",
            queue,
            None if key_prefix is None else f"{key_prefix}{i}",
            0,
            now,
            30_000,
            b'{"n": %d}' % i,
        )
        for i in range(count)
    ]


def _fill_with_keyed(b: Backend, queue: str) -> list[Envelope]:
    """Offer 60 keyed messages to ``queue`` (bounded at ``BOUND``); the ones it stored."""
    keyed = _envelopes(queue, 60, b.now_ms(), key_prefix="k")
    outcomes = b.messages.enqueue(keyed, OnConflict.IGNORE, bounded=True)
    return [e for e, o in zip(keyed, outcomes, strict=True) if o is Outcome.ENQUEUED]


def _pending(harness: BackendHarness, queue: str) -> int:
    (stats,) = harness.backend.queues.stats(queue)
    return stats.pending


def test_a_bounded_enqueue_writes_what_fits_and_refuses_the_rest(harness: BackendHarness) -> None:
    b, queue = harness.backend, _queue()
    b.queues.set_bound(queue, BOUND)
    assert b.queues.bounds()[queue] == BOUND
    (stats,) = b.queues.stats(queue)
    assert stats.max_pending == BOUND
    outcomes = b.messages.enqueue(_envelopes(queue, 60, b.now_ms()), bounded=True)
    assert outcomes.count(Outcome.ENQUEUED) == BOUND
    assert outcomes.count(Outcome.FULL) == 60 - BOUND
    assert _pending(harness, queue) == BOUND, "nothing refused was written"
    assert (
        b.messages.enqueue(_envelopes(queue, 30, b.now_ms()), bounded=True) == [Outcome.FULL] * 30
    )
    unbounded = b.messages.enqueue(_envelopes(queue, 2, b.now_ms()))
    assert unbounded == [Outcome.ENQUEUED] * 2, "an enqueue that is not bounded passes"
    assert _pending(harness, queue) == BOUND + 2


def test_a_full_queue_still_takes_duplicates_and_replacements(harness: BackendHarness) -> None:
    b, queue = harness.backend, _queue()
    b.queues.set_bound(queue, BOUND)
    stored = _fill_with_keyed(b, queue)
    assert len(stored) == BOUND and _pending(harness, queue) == BOUND
    again = b.messages.enqueue(stored, bounded=True)
    assert again == [Outcome.DUPLICATE] * BOUND, "a re-send of a stored message is not refused"
    replacement = stored[0]._replace(id=f"{queue}-new", body=b'{"n": "new"}')
    assert b.messages.enqueue([replacement], OnConflict.REPLACE, bounded=True) == [Outcome.REPLACED]
    assert b.messages.get_by_key(queue, stored[0].key or "") is not None
    assert _pending(harness, queue) == BOUND


def test_settling_makes_room_and_never_refuses(harness: BackendHarness) -> None:
    b, queue = harness.backend, _queue()
    b.queues.set_bound(queue, BOUND)
    b.messages.enqueue(_envelopes(queue, 60, b.now_ms()), bounded=True)
    claims = b.leases.claim(queue, BOUND).claims
    assert len(claims) == BOUND, "leased messages still count"
    assert (
        b.messages.enqueue(_envelopes(queue, 30, b.now_ms()), bounded=True) == [Outcome.FULL] * 30
    )
    first, second, third, fourth, *_ = claims
    assert b.leases.retry(first, b.now_ms(), "boom"), "a retry is never refused"
    assert b.leases.release([second]) == 1, "a release is never refused"
    nxt = Envelope(f"{fourth.id}.1", queue, None, 0, b.now_ms() + 60_000, 30_000, b"{}")
    assert b.leases.ack([(fourth, nxt)]) == [True], (
        "the next occurrence of a chain is never refused"
    )
    assert _pending(harness, queue) == BOUND
    assert b.leases.poison(third, Failure("exception", "ValueError", "no")), (
        "poison leaves the bound"
    )
    assert _pending(harness, queue) == BOUND - 1
    outcomes = b.messages.enqueue(_envelopes(queue, 60, b.now_ms()), bounded=True)
    assert outcomes.count(Outcome.ENQUEUED) == 1, "a poisoned message frees its place"
    assert b.poison.replay([third.id]) == 1, "a replay is never refused"
    assert _pending(harness, queue) == BOUND + 1


def test_cancelling_and_purging_make_room(harness: BackendHarness) -> None:
    b, queue = harness.backend, _queue()
    b.queues.set_bound(queue, BOUND)
    stored = _fill_with_keyed(b, queue)
    assert b.messages.delete(stored[0].id, queue) and b.messages.delete(stored[1].id)
    assert b.messages.delete_by_key(queue, stored[2].key or "")
    outcomes = b.messages.enqueue(_envelopes(queue, 90, b.now_ms()), bounded=True)
    assert outcomes.count(Outcome.ENQUEUED) == 3, "each cancelled message freed its place"
    b.queues.purge(queue)
    outcomes = b.messages.enqueue(_envelopes(queue, 60, b.now_ms()), bounded=True)
    assert outcomes.count(Outcome.ENQUEUED) == BOUND, "a purged queue is empty"


def test_removing_a_bound_lets_everything_in(harness: BackendHarness) -> None:
    b, queue = harness.backend, _queue()
    b.queues.set_bound(queue, BOUND)
    b.messages.enqueue(_envelopes(queue, 60, b.now_ms()), bounded=True)
    b.queues.set_bound(queue, None)
    assert queue not in b.queues.bounds()
    (stats,) = b.queues.stats(queue)
    assert stats.max_pending is None
    assert (
        b.messages.enqueue(_envelopes(queue, 10, b.now_ms()), bounded=True)
        == [Outcome.ENQUEUED] * 10
    )
    b.queues.set_bound(queue, BOUND * 4)
    outcomes = b.messages.enqueue(_envelopes(queue, 60, b.now_ms()), bounded=True)
    expected = BOUND * 4 - BOUND - 10  # a new bound counts what the queue already holds
    if harness.name in ("redis-cluster", "cassandra"):
        # each shard has its share: one that got more than its share of the 10 unbounded
        # messages (ids spread at random) takes no room from the others
        assert expected <= outcomes.count(Outcome.ENQUEUED) <= expected + 10
    else:
        assert outcomes.count(Outcome.ENQUEUED) == expected


def test_a_bound_below_one_is_refused(harness: BackendHarness) -> None:
    with pytest.raises(ConfigurationError):
        harness.backend.queues.set_bound(_queue(), 0)
