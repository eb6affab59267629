"""The operator roles (``PoisonStore``, ``QueueAdmin``, ``Aborts``): the poison store,
statistics, purge, pause and abort requests, on every backend."""

from __future__ import annotations

from tests.support.backends import BackendHarness
from tests.support.contract import claim_all, env
from tickwork.scheduler.backends import AbortRequest, Failure

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


def test_stats_date_the_longest_waiting_ready_message(harness: BackendHarness) -> None:
    """``next_due_ms`` is the earliest due time of the messages waiting: with messages
    ready, the due time of the one that waited longest, whatever its priority, also once
    a claim moved them into the ready line (the age of a queue's backlog,
    ``tickwork_queue_oldest_ready_seconds``)."""
    b = harness.backend
    ready = {
        "oldest": env(harness, "oldest", priority=-3, due_in_ms=100),
        "urgent": env(harness, "urgent", priority=5, due_in_ms=200),
        "plain": env(harness, "plain", due_in_ms=300),
    }
    b.messages.enqueue([*ready.values(), env(harness, "later", priority=9, due_in_ms=60_000)])
    harness.advance(400)
    s = b.queues.stats("q")[0]
    assert (s.ready, s.scheduled) == (3, 1)
    assert s.next_due_ms == ready["oldest"].due_ms
    (first,) = b.leases.claim("q", 1).claims  # the others wait in the ready line now
    waiting = [e for e in ready.values() if e.id != first.id]
    assert b.queues.stats("q")[0].next_due_ms == min(e.due_ms for e in waiting)
    b.messages.delete(waiting[0].id)
    assert b.queues.stats("q")[0].next_due_ms == waiting[1].due_ms
    late = env(harness, "late", due_in_ms=-30_000)  # enqueued after its time: dated by it
    b.messages.enqueue([late])
    assert b.queues.stats("q")[0].next_due_ms == late.due_ms


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
