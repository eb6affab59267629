"""The Cassandra backend's concurrency limits.

A limit is one row of ``limit_slots`` (holders: message id -> lease end), changed only by
lightweight transactions under a version check: read, decide, ``UPDATE ... IF version =``,
and read again when another writer won. Its waiting line is a partition of
``limit_waiters`` clustered by a time uuid; a waiter is taken off the line with
``DELETE ... IF EXISTS``, so two releasers never both take the same one. Waking a waiter
moves its pending row to now under the shard lock, as a claim would, so no consumer can
be claiming the row being moved. Costs: a slot step is two to four Paxos round trips, so a
limited message costs several milliseconds more than an unlimited one here.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, TypeVar

from tickwork.scheduler.backends.base import Envelope
from tickwork.scheduler.backends.cassandra import cql
from tickwork.scheduler.backends.cassandra.batching import add_to_batch
from tickwork.scheduler.backends.cassandra.layout import EXPIRE_INSERT
from tickwork.scheduler.backends.cassandra.shard_lock import CassandraShardLock
from tickwork.scheduler.backends.records import SlotRequest, Waiter
from tickwork.scheduler.backends.roles import Limits
from tickwork.scheduler.errors import BackendError

T = TypeVar("T")

_CAS_ATTEMPTS = 50  # writers racing for one limit row: read and try again this often
_LOCK_WAIT_S = 5.0  # how long waking waits for a busy shard lock

Holders = dict[str, int]


class CasRow(NamedTuple):
    """The statements of a row changed only by compare-and-set on its version, and how a
    stored value (None when absent) becomes a fresh, mutable one."""

    select: str  # SELECT value, version ... WHERE name = ?
    insert: str  # INSERT (name, value, version) VALUES (?, ?, 1) IF NOT EXISTS
    update: str  # UPDATE SET value = ?, version = ? WHERE name = ? IF version = ?
    fresh: Callable[[Any], Any]


_SLOT_ROW = CasRow(cql.SELECT_LIMIT, cql.INSERT_LIMIT, cql.UPDATE_LIMIT, lambda v: dict(v or {}))


class CassandraLimits(Limits):
    """Slots and waiters of concurrency limits."""

    def __init__(self, store: CassandraShardLock) -> None:
        self._store = store

    def _change_limit(self, name: str, change: Callable[[Holders, int], tuple[Holders, T]]) -> T:
        """Apply ``change(holders, now) -> (new holders, answer)`` to the limit ``name`` as
        one compare-and-set; unchanged holders write nothing. Returns the answer."""
        return self.compare_and_set(_SLOT_ROW, name, change)

    def compare_and_set(
        self, statements: CasRow, name: str, change: Callable[[Any, int], tuple[Any, T]]
    ) -> T:
        """Apply ``change(value, now) -> (new value, answer)`` to the row ``name`` read and
        written by ``statements`` as one compare-and-set on its version; an unchanged value
        writes nothing. Returns the answer."""
        for _ in range(_CAS_ATTEMPTS):
            row = self._store.run(self._store.prepare(statements.select), (name,)).one()
            value = statements.fresh(row[0] if row is not None else None)
            updated, answer = change(statements.fresh(value), self._store.now_ms())
            if updated == value:
                return answer
            if row is None:
                applied = self._store.run(
                    self._store.prepare(statements.insert), (name, updated)
                ).one()
            else:
                version = row.version
                params = (updated, version + 1, name, version)
                applied = self._store.run(self._store.prepare(statements.update), params).one()
            if applied.applied:
                return answer
            time.sleep(random.uniform(0.001, 0.01))  # another writer won: read it again
        raise BackendError(f"the limit {name!r} is too contended: try again")

    def acquire(self, requests: Sequence[SlotRequest]) -> list[int | None]:
        return [self._acquire(request) for request in requests]

    def _acquire(self, request: SlotRequest) -> int | None:
        def take(holders: Holders, now: int) -> tuple[Holders, int | None]:
            live = {h: until for h, until in holders.items() if until > now}
            if request.message_id in live or len(live) < request.capacity:
                live[request.message_id] = now + request.lease_ms
                return live, None
            return holders, min(live.values())

        return self._change_limit(request.limit, take)

    def wait(self, request: SlotRequest) -> bool:
        rows = self._store.run(self._store.prepare(cql.SELECT_WAITERS), (request.limit,))
        if all(str(row.id) != request.message_id for row in rows):
            params = (request.limit, request.queue, request.key, request.message_id)
            self._store.run(self._store.prepare(cql.INSERT_WAITER), params)
        row = self._store.run(self._store.prepare(cql.SELECT_LIMIT), (request.limit,)).one()
        now = self._store.now_ms()
        held = sum(1 for until in (row.holders or {}).values() if until > now) if row else 0
        return held < request.capacity

    def release(self, held: Sequence[tuple[str, str]]) -> list[Waiter]:
        woken: list[Waiter] = []
        for limit, message_id in held:

            def drop(holders: Holders, _now: int, holder: str = message_id) -> tuple[Holders, bool]:
                was_held = holders.pop(holder, None) is not None
                return holders, was_held

            if self._change_limit(limit, drop):
                waiter = self._pop_waiter(limit)
                if waiter is not None:
                    woken.append(waiter)
        return woken

    def _pop_waiter(self, limit: str) -> Waiter | None:
        """Take the first waiter off the line (another releaser may take it first)."""
        for _ in range(_CAS_ATTEMPTS):
            rows = list(self._store.run(self._store.prepare(cql.SELECT_FIRST_WAITERS), (limit,)))
            if not rows:
                return None
            for row in rows:
                taken = self._store.run(
                    self._store.prepare(cql.DELETE_WAITER), (limit, row.seq)
                ).one()
                if taken.applied:
                    return Waiter(limit, str(row.queue), row.key, str(row.id))
        return None

    def pop_waiters(self, limit: str, count: int) -> list[Waiter]:
        popped: list[Waiter] = []
        while len(popped) < count:
            waiter = self._pop_waiter(limit)
            if waiter is None:
                break
            popped.append(waiter)
        return popped

    def extend(self, held: Sequence[tuple[str, str]], lease_ms: int) -> None:
        by_limit: dict[str, list[str]] = {}
        for limit, message_id in held:
            by_limit.setdefault(limit, []).append(message_id)
        for limit, ids in by_limit.items():

            def extend(holders: Holders, now: int, ids: list[str] = ids) -> tuple[Holders, None]:
                for holder in ids:
                    if holder in holders:
                        holders[holder] = now + lease_ms
                return holders, None

            self._change_limit(limit, extend)

    def wake(self, waiters: Sequence[Waiter]) -> list[bool]:
        groups: dict[tuple[str, int], list[int]] = {}
        seen: set[tuple[str, str]] = set()
        for index, waiter in enumerate(waiters):
            if (waiter.queue, waiter.message_id) in seen:
                continue  # moved once: a second move in the same batch would copy its row
            seen.add((waiter.queue, waiter.message_id))
            shard = self._store.shard(waiter.queue, waiter.message_id, waiter.key)
            groups.setdefault((waiter.queue, shard), []).append(index)
        woken = [False] * len(waiters)
        for (queue, shard), indexes in groups.items():
            state = self._wait_for_lock(queue, shard)
            try:
                batch = self._store.batch()
                for index in indexes:
                    woken[index] = self._move_to_now(batch, queue, waiters[index], state.fence)
                self._store.run(batch)
            finally:
                self._store.unlock(queue, shard, state)
        return woken

    def _wait_for_lock(self, queue: str, shard: int) -> Any:
        deadline = time.monotonic() + _LOCK_WAIT_S
        while True:
            state = self._store.lock(queue, shard)
            if state is not None:
                return state
            if time.monotonic() > deadline:
                raise BackendError(f"shard {shard} of {queue!r} stayed locked: cannot wake")
            time.sleep(random.uniform(0.005, 0.02))

    def _move_to_now(self, batch: Any, queue: str, waiter: Waiter, fence: int) -> bool:
        """Under the shard lock: make a pending message due now (move its row); False if
        it is gone or leased."""
        where = self._store.run(
            self._store.prepare(cql.SELECT_INDEX), (queue, waiter.message_id)
        ).one()
        if where is None or where.leased:
            return False
        place = (queue, where.bucket, where.shard, where.ready_ms, waiter.message_id)
        row = self._store.run(self._store.prepare(cql.SELECT_PENDING), place).one()
        if row is None:
            return False
        now = self._store.now_ms()
        if row.ready_ms <= now:
            return True  # due already
        add_to_batch(batch, self._store.prepare(cql.DELETE_PENDING), (fence, *place))
        envelope = Envelope(
            waiter.message_id, queue, row.key, row.priority, now, row.timeout_ms, row.body
        )
        self._store.insert(batch, envelope, fence + EXPIRE_INSERT, row.attempt or 0, row.last_error)
        return True

    def usage(self, limits: Sequence[str]) -> dict[str, tuple[int, int]]:
        now = self._store.now_ms()
        usage: dict[str, tuple[int, int]] = {}
        for limit in limits:
            row = self._store.run(self._store.prepare(cql.SELECT_LIMIT), (limit,)).one()
            held = sum(1 for until in (row.holders or {}).values() if until > now) if row else 0
            waiting = self._store.run(self._store.prepare(cql.COUNT_WAITERS), (limit,)).one().n
            usage[limit] = (held, int(waiting))
        return usage
