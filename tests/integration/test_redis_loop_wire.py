"""Writes from an event loop on the loop itself (``loop_wire.py``): no thread once the
queue is known, scripts loaded again after a flush, a dead connection or a call cancelled
mid-reply never handing its reply to the next call, and a loop's connections closed when
it shuts down."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
import redis

from tests.support.backends import Servers
from tests.support.helpers import without_threads
from tickwork.scheduler import ReplicaTimeout, open_backend
from tickwork.scheduler.backends import Envelope, OnConflict, Outcome
from tickwork.scheduler.backends.redis.backend import RedisBackend


def _backend(options: str = "") -> tuple[RedisBackend, str]:
    name = f"loop-{uuid.uuid4().hex[:8]}"
    backend = open_backend(f"{Servers.redis_url()}?prefix={name}{options}")
    assert isinstance(backend, RedisBackend)
    backend.store.shard_count("q")  # known: the loop's own path from the first call
    return backend, name


def _envelope(backend: RedisBackend, message_id: str, key: str | None = None) -> Envelope:
    return Envelope(message_id, "q", key, 0, backend.now_ms(), 5000, message_id.encode())


def _client() -> redis.Redis:
    return redis.Redis.from_url(Servers.redis_url())


def _connections(name: str) -> int:
    """Connections open to the server now named ``name``."""
    return sum(1 for c in _client().client_list() if c.get("name") == name)


def test_a_known_queue_is_written_from_the_loop_without_a_thread() -> None:
    backend, _ = _backend()

    async def writes() -> list[list[Outcome]]:
        return list(
            await asyncio.gather(
                *(backend.messages.aenqueue([_envelope(backend, f"m{i}")]) for i in range(50))
            )
        )

    assert without_threads(writes()) == [[Outcome.ENQUEUED]] * 50
    assert len(backend.leases.claim("q", 100).claims) == 50
    backend.close()


def test_scripts_flushed_from_the_server_are_loaded_again() -> None:
    backend, _ = _backend()
    assert without_threads(backend.messages.aenqueue([_envelope(backend, "before")])) == [
        Outcome.ENQUEUED
    ]
    _client().script_flush()
    assert without_threads(backend.messages.aenqueue([_envelope(backend, "after")])) == [
        Outcome.ENQUEUED
    ]
    assert {c.id for c in backend.leases.claim("q", 10).claims} == {"before", "after"}
    backend.close()


def test_a_killed_connection_falls_back_and_loses_nothing() -> None:
    backend, _ = _backend()

    async def writes() -> list[list[Outcome]]:
        first = await backend.messages.aenqueue([_envelope(backend, "a")])
        _client().client_kill_filter(_type="normal", skipme=False)
        return [first, await backend.messages.aenqueue([_envelope(backend, "b")])]

    assert asyncio.run(writes()) == [[Outcome.ENQUEUED], [Outcome.ENQUEUED]]
    assert {c.id for c in backend.leases.claim("q", 10).claims} == {"a", "b"}
    backend.close()


def test_a_call_cancelled_mid_reply_leaves_its_reply_to_no_one() -> None:
    """A replacement cancelled while the server is paused would answer REPLACED once the
    pause ends; the next call must read its own ENQUEUED, never that stale reply. redis-py
    closes a connection whose read was cancelled; the wire gives it back to its pool, here
    a pool of one, so the next call has a connection of the loop (none, and it would go
    to a thread, which this test forbids)."""
    backend, _ = _backend("&max_connections=1")
    backend.messages.enqueue([_envelope(backend, "k1", key="K")])
    admin = _client()

    async def calls() -> list[Outcome]:
        await backend.messages.aenqueue(
            [_envelope(backend, "warm")]
        )  # the loop's connection is open
        admin.client_pause(300, all=False)  # writes wait; the script call is a write
        replacing = backend.messages.aenqueue(
            [_envelope(backend, "k2", key="K")], OnConflict.REPLACE
        )
        try:
            await asyncio.wait_for(replacing, 0.05)
        except TimeoutError:
            pass
        else:
            raise AssertionError("the paused server answered")
        time.sleep(0.4)  # the pause ends; the cancelled call's reply is on its socket
        return await backend.messages.aenqueue([_envelope(backend, "fresh")])

    assert without_threads(calls()) == [Outcome.ENQUEUED]
    holder = backend.messages.get_by_key("q", "K")  # the cancelled call ran or not: either holds
    assert holder is not None and holder.envelope.id in ("k1", "k2")
    assert {c.id for c in backend.leases.claim("q", 10).claims} == {
        "warm",
        "fresh",
        holder.envelope.id,
    }
    backend.close()


def test_a_loops_connections_are_closed_when_it_shuts_down() -> None:
    name = f"loop-{uuid.uuid4().hex[:8]}"
    backend = open_backend(f"{Servers.redis_url()}?prefix={name}&client_name={name}")
    assert isinstance(backend, RedisBackend)
    backend.store.shard_count("q")

    async def writes(round_: int) -> int:
        envelopes = [_envelope(backend, f"r{round_}-{i}") for i in range(5)]
        await asyncio.gather(*(backend.messages.aenqueue([e]) for e in envelopes))
        return _connections(name)

    for round_ in range(2):  # a second loop gets connections of its own
        assert asyncio.run(writes(round_)) >= 2, "the loop wrote on connections of its own"
        deadline = time.monotonic() + 5
        while _connections(name) > 1 and time.monotonic() < deadline:  # the blocking one
            time.sleep(0.05)
        assert _connections(name) == 1, "the loop's connections closed with it"
    assert len(backend.leases.claim("q", 20).claims) == 10
    backend.close()


def test_a_write_that_waits_for_replicas_is_not_sent_from_the_loop() -> None:
    """``wait_replicas`` needs ``WAIT`` after the write: the loop's call takes the blocking
    path, so a server without replicas fails it as it fails ``enqueue``."""
    backend = open_backend(
        f"{Servers.redis_url()}?prefix=loop-{uuid.uuid4().hex[:8]}&wait_replicas=1"
        "&wait_timeout_ms=50"
    )
    assert isinstance(backend, RedisBackend)
    backend.store.shard_count("q")
    with pytest.raises(ReplicaTimeout):
        backend.messages.enqueue([_envelope(backend, "blocking")])
    with pytest.raises(ReplicaTimeout):
        asyncio.run(backend.messages.aenqueue([_envelope(backend, "from-the-loop")]))
    backend.close()
