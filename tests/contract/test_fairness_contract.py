"""The fair-share part of the backend contract: ready messages with a fair-share key take
turns between keys within a priority (a flood from one key does not hold back the
others), and everything else about them stays as for any message; run against every
backend that offers it."""

from __future__ import annotations

import uuid

import pytest

from tests.support.backends import BackendHarness
from tickwork.scheduler import ConfigurationError, InvalidMessage
from tickwork.scheduler.backends import Envelope, State
from tickwork.scheduler.backends.base import Capability


@pytest.fixture
def queue(harness: BackendHarness) -> str:
    if Capability.FAIR_SHARE not in harness.backend.capabilities:
        pytest.skip("fair share is not offered here (the test below)")
    return f"fair-{uuid.uuid4().hex[:8]}"


def test_a_backend_without_fair_share_refuses_a_fair_message_and_writes_nothing(
    harness: BackendHarness,
) -> None:
    """Cassandra declares it does not offer fair share; the others do."""
    offered = Capability.FAIR_SHARE in harness.backend.capabilities
    assert offered == (harness.name != "cassandra")
    if offered:
        return
    now = harness.now_ms()
    plain = _envelope("q", "plain", None, now)
    with pytest.raises(InvalidMessage, match="fair share is not offered on Cassandra"):
        harness.backend.messages.enqueue([plain, _envelope("q", "fair", "a", now)])
    assert harness.backend.messages.get("plain", "q") is None, "nothing of the call was written"
    with pytest.raises(ConfigurationError, match="not offered on Cassandra"):
        harness.backend.queues.set_fair_weight("q", "a", 3)
    assert harness.backend.queues.fair_weights("q") == {}


def sharded(harness: BackendHarness) -> bool:
    """Whether the harness's queues have several shards (each takes its own turns)."""
    return harness.name == "redis-cluster"


def _envelope(
    queue: str, message_id: str, fair: str | None, due_ms: int, priority: int = 0
) -> Envelope:
    return Envelope(message_id, queue, None, priority, due_ms, 30_000, b"body", fair)


def _claim_all(h: BackendHarness, queue: str, batch: int) -> list[str]:
    """Every message of ``queue``, claimed ``batch`` at a time and acked, in claim order."""
    order: list[str] = []
    while True:
        claims = h.backend.leases.claim(queue, batch).claims
        if not claims:
            return order
        order += [c.id for c in claims]
        assert h.backend.leases.ack([(c, None) for c in claims]) == [True] * len(claims)


def test_a_key_that_floods_the_queue_takes_turns_with_the_others(
    harness: BackendHarness, queue: str
) -> None:
    now = harness.now_ms()
    flood = [_envelope(queue, f"a{i:03}", "a", now - 1000 + i) for i in range(60)]
    harness.backend.messages.enqueue(flood)
    later = [_envelope(queue, f"{k}{i}", k, now - 50 + i) for k in "bc" for i in range(3)]
    harness.backend.messages.enqueue(later)
    order = _claim_all(harness, queue, 4)
    assert sorted(order) == sorted(e.id for e in flood + later), "each message once"
    newcomers = [m for m in order if m[0] != "a"]
    if sharded(harness):  # turns are taken within each of its three shards
        assert set(newcomers) <= set(order[:30]), order  # unfair: 60 to 65
    else:
        first = order[:10]
        assert newcomers == ["b0", "c0", "b1", "c1", "b2", "c2"] == newcomers[:6], first
        assert set(newcomers) <= set(first), first
        assert [m for m in order if m[0] == "a"] == [e.id for e in flood], "a key keeps its order"


def test_a_newcomer_goes_next_even_when_the_flood_was_claimed_in_part(
    harness: BackendHarness, queue: str
) -> None:
    now = harness.now_ms()
    harness.backend.messages.enqueue(
        [_envelope(queue, f"a{i:03}", "a", now - 500 + i) for i in range(50)]
    )
    first = [c.id for c in harness.backend.leases.claim(queue, 10).claims]
    assert sorted(first) == first == [f"a{i:03}" for i in range(10)] or sharded(harness)
    harness.backend.messages.enqueue([_envelope(queue, "b0", "b", harness.now_ms())])
    if sharded(harness):  # turns are taken within each of its three shards
        after = [c.id for _ in range(3) for c in harness.backend.leases.claim(queue, 3).claims]
        assert "b0" in after, after
    else:
        after = [c.id for c in harness.backend.leases.claim(queue, 3).claims]
        assert "b0" in after[:2], after


def test_priority_comes_before_turns_and_unkeyed_messages_keep_due_order(
    harness: BackendHarness, queue: str
) -> None:
    now = harness.now_ms()
    harness.backend.messages.enqueue(
        [_envelope(queue, f"a{i}", "a", now - 100 + i) for i in range(5)]
    )
    harness.backend.messages.enqueue([_envelope(queue, "urgent", "b", now, priority=5)])
    harness.backend.messages.enqueue(
        [_envelope(queue, f"plain{i}", None, now - 2000 + i) for i in range(2)]
    )
    order = _claim_all(harness, queue, 2)
    if not sharded(harness):  # (a claim takes a shard's best; shards are taken in turn)
        assert order[0] == "urgent"
        assert order.index("plain0") < order.index("plain1")
    assert sorted(order) == sorted(["urgent", "plain0", "plain1", *(f"a{i}" for i in range(5))])


def test_a_fair_message_is_stored_read_scheduled_and_retried_as_any_other(
    harness: BackendHarness, queue: str
) -> None:
    b, now = harness.backend, harness.now_ms()
    b.messages.enqueue(
        [_envelope(queue, "later", "a", now + 60_000), _envelope(queue, "now", "a", now)]
    )
    stored = b.messages.get("later", queue)
    assert stored is not None and stored.state is State.SCHEDULED
    assert stored.envelope.due_ms == now + 60_000
    assert b.queues.stats(queue)[0].scheduled == 1 and b.queues.stats(queue)[0].ready == 1
    [claim] = b.leases.claim(queue, 10).claims
    assert claim.id == "now" and claim.attempt == 1
    assert b.leases.retry(claim, harness.now_ms(), "boom")
    [again] = b.leases.claim(queue, 10).claims
    assert again.id == "now" and again.attempt == 2
    assert b.leases.ack([(again, None)]) == [True]
    assert b.leases.claim(queue, 10).claims == []


def test_a_key_of_weight_three_takes_three_turns_for_another_s_one(
    harness: BackendHarness, queue: str
) -> None:
    b, now = harness.backend, harness.now_ms()
    b.queues.set_fair_weight(queue, "heavy", 3)
    assert b.queues.fair_weights(queue) == {"heavy": 3}
    backlog = [_envelope(queue, f"h{i:03}", "heavy", now - 2000 + i) for i in range(60)]
    backlog += [_envelope(queue, f"l{i:03}", "light", now - 2000 + i) for i in range(60)]
    b.messages.enqueue(backlog)
    order = _claim_all(harness, queue, 8)
    assert sorted(order) == sorted(e.id for e in backlog), "each message once"
    first = order[:40]
    heavy = sum(1 for m in first if m[0] == "h")
    if sharded(harness):  # each of three shards takes its own turns: 3:1 within each
        assert 26 <= heavy <= 34, first
    else:
        assert heavy == 30, first
        assert [m for m in order if m[0] == "h"] == [f"h{i:03}" for i in range(60)]
    b.queues.set_fair_weight(queue, "heavy", None)
    assert b.queues.fair_weights(queue) == {}, "back to 1"


def test_a_weight_set_back_to_one_takes_turns_evenly_again(
    harness: BackendHarness, queue: str
) -> None:
    b, now = harness.backend, harness.now_ms()
    b.queues.set_fair_weight(queue, "a", 4)
    b.queues.set_fair_weight(queue, "a", 1)
    assert b.queues.fair_weights(queue) == {}
    b.messages.enqueue(
        [_envelope(queue, f"{k}{i:02}", k, now - 500 + i) for k in "ab" for i in range(20)]
    )
    first = _claim_all(harness, queue, 4)[:20]
    assert abs(sum(1 for m in first if m[0] == "a") - 10) <= (4 if sharded(harness) else 1)
