"""The backend contract, written once and run against every backend (see DESIGN.md)."""

from __future__ import annotations

import threading

import pytest

from scheduler import KeyConflict
from scheduler.backends import AbortRequest, Backend, Envelope, Failure, OnConflict, Outcome, State
from tests.support.backends import BackendHarness

TIMEOUT_MS = 1000  # leases of 300 ms expired between two claims on a cold Cassandra node


def env(
    h: BackendHarness,
    message_id: str,
    *,
    key: str | None = None,
    queue: str = "q",
    priority: int = 0,
    due_in_ms: int = 0,
    body: bytes | None = None,
    timeout_ms: int = TIMEOUT_MS,
) -> Envelope:
    return Envelope(
        id=message_id,
        queue=queue,
        key=key,
        priority=priority,
        due_ms=h.now_ms() + due_in_ms,
        timeout_ms=timeout_ms,
        body=body if body is not None else f"body-{message_id}".encode(),
    )


def claim_all(h: BackendHarness, queue: str = "q", limit: int = 100):  # type: ignore[no-untyped-def]
    return h.backend.leases.claim(queue, limit).claims


# -- enqueue, read, delete -------------------------------------------------------------------


def test_enqueue_then_get_by_id_and_key(harness: BackendHarness) -> None:
    b = harness.backend
    assert (
        b.messages.enqueue([env(harness, "a"), env(harness, "k1", key="K")])
        == [Outcome.ENQUEUED] * 2
    )
    got = b.messages.get("a")
    assert got is not None and got.envelope.body == b"body-a" and got.state is State.READY
    by_key = b.messages.get_by_key("q", "K")
    assert by_key is not None and by_key.envelope.id == "k1"
    assert (
        b.messages.exists("q", "K")
        and not b.messages.exists("q", "other")
        and not b.messages.exists("other", "K")
    )
    assert b.messages.get("missing") is None and b.messages.get_by_key("q", "missing") is None


def test_future_message_is_scheduled_not_ready(harness: BackendHarness) -> None:
    harness.backend.messages.enqueue([env(harness, "later", due_in_ms=60_000)])
    got = harness.backend.messages.get("later")
    assert got is not None and got.state is State.SCHEDULED
    stats = harness.backend.queues.stats("q")[0]
    assert (stats.ready, stats.scheduled, stats.in_flight) == (0, 1, 0)


def test_bulk_enqueue_of_many(harness: BackendHarness) -> None:
    envelopes = [env(harness, f"m{i}", key=f"k{i}" if i % 2 else None) for i in range(2500)]
    outcomes = harness.backend.messages.enqueue(envelopes)
    assert outcomes == [Outcome.ENQUEUED] * 2500
    assert harness.backend.queues.stats("q")[0].ready == 2500


def test_key_conflict_error_writes_nothing(harness: BackendHarness) -> None:
    b = harness.backend
    b.messages.enqueue([env(harness, "first", key="K")])
    with pytest.raises(KeyConflict):
        b.messages.enqueue(
            [env(harness, "fresh"), env(harness, "second", key="K")], OnConflict.ERROR
        )
    assert b.messages.get("fresh") is None, "a batch with a conflict must write nothing"
    got = b.messages.get_by_key("q", "K")
    assert got is not None and got.envelope.id == "first"


def test_key_conflict_ignore_keeps_the_first(harness: BackendHarness) -> None:
    b = harness.backend
    b.messages.enqueue([env(harness, "first", key="K")])
    assert b.messages.enqueue([env(harness, "second", key="K")], OnConflict.IGNORE) == [
        Outcome.IGNORED
    ]
    got = b.messages.get_by_key("q", "K")
    assert got is not None and got.envelope.id == "first"
    assert b.messages.get("second") is None


def test_key_conflict_replace_swaps_the_message(harness: BackendHarness) -> None:
    b = harness.backend
    b.messages.enqueue([env(harness, "first", key="K")])
    assert b.messages.enqueue([env(harness, "second", key="K")], OnConflict.REPLACE) == [
        Outcome.REPLACED
    ]
    got = b.messages.get_by_key("q", "K")
    assert got is not None and got.envelope.id == "second"
    assert b.messages.get("first") is None
    assert b.queues.stats("q")[0].ready == 1


def test_identical_resend_is_a_duplicate_not_a_conflict(harness: BackendHarness) -> None:
    b = harness.backend
    e = env(harness, "same", key="K")
    b.messages.enqueue([e])
    assert b.messages.enqueue([e], OnConflict.ERROR) == [Outcome.DUPLICATE]
    assert b.messages.enqueue([e], OnConflict.IGNORE) == [Outcome.DUPLICATE]
    unkeyed = env(harness, "plain")
    b.messages.enqueue([unkeyed])
    assert b.messages.enqueue([unkeyed]) == [Outcome.DUPLICATE]
    assert b.queues.stats("q")[0].ready == 2


def test_same_key_in_two_queues_is_two_messages(harness: BackendHarness) -> None:
    b = harness.backend
    b.messages.enqueue(
        [env(harness, "a1", key="K", queue="a"), env(harness, "b1", key="K", queue="b")]
    )
    assert (
        b.messages.get_by_key("a", "K") is not None and b.messages.get_by_key("b", "K") is not None
    )


def test_delete_by_id_and_by_key(harness: BackendHarness) -> None:
    b = harness.backend
    b.messages.enqueue([env(harness, "a"), env(harness, "k", key="K")])
    assert b.messages.delete("a") and not b.messages.delete("a")
    assert b.messages.delete_by_key("q", "K") and not b.messages.delete_by_key("q", "K")
    assert b.messages.get("a") is None and b.messages.get_by_key("q", "K") is None
    assert claim_all(harness) == []


def test_keyed_lists_keyed_messages(harness: BackendHarness) -> None:
    b = harness.backend
    b.messages.enqueue(
        [env(harness, "a"), env(harness, "k1", key="K1"), env(harness, "k2", key="K2")]
    )
    assert sorted(m.envelope.key or "" for m in b.messages.keyed("q")) == ["K1", "K2"]


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


# -- poison ----------------------------------------------------------------------------------


def test_poison_list_show_replay_purge(harness: BackendHarness) -> None:
    b = harness.backend
    b.messages.enqueue([env(harness, "bad", key="K"), env(harness, "worse")])
    for claim in claim_all(harness):
        assert b.leases.poison(claim, Failure("exception", "ValueError", "boom", "Traceback..."))
    records = b.poison.list("q")
    assert {r.envelope.id for r in records} == {"bad", "worse"}
    record = b.poison.get("bad")
    assert record is not None and record.failure.error_type == "ValueError"
    assert record.attempts == 1 and record.envelope.key == "K"
    assert b.queues.stats("q")[0].poison == 2 and b.messages.get("bad") is None
    assert b.poison.replay(["bad"]) == 1
    (again,) = claim_all(harness)
    assert again.id == "bad" and again.attempt == 1
    assert b.poison.purge("q") == 1
    assert b.poison.list("q") == []


def test_poison_replay_all_of_a_queue(harness: BackendHarness) -> None:
    b = harness.backend
    b.messages.enqueue([env(harness, f"m{i}") for i in range(3)])
    for claim in claim_all(harness):
        b.leases.poison(claim, Failure("exception", "E", "x"))
    assert b.poison.replay(queue="q") == 3
    assert len(claim_all(harness)) == 3


def test_poison_purge_a_selection(harness: BackendHarness) -> None:
    b = harness.backend
    b.messages.enqueue([env(harness, f"m{i}") for i in range(4)])
    b.messages.enqueue([env(harness, "other", queue="q2")])
    for claim in claim_all(harness) + claim_all(harness, "q2"):
        assert b.leases.poison(claim, Failure("exception", "E", "x"))
    assert b.poison.purge(ids=["m0", "m2", "missing"]) == 2
    assert b.poison.purge("q2", ids=["m1"]) == 0  # m1 is not in q2
    assert b.poison.purge(ids=["m0"]) == 0  # gone already
    assert {r.envelope.id for r in b.poison.list()} == {"m1", "m3", "other"}
    assert b.poison.purge("q2", ids=["other"]) == 1
    assert b.queues.stats("q")[0].poison == 2


def test_poison_keeps_the_chain_going(harness: BackendHarness) -> None:
    b = harness.backend
    b.messages.enqueue([env(harness, "c", key="K")])
    (claim,) = claim_all(harness)
    nxt = env(harness, "c.1", key="K", due_in_ms=60_000)
    assert b.leases.poison(claim, Failure("exception", "E", "x"), nxt)
    got = b.messages.get_by_key("q", "K")
    assert got is not None and got.envelope.id == "c.1"


# -- operations ------------------------------------------------------------------------------


def test_stats_and_counters(harness: BackendHarness) -> None:
    b = harness.backend
    b.messages.enqueue(
        [env(harness, f"m{i}") for i in range(4)] + [env(harness, "f", due_in_ms=60_000)]
    )
    claims = b.leases.claim("q", 3).claims
    b.leases.ack([(claims[0], None)])
    b.leases.retry(claims[1], harness.now_ms() + 60_000, "E")
    b.leases.poison(claims[2], Failure("exception", "E", "x"))
    b.queues.add_counters("q", {"empty_polls": 2})
    s = b.queues.stats("q")[0]
    assert (s.ready, s.scheduled, s.in_flight, s.poison) == (1, 2, 0, 1)
    assert s.next_due_ms is not None
    for name, value in {
        "enqueued": 5,
        "claimed": 3,
        "acked": 1,
        "retried": 1,
        "poisoned": 1,
        "empty_polls": 2,
    }.items():
        assert s.counters.get(name) == value, name
    assert "q" in b.queues.names()


def test_purge_a_queue(harness: BackendHarness) -> None:
    b = harness.backend
    b.messages.enqueue(
        [env(harness, f"m{i}") for i in range(3)] + [env(harness, "o", queue="other")]
    )
    assert len(b.leases.claim("q", 1).claims) == 1  # one in flight, two pending
    assert b.queues.purge("q") == 3
    s = b.queues.stats("q")[0]
    assert (s.ready, s.scheduled, s.in_flight) == (0, 0, 0)
    assert b.messages.get("m0", "q") is None
    assert claim_all(harness) == [] and len(claim_all(harness, "other")) == 1


# -- pausing a queue -------------------------------------------------------------------------


def test_pause_and_resume_a_queue(harness: BackendHarness) -> None:
    b = harness.backend
    assert b.queues.paused() == []
    assert b.queues.pause("q") and not b.queues.pause("q"), "pausing twice reports it"
    assert b.queues.pause("other")
    assert b.queues.paused() == ["other", "q"]
    b.messages.enqueue([env(harness, "a")])  # enqueue goes on while paused
    by_queue = {s.queue: s for s in b.queues.stats()}
    assert by_queue["q"].paused and by_queue["q"].ready == 1
    assert by_queue["other"].paused, "a paused queue is listed even while empty"
    assert b.queues.resume("q") and not b.queues.resume("q")
    assert b.queues.paused() == ["other"]
    assert not b.queues.stats("q")[0].paused
    assert [c.id for c in claim_all(harness)] == ["a"]


# -- abort requests --------------------------------------------------------------------------


def test_abort_requests_are_stored_read_and_cleared(harness: BackendHarness) -> None:
    b = harness.backend
    now = harness.now_ms()
    assert b.aborts.pending() == []
    b.aborts.request(AbortRequest("m2", "q", False, now, now + 60_000))
    b.aborts.request(AbortRequest("m1", "other", True, now, now + 60_000))
    b.aborts.request(AbortRequest("m1", "other", False, now, now + 120_000))  # replaces
    assert b.aborts.pending() == [
        AbortRequest("m1", "other", False, now, now + 120_000),
        AbortRequest("m2", "q", False, now, now + 60_000),
    ]
    assert b.aborts.clear(["m1", "missing"]) == 1
    assert [r.message_id for r in b.aborts.pending()] == ["m2"]
    assert b.aborts.clear([]) == 0


def test_abort_requests_lapse_when_they_expire(harness: BackendHarness) -> None:
    b = harness.backend
    now = harness.now_ms()
    b.aborts.request(AbortRequest("old", "q", True, now - 60_000, now - 1))
    b.aborts.request(AbortRequest("new", "q", True, now, now + 60_000))
    assert [r.message_id for r in b.aborts.pending()] == ["new"]


def test_a_chain_is_readable_by_key_while_it_is_claimed_and_acked(
    harness: BackendHarness,
) -> None:
    """Reading by key spans two lookups (key -> id -> message); a claim or an ack between
    them must not make a live chain look missing (it did, about one read in ten on
    Cassandra and one in a thousand on Redis)."""
    b = harness.backend
    b.messages.enqueue([env(harness, "c", key="K")])
    done = threading.Event()
    misses: list[int] = []
    reads = [0]

    def read() -> None:
        while not done.is_set():
            reads[0] += 1
            if b.messages.get_by_key("q", "K") is None:
                misses.append(reads[0])

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for n in range(1, 150):
            (claim,) = claim_all(harness)
            assert b.leases.ack([(claim, env(harness, f"c.{n}", key="K"))]) == [True]
    finally:
        done.set()
        reader.join()
    assert reads[0] > 50 and misses == []
