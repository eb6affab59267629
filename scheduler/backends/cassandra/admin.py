"""The Cassandra backend's poison queue, statistics, paused queues, abort requests and
purging."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

from tickwork.scheduler.backends.base import Envelope, PoisonRecord
from tickwork.scheduler.backends.cassandra import cql
from tickwork.scheduler.backends.cassandra.batching import add_to_batch, ttl_seconds
from tickwork.scheduler.backends.cassandra.bounds import CassandraBounds
from tickwork.scheduler.backends.cassandra.shard_lock import (
    CassandraShardLock,
    stored_state,
)
from tickwork.scheduler.backends.records import AbortRequest, Failure, QueueStats
from tickwork.scheduler.backends.roles import Aborts, PoisonStore, QueueAdmin
from tickwork.scheduler.errors import ConfigurationError


class CassandraPoison(PoisonStore):
    """The poison queue: reading, replaying, purging."""

    def __init__(self, store: CassandraShardLock) -> None:
        self._store = store

    @staticmethod
    def _poison_record(row: Any) -> PoisonRecord:
        envelope = Envelope(
            row.id, row.queue, row.key, row.priority, row.failed_ms, row.timeout_ms, row.body
        )
        return PoisonRecord(
            envelope,
            Failure(row.reason, row.error_type, row.error, row.traceback),
            row.attempts,
            row.failed_ms,
        )

    def list(self, queue: str | None = None, limit: int = 100) -> builtins.list[PoisonRecord]:
        records = []
        for name in [queue] if queue is not None else self._store.queues():
            rows = self._store.run(self._store.prepare(cql.SELECT_POISON), (name,))
            records += [self._poison_record(r) for r in rows]
        records.sort(key=lambda r: (r.failed_at_ms, r.envelope.id))
        return records[:limit]

    def get(self, message_id: str) -> PoisonRecord | None:
        for name in self._store.queues():
            row = self._store.run(
                self._store.prepare(cql.SELECT_POISON_ONE), (name, message_id)
            ).one()
            if row is not None:
                return self._poison_record(row)
        return None

    def replay(self, ids: Sequence[str] | None = None, queue: str | None = None) -> int:
        records = self.list(queue, limit=10**9)
        if ids is not None:
            wanted = set(ids)
            records = [r for r in records if r.envelope.id in wanted]
        moved = 0
        now = self._store.now_ms()
        for record in records:
            e = record.envelope
            if self._store.get(e.id, e.queue) is not None or (
                e.key is not None and self._store.key_holder(e.queue, e.key) is not None
            ):
                continue
            batch = self._store.batch()
            self._store.insert(batch, e._replace(due_ms=now), self._store.now_us())
            add_to_batch(
                batch,
                self._store.prepare(cql.DELETE_POISON),
                (e.queue, e.id),
            )
            self._store.run(batch)
            moved += 1
        return moved

    def purge(self, queue: str | None = None, ids: Sequence[str] | None = None) -> int:
        purged = 0
        if ids is not None:
            wanted = set(ids)
            delete = self._store.prepare(cql.DELETE_POISON)
            for record in self.list(queue, limit=10**9):
                if record.envelope.id in wanted:
                    self._store.run(delete, (record.envelope.queue, record.envelope.id))
                    purged += 1
            return purged
        for name in [queue] if queue is not None else self._store.queues():
            purged += len(self.list(name, limit=10**9))
            self._store.run(self._store.prepare(cql.DELETE_QUEUE_POISON), (name,))
        return purged


class CassandraQueues(QueueAdmin):
    """Counting, pausing, bounding and purging queues."""

    def __init__(self, store: CassandraShardLock, bounds: CassandraBounds) -> None:
        self._store = store
        self._bounds = bounds

    def names(self) -> list[str]:
        return self._store.queues()

    def stats(self, queue: str | None = None) -> list[QueueStats]:
        """Counts from the live rows only: pending rows after each shard's sweep position
        and leases with a deadline after its expiry position (older ones are tombstones)."""
        result = []
        paused = set(self.paused())
        rows = self._store.run(self._store.prepare(cql.SELECT_BOUNDS))
        bounds = {str(row.queue): int(row.max_pending) for row in rows}
        now = self._store.now_ms()
        for name in [queue] if queue is not None else self._store.queues():
            ready = scheduled = in_flight = 0
            next_due: int | None = None
            per_shard: dict[int, int] = {}
            for shard in range(self._store.meta(name).shards):
                stored = stored_state(self._store.lock_row(name, shard))
                # an id stored twice (two identical late writes at once) counts once
                rows = self._store.pending_after_sweep(name, shard, stored)
                unique = list({str(row.id): row for row in rows}.values())
                leases = self._store.live_leases(name, shard, stored)
                ready += sum(row.ready_ms <= now for row in unique)
                scheduled += sum(row.ready_ms > now for row in unique)
                in_flight += len(leases)
                per_shard[shard] = len(unique) + len(leases)
                if unique:
                    first = min(_due(row) for row in unique)
                    next_due = first if next_due is None else min(next_due, first)
            poison = len(list(self._store.run(self._store.prepare(cql.SELECT_POISON_IDS), (name,))))
            counters = {
                str(r.name): int(r.value)
                for r in self._store.run(self._store.prepare(cql.SELECT_COUNTERS), (name,))
            }
            result.append(
                QueueStats(
                    name,
                    ready,
                    scheduled,
                    in_flight,
                    poison,
                    next_due,
                    counters,
                    per_shard,
                    name in paused,
                    bounds.get(name),
                )
            )
        return result

    def pause(self, queue: str) -> bool:
        self._store.run(self._store.prepare(cql.REGISTER_QUEUE), (queue,))
        row = self._store.run(
            self._store.prepare(cql.PAUSE_QUEUE), (queue, self._store.now_ms())
        ).one()
        return bool(row.applied)

    def resume(self, queue: str) -> bool:
        return bool(self._store.run(self._store.prepare(cql.RESUME_QUEUE), (queue,)).one().applied)

    def paused(self) -> list[str]:
        return sorted(str(r.queue) for r in self._store.run(self._store.prepare(cql.SELECT_PAUSED)))

    def set_bound(self, queue: str, max_pending: int | None) -> None:
        self._bounds.set_bound(queue, max_pending)

    def bounds(self) -> dict[str, int]:
        return self._bounds.bounds()

    def set_fair_weight(self, queue: str, fair: str, weight: int | None) -> None:
        raise ConfigurationError(
            "weighted fair share needs fair share, which is not offered on Cassandra: its "
            "claims read due messages in time order from stored positions, so a turn could "
            "not move a message ahead (use PostgreSQL, Redis or SQLite for it)"
        )

    def fair_weights(self, queue: str) -> dict[str, int]:
        return {}

    def add_counters(self, queue: str, deltas: dict[str, int]) -> None:
        for name, delta in deltas.items():
            self._store.count(queue, name, delta)

    def purge(self, queue: str) -> int:
        """Delete every pending and in-flight message (whole partitions at once)."""
        meta = self._store.meta(queue)
        removed = 0
        ts = self._store.now_us()
        for shard in range(meta.shards):
            stored = stored_state(self._store.lock_row(queue, shard))
            ids = list(
                {str(row.id) for row in self._store.pending_after_sweep(queue, shard, stored)}
            )
            ids += self._store.live_leases(queue, shard, stored)
            removed += len(ids)
            self._store.execute_many(
                [self._store.prepare(cql.DELETE_INDEX).bind((ts, queue, i)) for i in ids]
                + [
                    self._store.prepare(cql.DELETE_BUCKET).bind((ts, queue, bucket, shard))
                    for bucket in range(meta.buckets)
                ]
                + [
                    self._store.prepare(cql.DELETE_DEADLINE_BUCKET).bind((ts, queue, shard, bucket))
                    for bucket in range(meta.buckets)
                ]
                + [
                    self._store.prepare(statement).bind((ts, queue, shard))
                    for statement in (cql.DELETE_SHARD_LEASES, cql.DELETE_SHARD_KEYS)
                ]
            )
        return removed


class CassandraAborts(Aborts):
    """Requests to abort running messages."""

    def __init__(self, store: CassandraShardLock) -> None:
        self._store = store

    def request(self, request: AbortRequest) -> None:
        ttl_s = ttl_seconds(request.expires_ms - self._store.now_ms())
        params = (
            request.message_id,
            request.queue,
            request.continue_chain,
            request.requested_ms,
            request.expires_ms,
            ttl_s,
        )
        self._store.run(self._store.prepare(cql.INSERT_ABORT), params)

    def pending(self) -> list[AbortRequest]:
        now = self._store.now_ms()
        rows = self._store.run(self._store.prepare(cql.SELECT_ABORTS))
        return [
            AbortRequest(r.id, r.queue, bool(r.continue_chain), r.requested_ms, r.expires_ms)
            for r in rows
            if r.expires_ms > now
        ]

    def clear(self, message_ids: Sequence[str]) -> int:
        held = {request.message_id for request in self.pending()}
        for message_id in message_ids:
            self._store.run(self._store.prepare(cql.DELETE_ABORT), (message_id,))
        return len(held.intersection(message_ids))


def _due(row: Any) -> int:
    """When a pending row's message was due: its place (when it became ready), or the
    earlier due time it keeps beside it (a message enqueued late): ``next_due_ms`` as
    the other backends give it."""
    return int(row.ready_ms if row.due_ms is None else min(row.ready_ms, row.due_ms))
