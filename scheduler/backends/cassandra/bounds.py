"""The Cassandra backend's queue bounds: ``max_pending`` per queue in ``queue_bounds``.

Cassandra has no transaction spanning a count and a batch of inserts, so the bound is
approximate, on purpose: a bounded enqueue counts the queue's live messages (per shard,
the pending rows after the sweep position with one ``COUNT`` and the live leases through
their deadlines, as ``stats`` does) and then writes what fits. Producers that count at
the same moment can each fill the same room: the bound can be passed by what concurrent
producers write in one call each (an exact bound would take a lightweight transaction on
one row per queue for every enqueue and every ack: a serial point for the whole queue).

Counting reads every live row, so a process does not count again for each call: it
reuses a count up to a second old while what it wrote since (and is about to write) is at
most a ``SHARE`` (a tenth) of the room that count left. Up to ten producers writing at once
therefore stay within the bound (plus one call each, as above); more can pass it by their
shares beyond ten. Bounds are read at most once a second per process (a new bound
applies within a second)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from tickwork.scheduler.backends.base import Envelope
from tickwork.scheduler.backends.cassandra import cql
from tickwork.scheduler.backends.cassandra.shard_lock import CassandraShardLock, stored_state
from tickwork.scheduler.errors import ConfigurationError

_BOUNDS_FRESH_S = 1.0
_COUNT_FRESH_S = 1.0
SHARE = 0.1  # of the room a count left, what a process writes before it counts again


class CassandraBounds:
    """Bounds of queues, counted before a bounded enqueue writes (a collaborator of the
    messages and queues roles)."""

    def __init__(self, store: CassandraShardLock) -> None:
        self._store = store
        self._bounds_cache: tuple[float, dict[str, int]] | None = None
        #: per queue: when it was last counted, that count, what this process wrote since
        self._counts: dict[str, tuple[float, int, int]] = {}

    def set_bound(self, queue: str, max_pending: int | None) -> None:
        if max_pending is not None and max_pending < 1:
            raise ConfigurationError(f"max_pending must be at least 1, not {max_pending}")
        self._store.run(self._store.prepare(cql.REGISTER_QUEUE), (queue,))
        if max_pending is None:
            self._store.run(self._store.prepare(cql.DELETE_BOUND), (queue,))
        else:
            self._store.run(self._store.prepare(cql.SET_BOUND), (queue, max_pending))
        self._bounds_cache = None

    def bounds(self) -> dict[str, int]:
        rows = self._store.run(self._store.prepare(cql.SELECT_BOUNDS))
        bounds = {str(row.queue): int(row.max_pending) for row in rows}
        self._bounds_cache = (time.monotonic(), bounds)
        return bounds

    def pending_count(self, queue: str) -> int:
        """Messages of ``queue`` waiting or leased now (what its bound compares with)."""
        meta = self._store.meta(queue)
        buckets = list(range(meta.buckets))
        total = 0
        for shard in range(meta.shards):
            stored = stored_state(self._store.lock_row(queue, shard))
            params = (queue, buckets, shard, *stored.swept)
            row = self._store.run(self._store.prepare(cql.COUNT_PENDING_AFTER), params).one()
            total += int(row.count) + len(self._store.live_leases(queue, shard, stored))
        return total

    def room(self, envelopes: Sequence[Envelope]) -> dict[str, int]:
        """How many more messages each bounded queue among ``envelopes`` takes now."""
        cached = self._bounds_cache
        if cached is not None and time.monotonic() - cached[0] < _BOUNDS_FRESH_S:
            bounds = cached[1]
        else:
            bounds = self.bounds()
        wanted: dict[str, int] = {}
        for e in envelopes:
            if e.queue in bounds:
                wanted[e.queue] = wanted.get(e.queue, 0) + 1
        room = {}
        for queue, count in sorted(wanted.items()):
            now = time.monotonic()
            known = self._counts.get(queue)
            if (
                known is None
                or now - known[0] >= _COUNT_FRESH_S
                or known[2] + count > (bounds[queue] - known[1]) * SHARE
            ):
                known = (now, self.pending_count(queue), 0)
                self._counts[queue] = known
            room[queue] = bounds[queue] - known[1] - known[2]
        return room

    def wrote(self, added: dict[str, int]) -> None:
        """Add what a bounded enqueue wrote to the counts it started from."""
        for queue, count in added.items():
            known = self._counts.get(queue)
            if known is not None:
                self._counts[queue] = (known[0], known[1], known[2] + count)
