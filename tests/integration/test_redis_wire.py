"""A thread keeps the Redis connection its script calls took (``wire.py``): given back
when the thread ends, never kept from a bounded pool, and never used by a forked child."""

from __future__ import annotations

import os
import threading
import uuid
from typing import Any

from tests.support.backends import Servers
from tickwork.scheduler import open_backend
from tickwork.scheduler.backends import Envelope
from tickwork.scheduler.backends.redis.backend import RedisBackend


def _backend(options: str = "") -> RedisBackend:
    backend = open_backend(f"{Servers.redis_url()}?prefix=wire-{uuid.uuid4().hex[:8]}{options}")
    assert isinstance(backend, RedisBackend)
    return backend


def _envelope(message_id: str, now: int) -> Envelope:
    return Envelope(message_id, "q", None, 0, now, 5000, b"x")


def _in_use(backend: RedisBackend) -> int:
    pool: Any = backend.store.client.connection_pool
    return len(pool._in_use_connections)  # redis-py's own count of checked-out connections


def test_a_thread_keeps_its_connection_and_gives_it_back_when_it_ends() -> None:
    backend = _backend()
    now = backend.now_ms()
    ready = threading.Event()
    finish = threading.Event()

    def calls() -> None:
        for i in range(5):
            backend.messages.enqueue([_envelope(f"t{i}", now)])
        ready.set()
        finish.wait(10)

    thread = threading.Thread(target=calls)
    thread.start()
    assert ready.wait(10)
    assert _in_use(backend) == 1, "one connection kept for the thread's five calls"
    finish.set()
    thread.join(10)
    assert _in_use(backend) == 0, "given back when the thread ended"
    assert sorted(c.id for c in backend.leases.claim("q", 10).claims) == [f"t{i}" for i in range(5)]
    backend.close()


def test_at_most_half_a_pools_connections_are_kept_by_threads() -> None:
    backend = _backend("&max_connections=4")
    now = backend.now_ms()
    ready = [threading.Event() for _ in range(4)]
    finish = threading.Event()

    def calls(n: int) -> None:
        for i in range(3):
            backend.messages.enqueue([_envelope(f"b{n}-{i}", now)])
        ready[n].set()
        finish.wait(10)

    threads = [threading.Thread(target=calls, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    assert all(event.wait(10) for event in ready)
    assert _in_use(backend) == 2, "two threads keep one each; two check out per call"
    finish.set()
    for thread in threads:
        thread.join(10)
    assert _in_use(backend) == 0
    assert len(backend.leases.claim("q", 20).claims) == 12
    backend.close()


def test_a_forked_child_makes_its_own_connection() -> None:
    """The child claims (a reply of records) while the parent enqueues (a reply of
    outcomes): on one shared socket their replies would cross."""
    backend = _backend()
    now = backend.now_ms()
    backend.messages.enqueue(
        [Envelope(f"c{i}", "kids", None, 0, now, 60_000, b"c") for i in range(200)]
    )
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        try:
            claimed = [c.id for _ in range(200) for c in backend.leases.claim("kids", 1).claims]
            os._exit(0 if sorted(claimed) == sorted(f"c{i}" for i in range(200)) else 3)
        except BaseException:
            os._exit(1)
    for i in range(200):  # the parent goes on on its own connection meanwhile
        backend.messages.enqueue([_envelope(f"p{i}", now)])
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child's claims came back whole"
    assert sorted(c.id for c in backend.leases.claim("q", 300).claims) == sorted(
        f"p{i}" for i in range(200)
    )
    backend.close()
