"""The Cassandra backend's occurrence ledger: a partition per subject (``ledger``), newest
record first (clustered by write time in microseconds, strictly increasing per process,
then by a sequence that keeps an entry's records in order), every row written with its
maximum age as TTL. A run's records join the logged
batch of its ack, retry or poison (the same atomic step). Reads take the newest ``keep``;
older rows are not deleted one by one but expire with their TTL, so a partition holds at
most what a schedule wrote in one maximum age (a range delete on every append would leave
a tombstone per run in the partition that reads walk)."""

from __future__ import annotations

import secrets
from collections.abc import Sequence

from cassandra.query import BatchStatement, PreparedStatement

from tickwork.scheduler.backends.cassandra import cql
from tickwork.scheduler.backends.cassandra.batching import add_to_batch, ttl_seconds
from tickwork.scheduler.backends.cassandra.shard_lock import CassandraShardLock
from tickwork.scheduler.backends.records import LedgerEntry
from tickwork.scheduler.backends.roles import Ledger


def add_ledger(
    batch: BatchStatement, statement: PreparedStatement, entry: LedgerEntry, written_us: int
) -> None:
    """Add ``entry``'s records to ``batch`` (``statement``: ``cql.INSERT_LEDGER``;
    ``written_us``: ``_stamp_us()``, which orders the subject's records)."""
    ttl_s = ttl_seconds(entry.ttl_ms)
    tag = secrets.token_hex(4)  # two writers in one millisecond never share a row
    for index, record in enumerate(entry.records):
        seq = f"{index:04d}{tag}"  # descending order puts an entry's last record first
        add_to_batch(batch, statement, (entry.queue, entry.subject, written_us, seq, record, ttl_s))


class CassandraLedger(Ledger):
    """The ledger operations of the contract."""

    def __init__(self, store: CassandraShardLock) -> None:
        self._store = store

    def append(self, entries: Sequence[LedgerEntry]) -> None:
        entries = [entry for entry in entries if entry.records]
        if not entries:
            return
        batch = self._store.batch()
        for entry in entries:
            add_ledger(batch, self._store.prepare(cql.INSERT_LEDGER), entry, self._store.stamp_us())
        self._store.run(batch)

    def read(self, queue: str, subject: str, limit: int = 100) -> list[bytes]:
        return self.read_many([(queue, subject)], limit)[0]

    def read_many(self, subjects: Sequence[tuple[str, str]], limit: int = 100) -> list[list[bytes]]:
        """One read per subject's partition, all at once."""
        if limit <= 0:
            return [[] for _ in subjects]
        args = [(queue, subject, limit) for queue, subject in subjects]
        results = self._store.concurrently(self._store.prepare(cql.SELECT_LEDGER), args)
        return [[bytes(row.record) for row in rows] for rows in results]
