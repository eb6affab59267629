"""Cassandra storage: Netflix Astyanax's sharded message queue in CQL (schema and the
reasons for it in ``schema.py``).

URL (options: ``CassandraOptions`` in ``connection.py``)::

    cassandra://host1,host2:9042/keyspace?consistency=QUORUM&replication_factor=3
        &shards=1&buckets=16&bucket_seconds=60&lock_ttl_ms=10000
        &username=u&password=p&ssl=true&create_schema=true

The consume cycle, per shard: take the shard lock with a lightweight transaction (which
also hands out a new fence and the shard's read positions) -> make expired leases due
again -> read up to 4x the batch of due messages after the read position -> logged
batches that delete them from the queue and write their leases, every write ``USING
TIMESTAMP`` the fence -> release the lock, storing the advanced read positions. Ack reads
its lease and, if the token (the fence) still matches, deletes it and writes the next
occurrence in one batch, with timestamps just above the fence, so a stale consumer can
neither overwrite a newer lease nor resurrect an occurrence that already ran. A claim
runs a keyed row only if the key index names it, and deletes it if the key went to another
message after it was written; a row whose key (or index) row is older than itself is left
for a later claim: a logged batch is atomic but not isolated, and its other rows may not
have landed yet.

Tombstones: a consumed message leaves a tombstone until compaction after
``gc_grace_seconds``. Reads never start at the beginning of a partition: the shard's
**read position** ``(ready_ms, id)`` moves past every consumed row (never past one that was
left, nor closer than ``_READ_MARGIN_MS`` to now, where rows still arrive), so a claim
reads only live rows plus the few consumed in the last moment. Rows are clustered by their
**ready time**, the due time or, for a message written more than ``_CLAMP_MS`` after it
was due, the time it was written, so no row lands behind the read position; a **sweep
position** trails ``_SWEEP_LAG_MS`` behind and picks up any row that still did (a write
delayed by seconds). Lease deadlines get the same treatment (``expired_ms``).

Times: due times compare against the coordinator's clock (the offset is measured at
connect). Cassandra orders writes by timestamp, so producer and worker clocks must be in
sync (NTP), as for any Cassandra application.

Modules: the shared store is ``connection.py`` (URL options, session, plumbing) ->
``layout.py`` (partitions, rows, key index, leases, write-timestamp order) ->
``shard_lock.py`` (lock, fences, read positions); each role is a class over that store:
``messages.py`` (enqueue, read, cancel), ``leases.py`` (ack, retry, release, extend,
poison; claims and expiry in ``claiming.py``), ``admin.py`` (poison queue, stats, pause,
purge, aborts; bounds in ``bounds.py``), ``limits.py``, ``rates.py``, ``results.py``,
``registry.py``, ``batches.py``, ``ledger.py``; ``backend.py`` composes them.
``batching.py`` bounds logged batches, ``schema.py`` holds the tables, ``cql.py`` every
statement.
"""

from tickwork.scheduler.backends.cassandra.backend import CassandraBackend
from tickwork.scheduler.backends.cassandra.batching import MAX_BODY_BYTES
from tickwork.scheduler.backends.cassandra.connection import CassandraOptions
from tickwork.scheduler.backends.cassandra.schema import create_schema

__all__ = ["MAX_BODY_BYTES", "CassandraBackend", "CassandraOptions", "create_schema"]
