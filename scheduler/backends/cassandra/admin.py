"""The Cassandra backend's poison queue, statistics, paused queues, abort requests and
purging."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scheduler.backends.base import Envelope, PoisonRecord
from scheduler.backends.cassandra import cql
from scheduler.backends.cassandra.batching import add_to_batch, ttl_seconds
from scheduler.backends.cassandra.settling import CassandraSettling
from scheduler.backends.cassandra.shard_lock import ShardState, stored_state, time_slices
from scheduler.backends.records import AbortRequest, Failure, QueueStats


class CassandraAdmin(CassandraSettling):
    """Reading and replaying the poison queue, counting and purging queues."""

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

    def poison_list(self, queue: str | None = None, limit: int = 100) -> list[PoisonRecord]:
        records = []
        for name in [queue] if queue is not None else self.queues():
            rows = self._run(self._prepare(cql.SELECT_POISON), (name,))
            records += [self._poison_record(r) for r in rows]
        records.sort(key=lambda r: (r.failed_at_ms, r.envelope.id))
        return records[:limit]

    def poison_get(self, message_id: str) -> PoisonRecord | None:
        for name in self.queues():
            row = self._run(self._prepare(cql.SELECT_POISON_ONE), (name, message_id)).one()
            if row is not None:
                return self._poison_record(row)
        return None

    def poison_replay(self, ids: Sequence[str] | None = None, queue: str | None = None) -> int:
        records = self.poison_list(queue, limit=10**9)
        if ids is not None:
            wanted = set(ids)
            records = [r for r in records if r.envelope.id in wanted]
        moved = 0
        now = self.now_ms()
        for record in records:
            e = record.envelope
            if self.get(e.id, e.queue) is not None or (
                e.key is not None and self._key_holder(e.queue, e.key) is not None
            ):
                continue
            batch = self._batch()
            self._insert(batch, e._replace(due_ms=now), self._now_us())
            add_to_batch(
                batch,
                self._prepare(cql.DELETE_POISON),
                (e.queue, e.id),
            )
            self._run(batch)
            moved += 1
        return moved

    def poison_purge(self, queue: str | None = None, ids: Sequence[str] | None = None) -> int:
        purged = 0
        if ids is not None:
            wanted = set(ids)
            delete = self._prepare(cql.DELETE_POISON)
            for record in self.poison_list(queue, limit=10**9):
                if record.envelope.id in wanted:
                    self._run(delete, (record.envelope.queue, record.envelope.id))
                    purged += 1
            return purged
        for name in [queue] if queue is not None else self.queues():
            purged += len(self.poison_list(name, limit=10**9))
            self._run(self._prepare(cql.DELETE_QUEUE_POISON), (name,))
        return purged

    def stats(self, queue: str | None = None) -> list[QueueStats]:
        """Counts from the live rows only: pending rows after each shard's sweep position
        and leases with a deadline after its expiry position (older ones are tombstones)."""
        result = []
        paused = set(self.paused_queues())
        rows = self._run(self._prepare(cql.SELECT_BOUNDS))
        bounds = {str(row.queue): int(row.max_pending) for row in rows}
        now = self.now_ms()
        for name in [queue] if queue is not None else self.queues():
            ready = scheduled = in_flight = 0
            next_due: int | None = None
            per_shard: dict[int, int] = {}
            for shard in range(self.meta(name).shards):
                stored = stored_state(self._lock_row(name, shard))
                # an id stored twice (two identical late writes at once) counts once
                rows = self._pending_after_sweep(name, shard, stored)
                dues = list({str(row.id): row.ready_ms for row in rows}.values())
                leases = self._live_leases(name, shard, stored)
                ready += sum(d <= now for d in dues)
                scheduled += sum(d > now for d in dues)
                in_flight += len(leases)
                per_shard[shard] = len(dues) + len(leases)
                if dues:
                    next_due = min(dues) if next_due is None else min(next_due, min(dues))
            poison = len(list(self._run(self._prepare(cql.SELECT_POISON_IDS), (name,))))
            counters = {
                str(r.name): int(r.value)
                for r in self._run(self._prepare(cql.SELECT_COUNTERS), (name,))
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

    def _pending_after_sweep(self, queue: str, shard: int, stored: ShardState) -> list[Any]:
        """(ready_ms, id) of every pending row of a shard: those after its sweep position
        (at or before it everything was consumed)."""
        buckets = list(range(self.meta(queue).buckets))
        params = (queue, buckets, shard, *stored.swept)
        return list(self._run(self._prepare(cql.SELECT_PENDING_AFTER), params))

    def _live_leases(self, queue: str, shard: int, stored: ShardState) -> list[str]:
        """Ids of a shard's leases: found through their deadlines, between the expiry
        position and the longest lease from now, one read per second of deadlines (the
        deadlines of acked leases lie in between, as tombstones)."""
        now = self.now_ms()
        first = max(stored.expired_ms, now - stored.lease_ms) + 1
        slices = time_slices(first, now + stored.lease_ms, 1000, 10**6)
        args = [(queue, shard, self._bucket(queue, lo), lo - 1, hi) for lo, hi in slices]
        results = self._concurrently(self._prepare(cql.SELECT_DEADLINES_IN_BUCKET), args)
        ids = list({str(row.id) for result in results for row in result})
        chunks = [(queue, shard, ids[i : i + 100]) for i in range(0, len(ids), 100)]
        leases = self._concurrently(self._prepare(cql.SELECT_LEASES_BY_IDS), chunks)
        return [str(row.id) for result in leases for row in result]

    def pause_queue(self, queue: str) -> bool:
        self._run(self._prepare(cql.REGISTER_QUEUE), (queue,))
        row = self._run(self._prepare(cql.PAUSE_QUEUE), (queue, self.now_ms())).one()
        return bool(row.applied)

    def resume_queue(self, queue: str) -> bool:
        return bool(self._run(self._prepare(cql.RESUME_QUEUE), (queue,)).one().applied)

    def paused_queues(self) -> list[str]:
        return sorted(str(r.queue) for r in self._run(self._prepare(cql.SELECT_PAUSED)))

    def request_abort(self, request: AbortRequest) -> None:
        ttl_s = ttl_seconds(request.expires_ms - self.now_ms())
        params = (
            request.message_id,
            request.queue,
            request.continue_chain,
            request.requested_ms,
            request.expires_ms,
            ttl_s,
        )
        self._run(self._prepare(cql.INSERT_ABORT), params)

    def abort_requests(self) -> list[AbortRequest]:
        now = self.now_ms()
        rows = self._run(self._prepare(cql.SELECT_ABORTS))
        return [
            AbortRequest(r.id, r.queue, bool(r.continue_chain), r.requested_ms, r.expires_ms)
            for r in rows
            if r.expires_ms > now
        ]

    def clear_aborts(self, message_ids: Sequence[str]) -> int:
        held = {request.message_id for request in self.abort_requests()}
        for message_id in message_ids:
            self._run(self._prepare(cql.DELETE_ABORT), (message_id,))
        return len(held.intersection(message_ids))

    def add_counters(self, queue: str, deltas: dict[str, int]) -> None:
        for name, delta in deltas.items():
            self._count(queue, name, delta)

    def purge(self, queue: str) -> int:
        """Delete every pending and in-flight message (whole partitions at once)."""
        meta = self.meta(queue)
        removed = 0
        ts = self._now_us()
        for shard in range(meta.shards):
            stored = stored_state(self._lock_row(queue, shard))
            ids = list({str(row.id) for row in self._pending_after_sweep(queue, shard, stored)})
            ids += self._live_leases(queue, shard, stored)
            removed += len(ids)
            self._execute_many(
                [self._prepare(cql.DELETE_INDEX).bind((ts, queue, i)) for i in ids]
                + [
                    self._prepare(cql.DELETE_BUCKET).bind((ts, queue, bucket, shard))
                    for bucket in range(meta.buckets)
                ]
                + [
                    self._prepare(cql.DELETE_DEADLINE_BUCKET).bind((ts, queue, shard, bucket))
                    for bucket in range(meta.buckets)
                ]
                + [
                    self._prepare(statement).bind((ts, queue, shard))
                    for statement in (cql.DELETE_SHARD_LEASES, cql.DELETE_SHARD_KEYS)
                ]
            )
        return removed
