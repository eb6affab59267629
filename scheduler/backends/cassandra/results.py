"""The Cassandra backend's result records: one row per message id in ``results``, written
with a time to live, so Cassandra expires it; a batch is written as concurrent single-row
writes (rows of different partitions: a logged batch would only add work)."""

from __future__ import annotations

from collections.abc import Sequence

from tickwork.scheduler.backends.cassandra import cql
from tickwork.scheduler.backends.cassandra.batching import ttl_seconds
from tickwork.scheduler.backends.cassandra.shard_lock import CassandraShardLock
from tickwork.scheduler.backends.roles import Results


class CassandraResults(Results):
    """Result records of messages."""

    def __init__(self, store: CassandraShardLock) -> None:
        self._store = store

    def put(self, results: Sequence[tuple[str, bytes, int]]) -> None:
        params = [(i, body, ttl_seconds(ttl)) for i, body, ttl in results]
        self._store.concurrently(self._store.prepare(cql.INSERT_RESULT), params)

    def get(self, message_ids: Sequence[str]) -> dict[str, bytes]:
        if not message_ids:
            return {}
        rows = self._store.run(self._store.prepare(cql.SELECT_RESULTS), (list(message_ids),))
        return {str(row.id): bytes(row.body) for row in rows}
