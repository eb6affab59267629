"""The Cassandra backend's schema, in one place, with why each table looks as it does.

Astyanax's layout in CQL: pending messages live in partitions keyed
``(queue, bucket, shard)``; ``bucket`` is ``(ready_ms // bucket_ms) % buckets``, a rolling
ring of time buckets, so most traffic hits one partition at a time and a bucket's
tombstones are compacted away before the ring comes round to it again; ``shard`` spreads
load and lock contention. Rows cluster by ready time (the due time, or the write time
for a message written after it was due) then id, so "what is due" is one range read per
bucket, starting at the shard's read position (below it everything was consumed, so the
read skips the tombstones of consumed messages).

Deviations from Astyanax, on purpose:
- The shard lock is a row of its own table, written only with lightweight transactions
  (LWT rows are never mixed with plain writes); it carries a **fence**, a timestamp that
  grows with every acquisition, and the shard's read, sweep and lease-expiry positions,
  which the holder stores when it releases the lock (only if the lock is still its own).
  Every write a claim makes, and every ack of that claim, uses ``USING TIMESTAMP``
  derived from the fence, so a consumer whose lock expired cannot overwrite a newer
  holder's leases (last write wins in Cassandra).
- In-flight messages (Astyanax's timeout entries) live in ``leases``, partitioned by
  ``(queue, shard)`` and keyed by message id (point reads only: a message has at most one
  lease, whichever claim wrote it last), and their deadlines in ``lease_deadlines``, in
  the time bucket of the deadline like Astyanax's timeout entries, so finding expired
  leases is a range read from the shard's expiry position that skips older tombstones.
- Within the due messages read, higher priority goes first (a claim reads up to 4x its
  batch of due rows and takes the best); priority never makes a message run early. The
  oldest due row of a shard, once due for 10 s, takes the last place of a claim even if
  higher priorities wait: the read position cannot pass a row left behind, so without
  this a long run of higher-priority messages would leave ever more tombstones to re-read.
  A row of a task with ``max_wait`` carries the time it is promoted (``promote_ms``):
  from then on it goes ahead of every priority among the rows read (priority aging). A
  row written again by a retry or a lease that ran out carries none: on Cassandra the
  promotion applies to a message's first wait only.

Table options: pending and lease tables use leveled compaction (reads touch few SSTables
in a delete-heavy workload) and ``gc_grace_seconds = 3600``: tombstones of consumed
messages go away after an hour instead of ten days, long enough for hinted handoff and
repair on small clusters (Astyanax used 5 s, which lets deleted messages resurrect after
a replica misses a delete; an hour is the compromise). Run repair more often than that.
"""

from __future__ import annotations

from cassandra.cluster import NoHostAvailable, Session

from tickwork.scheduler.errors import BackendError, BackendUnavailable

QUEUE_TABLE_OPTIONS = (
    "WITH compaction = {'class': 'LeveledCompactionStrategy'} AND gc_grace_seconds = 3600"
)

TABLES = {
    "queue_meta": """
        CREATE TABLE IF NOT EXISTS {ks}.queue_meta (
            queue text PRIMARY KEY, shards int, buckets int, bucket_ms bigint)""",
    "queue_messages": """
        CREATE TABLE IF NOT EXISTS {ks}.queue_messages (
            queue text, bucket int, shard int, ready_ms bigint, id text, due_ms bigint,
            priority int, key text, timeout_ms int, attempt int, body blob, last_error text,
            promote_ms bigint, PRIMARY KEY ((queue, bucket, shard), ready_ms, id)) """
    + QUEUE_TABLE_OPTIONS,
    "shard_locks": """
        CREATE TABLE IF NOT EXISTS {ks}.shard_locks (
            queue text, shard int, owner text, expires_ms bigint, fence bigint,
            read_ms bigint, read_id text, swept_ms bigint, swept_id text, expired_ms bigint,
            lease_ms bigint,
            PRIMARY KEY ((queue, shard)))""",
    "leases": """
        CREATE TABLE IF NOT EXISTS {ks}.leases (
            queue text, shard int, id text, lease_token text, deadline_ms bigint, due_ms bigint,
            priority int, key text, timeout_ms int, attempt int, body blob, last_error text,
            PRIMARY KEY ((queue, shard), id)) """
    + QUEUE_TABLE_OPTIONS,
    "lease_deadlines": """
        CREATE TABLE IF NOT EXISTS {ks}.lease_deadlines (
            queue text, shard int, bucket int, deadline_ms bigint, id text,
            PRIMARY KEY ((queue, shard, bucket), deadline_ms, id)) """
    + QUEUE_TABLE_OPTIONS,
    "message_index": """
        CREATE TABLE IF NOT EXISTS {ks}.message_index (
            queue text, id text, bucket int, shard int, ready_ms bigint, leased boolean,
            PRIMARY KEY ((queue, id))) """
    + QUEUE_TABLE_OPTIONS,
    "key_index": """
        CREATE TABLE IF NOT EXISTS {ks}.key_index (
            queue text, shard int, key text, id text,
            PRIMARY KEY ((queue, shard), key)) """
    + QUEUE_TABLE_OPTIONS,
    "poison": """
        CREATE TABLE IF NOT EXISTS {ks}.poison (
            queue text, id text, key text, priority int, timeout_ms int, attempts int,
            failed_ms bigint, reason text, error_type text, error text, traceback text,
            body blob, PRIMARY KEY ((queue), id))""",
    "counters": """
        CREATE TABLE IF NOT EXISTS {ks}.counters (
            queue text, name text, value counter, PRIMARY KEY ((queue), name))""",
    "queues": """
        CREATE TABLE IF NOT EXISTS {ks}.queues (
            registry int, queue text, PRIMARY KEY ((registry), queue))""",
    # the bound of each bounded queue (one small partition, read before a bounded enqueue)
    "queue_bounds": """
        CREATE TABLE IF NOT EXISTS {ks}.queue_bounds (
            registry int, queue text, max_pending int, PRIMARY KEY ((registry), queue))""",
    # written only with lightweight transactions (pause: IF NOT EXISTS, resume: IF EXISTS)
    "paused_queues": """
        CREATE TABLE IF NOT EXISTS {ks}.paused_queues (
            registry int, queue text, since_ms bigint, PRIMARY KEY ((registry), queue))""",
    # one small partition; each row carries a TTL that ends with its request
    "abort_requests": """
        CREATE TABLE IF NOT EXISTS {ks}.abort_requests (
            registry int, id text, queue text, continue_chain boolean, requested_ms bigint,
            expires_ms bigint, PRIMARY KEY ((registry), id))""",
    # one row per concurrency limit, written only with lightweight transactions: the
    # holders (message id -> lease end, ms) change together under a version check
    "limit_slots": """
        CREATE TABLE IF NOT EXISTS {ks}.limit_slots (
            name text PRIMARY KEY, holders map<text, bigint>, version bigint)""",
    # a limit's waiting line, first come first served; taken off with DELETE ... IF EXISTS
    "limit_waiters": """
        CREATE TABLE IF NOT EXISTS {ks}.limit_waiters (
            name text, seq timeuuid, queue text, key text, id text,
            PRIMARY KEY ((name), seq))""",
    # one row per rate limit, written only with lightweight transactions: the times of
    # its last `count` starts, in order, under a version check
    "rate_limits": """
        CREATE TABLE IF NOT EXISTS {ks}.rate_limits (
            name text PRIMARY KEY, recent list<bigint>, version bigint)""",
    # each start a rate limit granted or reserved, by member (expires a period after it)
    "rate_starts": """
        CREATE TABLE IF NOT EXISTS {ks}.rate_starts (
            name text, member text, at_ms bigint, PRIMARY KEY ((name), member))""",
    # what a run returned (or why it failed), by message id, written with a TTL
    "results": """
        CREATE TABLE IF NOT EXISTS {ks}.results (id text PRIMARY KEY, body blob)""",
    # a batch per partition: its description and counts (static, the counts written only
    # with lightweight transactions) and a row per settled member, written with the count
    # in one conditional batch; every cell with the batch's TTL
    "batches": """
        CREATE TABLE IF NOT EXISTS {ks}.batches (
            batch_id text, member int, description blob static, settled int static,
            failed int static, failed_member boolean, outcome blob,
            PRIMARY KEY ((batch_id), member))""",
    # the occurrence ledger: a partition per subject (a schedule), newest record first,
    # every row with a TTL (its maximum age); reads take the newest `keep`
    "ledger": """
        CREATE TABLE IF NOT EXISTS {ks}.ledger (
            queue text, subject text, written bigint, seq text, record blob,
            PRIMARY KEY ((queue, subject), written, seq))
        WITH CLUSTERING ORDER BY (written DESC, seq DESC)""",
    # who is writing a free key now (``key_claims.py``): a row per key, with a TTL
    "key_claims": """
        CREATE TABLE IF NOT EXISTS {ks}.key_claims (
            queue text, key text, owner text, PRIMARY KEY ((queue, key)))""",
    # live workers: one small partition, each row with a TTL its heartbeat renews
    "workers": """
        CREATE TABLE IF NOT EXISTS {ks}.workers (
            registry int, id text, body blob, PRIMARY KEY ((registry), id))""",
}

KEYSPACE = """
    CREATE KEYSPACE IF NOT EXISTS {ks}
    WITH replication = {'class': 'SimpleStrategy', 'replication_factor': {rf}}"""


#: columns added to a table after it first shipped: ``create_schema`` adds each to a table
#: created before it (``(table, column)``: its CQL type)
ADDED_COLUMNS = {
    ("queue_messages", "promote_ms"): "bigint",  # priority aging (``claiming.py``)
}


def create_schema(session: Session, keyspace: str, replication_factor: int = 1) -> None:
    """Create the keyspace and tables, and add the columns a table made by an earlier
    version lacks (``tickwork cassandra create-schema``; idempotent)."""
    try:
        session.execute(KEYSPACE.replace("{ks}", keyspace).replace("{rf}", str(replication_factor)))
        for ddl in TABLES.values():
            session.execute(ddl.replace("{ks}", keyspace))
        for (table, column), kind in ADDED_COLUMNS.items():
            present = session.execute(
                "SELECT column_name FROM system_schema.columns WHERE keyspace_name = %s "
                "AND table_name = %s AND column_name = %s",
                (keyspace, table, column),
            ).one()
            if present is None:
                session.execute(f"ALTER TABLE {keyspace}.{table} ADD {column} {kind}")
    except NoHostAvailable as err:
        raise BackendUnavailable(f"Cassandra is unreachable: {err}") from err
    except Exception as err:
        raise BackendError(f"cannot create the Cassandra schema: {err}") from err
