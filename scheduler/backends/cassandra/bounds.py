"""The Cassandra backend's queue bounds: ``max_pending`` per queue in ``queue_bounds``.

Cassandra has no transaction spanning a count and a batch of inserts, so the bound is
approximate, on purpose: a bounded enqueue counts the queue's live messages (per shard,
the pending rows after the sweep position with one ``COUNT`` and the live leases through
their deadlines, as ``stats`` does) and then writes what fits. Producers that count at
the same moment can each fill the same room: the bound can be passed by what concurrent
producers write in one call each (an exact bound would take a lightweight transaction on
one row per queue for every enqueue and every ack: a serial point for the whole queue).
Bounds are read at most once a second per process (a new bound applies within a second)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from scheduler.backends.base import Envelope
from scheduler.backends.cassandra import cql
from scheduler.backends.cassandra.admin import CassandraAdmin
from scheduler.backends.cassandra.shard_lock import stored_state
from scheduler.errors import ConfigurationError

_BOUNDS_FRESH_S = 1.0


class CassandraBounds(CassandraAdmin):
    """Bounds of queues, counted before a bounded enqueue writes."""

    _bounds_cache: tuple[float, dict[str, int]] | None = None

    def set_queue_bound(self, queue: str, max_pending: int | None) -> None:
        if max_pending is not None and max_pending < 1:
            raise ConfigurationError(f"max_pending must be at least 1, not {max_pending}")
        self._run(self._prepare(cql.REGISTER_QUEUE), (queue,))
        if max_pending is None:
            self._run(self._prepare(cql.DELETE_BOUND), (queue,))
        else:
            self._run(self._prepare(cql.SET_BOUND), (queue, max_pending))
        self._bounds_cache = None

    def queue_bounds(self) -> dict[str, int]:
        rows = self._run(self._prepare(cql.SELECT_BOUNDS))
        bounds = {str(row.queue): int(row.max_pending) for row in rows}
        self._bounds_cache = (time.monotonic(), bounds)
        return bounds

    def pending_count(self, queue: str) -> int:
        """Messages of ``queue`` waiting or leased now (what its bound compares with)."""
        meta = self.meta(queue)
        buckets = list(range(meta.buckets))
        total = 0
        for shard in range(meta.shards):
            stored = stored_state(self._lock_row(queue, shard))
            params = (queue, buckets, shard, *stored.swept)
            row = self._run(self._prepare(cql.COUNT_PENDING_AFTER), params).one()
            total += int(row.count) + len(self._live_leases(queue, shard, stored))
        return total

    def _room(self, envelopes: Sequence[Envelope]) -> dict[str, int]:
        """How many more messages each bounded queue among ``envelopes`` takes now."""
        cached = self._bounds_cache
        if cached is not None and time.monotonic() - cached[0] < _BOUNDS_FRESH_S:
            bounds = cached[1]
        else:
            bounds = self.queue_bounds()
        queues = {e.queue for e in envelopes if e.queue in bounds}
        return {queue: bounds[queue] - self.pending_count(queue) for queue in sorted(queues)}
