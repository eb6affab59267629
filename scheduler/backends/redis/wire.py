"""Commands sent on a pooled connection directly, without redis-py's per-command
machinery (its retry wrapper, and in redis-py 8 its instrumentation on every pool
checkout): packed by hiredis, written in one send, their replies read in order. Used for
the scripts on one node (``scripts.py``); a caller whose connection failed falls back to
redis-py, whose retries reconnect.

A thread keeps the connection it took between its calls: a checkout and a release are a
noticeable part of a whole ``.delay()``.
At most half a pool's ``max_connections`` (redis-py's default: 100) are kept so, beyond
that, threads check one out per call and the pool's bound still holds for all. A kept
connection goes back to its pool when its thread ends (CPython drops a thread's locals
then) or has used more pools than ``_KEPT_PER_THREAD``, and a forked child never uses
one its parent kept."""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import hiredis
import redis

#: the pools a thread keeps a connection of, at most (the oldest is given back first)
_KEPT_PER_THREAD = 4

_threads = threading.local()
_kept: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()  # pool -> kept
_kept_lock = threading.RLock()  # re-entrant: a lease can be dropped (__del__) under it


class _Lease:
    """A connection of ``pool`` that one thread keeps; given back when dropped."""

    __slots__ = ("connection", "pid", "pool")

    def __init__(self, pool: Any, connection: Any) -> None:
        self.pool = pool
        self.connection = connection
        self.pid = os.getpid()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # at exit, what it uses may be gone
            if self.pid != os.getpid():
                return  # a forked child's pool resets itself instead
            with _kept_lock:
                _kept[self.pool] = _kept.get(self.pool, 1) - 1
            self.pool.release(self.connection)


def _connection(pool: Any) -> tuple[Any, bool]:
    """A connection of ``pool`` for this thread, and whether the thread keeps it (else
    the caller releases it)."""
    leases: list[_Lease] | None = getattr(_threads, "leases", None)
    if leases is None:
        leases = _threads.leases = []
    pid = os.getpid()
    for lease in leases:
        if lease.pool is pool:
            if lease.pid == pid:
                return lease.connection, True
            leases.remove(lease)  # taken in the parent before a fork: not this process's
            break
    with _kept_lock:
        keep = _kept.get(pool, 0) < pool.max_connections // 2
        if keep:
            _kept[pool] = _kept.get(pool, 0) + 1
    try:
        connection = pool.get_connection()
    except BaseException:
        if keep:
            with _kept_lock:
                _kept[pool] -= 1
        raise
    if keep:
        leases.append(_Lease(pool, connection))
        if len(leases) > _KEPT_PER_THREAD:
            del leases[0]
    return connection, keep


def send_commands(client: Any, commands: Sequence[tuple[Any, ...]]) -> list[Any] | None:
    """The replies to ``commands`` sent in one round trip on one of ``client``'s pooled
    connections, an error reply in its place as the exception redis-py makes of it
    (``NoScriptError``, ``ResponseError``...); None when the connection failed or timed
    out (it is closed; which commands ran is unknown, as with redis-py's own retry)."""
    pool = client.connection_pool
    try:
        connection, kept = _connection(pool)
    except (redis.ConnectionError, redis.TimeoutError):
        return None
    try:
        connection.send_packed_command([b"".join(_packed(connection, c) for c in commands)])
        replies: list[Any] = []
        for _ in commands:
            try:
                replies.append(connection.read_response())
            except redis.ResponseError as err:
                replies.append(err)
        return replies
    except (redis.ConnectionError, redis.TimeoutError):
        connection.disconnect()
        return None
    except BaseException:
        connection.disconnect()  # replies may be left unread: never hand it out again so
        raise
    finally:
        if not kept:
            pool.release(connection)


def _packed(connection: Any, command: tuple[Any, ...]) -> bytes:
    """``command`` in the wire protocol, packed by hiredis (part of the ``redis`` extra)
    directly (redis-py's ``pack_command`` does the same with more work around it); an
    argument hiredis refuses goes through redis-py."""
    try:
        packed: bytes = hiredis.pack_command(command)
        return packed
    except TypeError:
        return b"".join(connection.pack_command(*command))
