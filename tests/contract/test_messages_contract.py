"""The messages role (``Messages``): enqueue, read, cancel and list by key, on every
backend."""

from __future__ import annotations

import threading
import time

import pytest

from tests.support.backends import BackendHarness
from tests.support.contract import claim_all, env
from tickwork.scheduler import KeyConflict
from tickwork.scheduler.backends import OnConflict, Outcome, State

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


def test_a_message_replaced_within_one_batch_leaves_only_the_last(
    harness: BackendHarness,
) -> None:
    """Within one write, a message (keyed, or unkeyed by its id) replaced by a later one
    of the batch leaves the last, placed once: nothing of the earlier one stays ready."""
    b = harness.backend
    batch = [
        env(harness, "first", key="K"),
        env(harness, "second", key="K", due_in_ms=60_000),
        env(harness, "plain"),
        env(harness, "plain", due_in_ms=60_000),
        env(harness, "filler"),
    ]
    outcomes = b.messages.enqueue(batch, OnConflict.REPLACE)
    assert outcomes == [
        Outcome.ENQUEUED,
        Outcome.REPLACED,
        Outcome.ENQUEUED,
        Outcome.REPLACED,
        Outcome.ENQUEUED,
    ]
    got = b.messages.get_by_key("q", "K")
    assert got is not None and got.envelope.id == "second" and got.state is State.SCHEDULED
    assert b.messages.get("first") is None
    plain = b.messages.get("plain")
    assert plain is not None and plain.state is State.SCHEDULED
    stats = b.queues.stats("q")[0]
    assert (stats.ready, stats.scheduled) == (1, 2)
    assert [c.id for c in claim_all(harness)] == ["filler"]


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


@pytest.mark.parametrize("on_conflict", [OnConflict.IGNORE, OnConflict.ERROR])
def test_writers_racing_for_a_free_key_store_its_message_once(
    harness: BackendHarness, on_conflict: OnConflict
) -> None:
    """Eight writers at once put the same keyed message (one id: it comes from the key,
    as ten workers installing one ``@app.periodic`` schedule at start) due at slightly
    different times: one stores it, the others find it (a duplicate, ignored, or a
    conflict), and it is claimed once."""
    b = harness.backend
    writers = 8
    start = threading.Barrier(writers)
    outcomes: list[Outcome | str] = []

    def write(n: int) -> None:
        e = env(harness, "sched.0", key="K", due_in_ms=500 + n, body=f"due+{n}".encode())
        start.wait()
        try:
            outcomes.extend(b.messages.enqueue([e], on_conflict))
        except KeyConflict:
            outcomes.append("conflict")

    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert outcomes.count(Outcome.ENQUEUED) == 1, outcomes
    assert len(outcomes) == writers
    harness.advance(600)
    claims = claim_all(harness)
    assert [c.id for c in claims] == ["sched.0"], "stored once, claimed once"
    b.leases.ack([(claims[0], None)])
    harness.advance(100)
    assert claim_all(harness) == [] and b.messages.get_by_key("q", "K") is None


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


def test_keyed_reads_many_with_each_ones_state(harness: BackendHarness) -> None:
    """A worker reads every keyed message at start (its schedules): more than one read's
    chunk on Redis (500), each with its own body and state."""
    b = harness.backend
    b.messages.enqueue([env(harness, f"k{i}", key=f"K{i}") for i in range(1200)])
    b.messages.enqueue([env(harness, "later", key="L", due_in_ms=60_000)])
    claimed = {claim.id for claim in claim_all(harness, limit=7)}
    found = {m.envelope.id: m for m in b.messages.keyed("q")}
    assert len(found) == 1201 and len(claimed) == 7
    assert found["later"].state is State.SCHEDULED
    assert all(found[i].state is State.RUNNING for i in claimed)
    ready = [m for i, m in found.items() if i not in claimed and i != "later"]
    assert len(ready) == 1193 and all(m.state is State.READY for m in ready)
    assert all(m.envelope.body == f"body-{i}".encode() for i, m in found.items())


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
    deadline = time.monotonic() + 120
    try:  # claims and acks go on until the reader has read across at least 50 of them
        n = 0
        while n < 149 or reads[0] <= 50:
            assert time.monotonic() < deadline, f"the reader made {reads[0]} reads in 120 s"
            n += 1
            (claim,) = claim_all(harness)
            assert b.leases.ack([(claim, env(harness, f"c.{n}", key="K"))]) == [True]
    finally:
        done.set()
        reader.join()
    assert misses == []
