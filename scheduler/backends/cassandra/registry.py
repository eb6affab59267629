"""The Cassandra backend's worker registry: one small partition of ``workers``, a row per
live worker written with a time to live that its heartbeat renews."""

from __future__ import annotations

from tickwork.scheduler.backends.cassandra import cql
from tickwork.scheduler.backends.cassandra.batching import ttl_seconds
from tickwork.scheduler.backends.cassandra.shard_lock import CassandraShardLock
from tickwork.scheduler.backends.roles import Registry


class CassandraRegistry(Registry):
    """Records of live workers."""

    def __init__(self, store: CassandraShardLock) -> None:
        self._store = store

    def put(self, worker_id: str, record: bytes, ttl_ms: int) -> None:
        ttl_s = ttl_seconds(ttl_ms)
        self._store.run(self._store.prepare(cql.PUT_WORKER), (worker_id, record, ttl_s))

    def delete(self, worker_id: str) -> None:
        self._store.run(self._store.prepare(cql.DELETE_WORKER), (worker_id,))

    def records(self) -> dict[str, bytes]:
        rows = self._store.run(self._store.prepare(cql.SELECT_WORKERS))
        return {str(row.id): bytes(row.body) for row in rows}
