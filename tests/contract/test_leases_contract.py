"""The leases role (``Leases``): claim, ack, retry, release, extend, expiry and the
fencing of every transition, on every backend."""

from __future__ import annotations

import threading

from tests.support.backends import BackendHarness
from tests.support.contract import TIMEOUT_MS, claim_all, env
from tickwork.scheduler.backends import Backend, Claim, Envelope, Failure, OnConflict, State

# -- claiming --------------------------------------------------------------------------------


def test_claim_returns_due_messages_once(harness: BackendHarness) -> None:
    b = harness.backend
    # a long lease: a loaded Cassandra node can take over a second between the claims
    b.messages.enqueue([env(harness, f"m{i}", timeout_ms=60_000) for i in range(5)])
    first = b.leases.claim("q", 3).claims
    second = b.leases.claim("q", 10).claims
    assert len(first) == 3 and len(second) == 2
    assert {c.id for c in first}.isdisjoint({c.id for c in second})
    assert all(c.attempt == 1 for c in first + second)
    assert b.leases.claim("q", 10).claims == []
    assert b.queues.stats("q")[0].in_flight == 5


def test_claim_never_returns_a_message_early(harness: BackendHarness) -> None:
    b = harness.backend
    b.messages.enqueue(
        [
            env(harness, "soon", due_in_ms=1_000, priority=100),
            env(harness, "now", timeout_ms=60_000),
        ]
    )
    batch = b.leases.claim("q", 10)
    assert [c.id for c in batch.claims] == ["now"]
    assert b.leases.claim("q", 10).next_due_ms is not None
    harness.advance(1_100)
    assert [c.id for c in claim_all(harness)] == ["soon"]


def test_lookahead_claims_messages_due_soon(harness: BackendHarness) -> None:
    b = harness.backend
    b.messages.enqueue(
        [env(harness, "soon", due_in_ms=200), env(harness, "later", due_in_ms=60_000)]
    )
    claims = b.leases.claim("q", 10, lookahead_ms=500).claims
    assert [c.id for c in claims] == ["soon"]
    assert claims[0].deadline_ms >= claims[0].due_ms + TIMEOUT_MS, "lease counts from due time"


def test_a_lease_taken_ahead_of_its_due_time_counts_as_in_flight(harness: BackendHarness) -> None:
    """A claim within the lookahead of a message due well after its lease's length: the
    statistics count it in flight (Cassandra found leases by their deadline only up to
    the longest lease from now, and missed those a lookahead put further)."""
    b = harness.backend
    b.messages.enqueue([env(harness, "parked", due_in_ms=20_000, timeout_ms=2_000)])
    (claim,) = b.leases.claim("q", 10, lookahead_ms=30_000).claims
    assert claim.id == "parked"
    stats = b.queues.stats("q")[0]
    assert (stats.in_flight, stats.scheduled, stats.ready) == (1, 0, 0)
    assert b.leases.ack([(claim, None)]) == [True]
    assert b.queues.stats("q")[0].in_flight == 0


def test_higher_priority_first_among_due(harness: BackendHarness) -> None:
    b = harness.backend
    b.messages.enqueue(
        [
            env(harness, "low", priority=0),
            env(harness, "high", priority=9),
            env(harness, "mid", priority=5),
            env(harness, "future-top", priority=99, due_in_ms=60_000),
        ]
    )
    assert [c.id for c in b.leases.claim("q", 10).claims] == ["high", "mid", "low"]


def test_a_message_waiting_past_its_promotion_goes_ahead_of_every_priority(
    harness: BackendHarness,
) -> None:
    """Priority aging (a task's ``max_wait``): once its promotion time has come, a waiting
    low-priority message is claimed before higher priorities; one whose time has not
    come keeps its place."""
    b = harness.backend
    now = harness.now_ms()
    b.messages.enqueue(
        [
            env(harness, "old-low", priority=-5)._replace(promote_ms=now + 300),
            env(harness, "young-low", priority=-5)._replace(promote_ms=now + 600_000),
        ]
    )
    b.messages.enqueue([env(harness, f"high{i}", priority=50) for i in range(3)])
    harness.advance(400)
    ids = [c.id for c in claim_all(harness)]  # one batch: a sharded queue merges its shards'
    assert ids[0] == "old-low" and ids[-1] == "young-low" and len(ids) == 5, ids


def test_a_message_not_waiting_at_its_promotion_keeps_its_priority(
    harness: BackendHarness,
) -> None:
    """A message running when its promotion time comes is not promoted: released again
    afterwards, it waits in its own priority behind higher ones."""
    b = harness.backend
    now = harness.now_ms()
    # a lease that outlasts the test on a loaded machine: only the promotion time passes
    low = env(harness, "low", priority=-5, timeout_ms=60_000)._replace(promote_ms=now + 200)
    b.messages.enqueue([low])
    (claim,) = b.leases.claim("q", 10).claims
    harness.advance(300)
    b.messages.enqueue([env(harness, "high", priority=50)])
    assert [c.id for c in b.leases.claim("q", 10).claims] == ["high"]
    assert b.leases.release([claim]) == 1
    b.messages.enqueue([env(harness, "high2", priority=50)])
    assert [c.id for c in claim_all(harness)] == ["high2", "low"]


def test_a_next_occurrence_written_by_an_ack_ages_too(harness: BackendHarness) -> None:
    """A schedule's next occurrence (written in the ack) keeps its promotion time."""
    b = harness.backend
    b.messages.enqueue([env(harness, "c.0", key="K", priority=-5)])
    (claim,) = b.leases.claim("q", 10).claims
    nxt = env(harness, "c.1", key="K", priority=-5)._replace(promote_ms=harness.now_ms() + 200)
    assert b.leases.ack([(claim, nxt)]) == [True]
    b.messages.enqueue([env(harness, f"high{i}", priority=50) for i in range(3)])
    harness.advance(300)
    assert claim_all(harness)[0].id == "c.1"


def test_claim_from_an_empty_queue_reports_next_due(harness: BackendHarness) -> None:
    b = harness.backend
    assert b.leases.claim("q", 10).claims == []
    due = harness.now_ms() + 5_000
    b.messages.enqueue([Envelope("x", "q", None, 0, due, TIMEOUT_MS, b"x")])
    batch = b.leases.claim("q", 10)
    assert batch.claims == [] and batch.next_due_ms is not None
    assert abs(batch.next_due_ms - due) <= 5


def test_concurrent_claims_never_hand_out_a_message_twice(harness: BackendHarness) -> None:
    b = harness.backend
    # leases long enough that none expires while the clients drain the queue
    b.messages.enqueue([env(harness, f"m{i}", timeout_ms=120_000) for i in range(400)])
    seen: list[str] = []
    lock = threading.Lock()
    clients = [harness.reopen() for _ in range(4)]

    def consume(client: Backend) -> None:
        while True:
            claims = client.leases.claim("q", 7).claims
            if not claims:
                return
            with lock:
                seen.extend(c.id for c in claims)

    threads = [threading.Thread(target=consume, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in clients:
        c.close()
    assert sorted(seen) == sorted(f"m{i}" for i in range(400))


# -- ack, leases and fencing -----------------------------------------------------------------


def test_ack_deletes_and_stores_next_occurrence_atomically(harness: BackendHarness) -> None:
    b = harness.backend
    b.messages.enqueue([env(harness, "c", key="K")])
    (claim,) = claim_all(harness)
    nxt = env(harness, "c.1", key="K", due_in_ms=60_000)
    assert b.leases.ack([(claim, nxt)]) == [True]
    assert b.messages.get("c") is None
    got = b.messages.get_by_key("q", "K")
    assert got is not None and got.envelope.id == "c.1" and got.state is State.SCHEDULED
    assert b.leases.ack([(claim, nxt)]) == [False], "a repeated ack is refused"


def test_a_large_mixed_batch_is_claimed_and_acked_whole(harness: BackendHarness) -> None:
    """Past the size at which a backend splits a batch's writes (Redis: 2,000 values a
    command): plain one-offs, a keyed message with its chain's next occurrence and one
    whose lease was lost, settled in one ack."""
    b = harness.backend
    count = 2_600
    b.messages.enqueue([env(harness, f"m{i:05d}", timeout_ms=60_000) for i in range(count)])
    b.messages.enqueue([env(harness, "keyed", key="K", timeout_ms=60_000)])
    claims: list[Claim] = []
    while batch := b.leases.claim("q", 3_000).claims:
        claims += batch
    assert len(claims) == count + 1 and len({c.id for c in claims}) == count + 1
    assert all(c.attempt == 1 for c in claims)
    by_id = {c.id: c for c in claims}
    stale = by_id["m00007"]._replace(token="not-its-token")
    nxt = env(harness, "keyed.1", key="K", due_in_ms=60_000)
    items: list[tuple[Claim, Envelope | None]] = [
        (c, nxt if c.id == "keyed" else None) for c in claims if c.id != "m00007"
    ]
    items.append((stale, None))
    acked = b.leases.ack(items)
    assert acked.count(True) == count and acked[-1] is False
    assert b.messages.get("m00001") is None and b.messages.get("keyed") is None
    got = b.messages.get_by_key("q", "K")
    assert got is not None and got.envelope.id == "keyed.1" and got.state is State.SCHEDULED
    assert b.messages.get("m00007") is not None, "a refused ack deleted nothing"
    assert b.queues.stats("q")[0].in_flight == 1


def test_expired_lease_is_redelivered_with_next_attempt(harness: BackendHarness) -> None:
    b = harness.backend
    b.messages.enqueue([env(harness, "m")])
    (first,) = claim_all(harness)
    assert claim_all(harness) == []
    harness.advance(TIMEOUT_MS + 150)
    (again,) = claim_all(harness)
    assert again.id == "m" and again.attempt == 2 and again.token != first.token
    assert b.queues.stats("q")[0].counters.get("redelivered") == 1


def test_stale_ack_cannot_fork_a_chain(harness: BackendHarness) -> None:
    """Astyanax #218: a handler that outlived its lease acks after the message ran again."""
    b = harness.backend
    b.messages.enqueue([env(harness, "c")])
    (slow,) = claim_all(harness)
    harness.advance(TIMEOUT_MS + 150)
    (fast,) = claim_all(harness)
    nxt = env(harness, "c.1", due_in_ms=60_000)
    assert b.leases.ack([(fast, nxt)]) == [True]
    assert b.leases.ack([(slow, env(harness, "c.1", due_in_ms=60_000))]) == [False]
    assert b.leases.retry(slow, harness.now_ms(), "late") is False
    assert b.leases.extend([slow], 1_000) == [False]
    assert b.leases.poison(slow, Failure("exception", "E", "late")) is False
    assert b.queues.stats("q")[0].scheduled == 1


def test_duplicate_next_occurrence_is_written_once(harness: BackendHarness) -> None:
    b = harness.backend
    b.messages.enqueue([env(harness, "a"), env(harness, "b")])
    c1, c2 = claim_all(harness)
    nxt = env(harness, "chain.1", due_in_ms=60_000)
    assert b.leases.ack([(c1, nxt), (c2, nxt)]) == [True, True]
    assert b.queues.stats("q")[0].scheduled == 1


def test_extend_keeps_the_lease(harness: BackendHarness) -> None:
    b = harness.backend
    b.messages.enqueue([env(harness, "m")])
    (claim,) = claim_all(harness)
    harness.advance(TIMEOUT_MS // 2)
    assert b.leases.extend([claim], TIMEOUT_MS * 4) == [True]
    harness.advance(TIMEOUT_MS)
    assert claim_all(harness) == [], "an extended lease must not expire"
    assert b.leases.ack([(claim, None)]) == [True]


def test_release_makes_due_again_without_counting_an_attempt(harness: BackendHarness) -> None:
    b = harness.backend
    b.messages.enqueue([env(harness, "m")])
    (claim,) = claim_all(harness)
    assert b.leases.release([claim]) == 1
    (again,) = claim_all(harness)
    assert again.attempt == 1
    assert b.leases.release([claim]) == 0, "a stale release is refused"


def test_retry_delays_and_keeps_attempts(harness: BackendHarness) -> None:
    b = harness.backend
    b.messages.enqueue([env(harness, "m")])
    (claim,) = claim_all(harness)
    assert b.leases.retry(claim, harness.now_ms() + 1_000, "ValueError: boom")
    assert claim_all(harness) == [], "a retry must wait for its backoff (no hot loop)"
    stored = b.messages.get("m")
    assert stored is not None and stored.last_error == "ValueError: boom"
    harness.advance(1_100)
    (again,) = claim_all(harness)
    assert again.attempt == 2


def test_cancel_while_running_does_not_resurrect(harness: BackendHarness) -> None:
    b = harness.backend
    b.messages.enqueue([env(harness, "c", key="K")])
    (claim,) = claim_all(harness)
    got = b.messages.get_by_key("q", "K")
    assert got is not None and got.state is State.RUNNING
    assert b.messages.delete_by_key("q", "K")
    assert b.leases.ack([(claim, env(harness, "c.1", key="K", due_in_ms=1_000))]) == [False]
    assert b.messages.get_by_key("q", "K") is None and b.messages.get("c.1") is None


def test_replace_while_running_keeps_only_the_new_chain(harness: BackendHarness) -> None:
    b = harness.backend
    b.messages.enqueue([env(harness, "c", key="K")])
    (claim,) = claim_all(harness)
    b.messages.enqueue(
        [env(harness, "c", key="K", body=b"new", due_in_ms=60_000)], OnConflict.REPLACE
    )
    assert b.leases.ack([(claim, env(harness, "c.1", key="K"))]) == [False]
    got = b.messages.get_by_key("q", "K")
    assert got is not None and got.envelope.body == b"new" and got.state is State.SCHEDULED


def test_cancel_survives_a_client_being_offline(harness: BackendHarness) -> None:
    b = harness.backend
    b.messages.enqueue([env(harness, "m", key="K", due_in_ms=1_000)])
    other = harness.reopen()
    assert other.messages.delete_by_key("q", "K")
    other.close()
    harness.advance(1_100)
    assert claim_all(harness) == []
