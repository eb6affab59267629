"""``Backend.aenqueue`` (the async producer API's write) answers as ``enqueue`` does, on
every backend: each conflict mode, a duplicate, a conflict that writes nothing, a full
bounded queue. The first call on a queue and the later ones may take different paths
(on Redis: a thread until the queue's shard count is known, then the loop itself), so
each case writes twice."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest

from tests.support.backends import BackendHarness
from tickwork.scheduler import KeyConflict
from tickwork.scheduler.backends import Envelope, OnConflict, Outcome

T = TypeVar("T")


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)


def env(h: BackendHarness, message_id: str, key: str | None = None, queue: str = "q") -> Envelope:
    return Envelope(message_id, queue, key, 0, h.now_ms(), 1000, f"body-{message_id}".encode())


def test_aenqueue_answers_as_enqueue_does(harness: BackendHarness) -> None:
    b = harness.backend
    first, keyed = env(harness, "a"), env(harness, "k1", key="K")
    assert run(b.messages.aenqueue([first])) == [Outcome.ENQUEUED]
    assert run(b.messages.aenqueue([keyed, env(harness, "b")])) == [Outcome.ENQUEUED] * 2
    assert run(b.messages.aenqueue([first])) == [Outcome.DUPLICATE]
    assert run(b.messages.aenqueue([keyed], OnConflict.ERROR)) == [Outcome.DUPLICATE]
    assert run(b.messages.aenqueue([env(harness, "k2", key="K")], OnConflict.IGNORE)) == [
        Outcome.IGNORED
    ]
    replaced = run(b.messages.aenqueue([env(harness, "k3", key="K")], OnConflict.REPLACE))
    assert replaced == [Outcome.REPLACED]
    holder = b.messages.get_by_key("q", "K")
    assert holder is not None and holder.envelope.id == "k3"
    assert holder.envelope.body == b"body-k3"
    assert {c.id for c in b.leases.claim("q", 10).claims} == {"a", "b", "k3"}


def test_aenqueue_with_a_conflict_writes_nothing(harness: BackendHarness) -> None:
    b = harness.backend
    run(b.messages.aenqueue([env(harness, "first", key="K")]))
    with pytest.raises(KeyConflict):
        run(b.messages.aenqueue([env(harness, "fresh"), env(harness, "second", key="K")]))
    assert b.messages.get("fresh") is None, "a batch with a conflict must write nothing"
    with pytest.raises(KeyConflict):
        run(b.messages.aenqueue([env(harness, "third", key="K")]))
    holder = b.messages.get_by_key("q", "K")
    assert holder is not None and holder.envelope.id == "first"


def test_a_bounded_aenqueue_refuses_what_does_not_fit(harness: BackendHarness) -> None:
    b, queue = harness.backend, f"bq-{uuid.uuid4().hex[:8]}"
    b.queues.set_bound(queue, 6)  # a cluster's shards take equal shares: offer many more
    offered = [env(harness, f"{queue}-{i}", queue=queue) for i in range(60)]
    outcomes = run(b.messages.aenqueue(offered, bounded=True))
    assert outcomes.count(Outcome.ENQUEUED) == 6 and outcomes.count(Outcome.FULL) == 54
    more = [env(harness, f"{queue}-more-{i}", queue=queue) for i in range(30)]
    assert run(b.messages.aenqueue(more, bounded=True)) == [Outcome.FULL] * 30
    assert all(b.messages.get(e.id) is None for e in more), "nothing refused was written"
    stored = [e for e, o in zip(offered, outcomes, strict=True) if o is Outcome.ENQUEUED]
    assert run(b.messages.aenqueue(stored, bounded=True)) == [Outcome.DUPLICATE] * 6
