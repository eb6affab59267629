"""Every CQL statement the Cassandra backend runs, by name (tables in ``schema.py``).

Table names are qualified with the keyspace when the statements are prepared. Positions in
a shard's pending rows are ``(ready_ms, id)`` pairs, compared as tuples.
"""

# -- queue metadata --------------------------------------------------------------------------

INSERT_META = (
    "INSERT INTO queue_meta (queue, shards, buckets, bucket_ms) VALUES (?, ?, ?, ?) IF NOT EXISTS"
)
SELECT_META = "SELECT shards, buckets, bucket_ms FROM queue_meta WHERE queue = ?"
REGISTER_QUEUE = "INSERT INTO queues (registry, queue) VALUES (0, ?)"
SELECT_QUEUES = "SELECT queue FROM queues WHERE registry = 0"
# paused queues: only ever written with lightweight transactions
PAUSE_QUEUE = "INSERT INTO paused_queues (registry, queue, since_ms) VALUES (0, ?, ?) IF NOT EXISTS"
RESUME_QUEUE = "DELETE FROM paused_queues WHERE registry = 0 AND queue = ? IF EXISTS"
SELECT_PAUSED = "SELECT queue FROM paused_queues WHERE registry = 0"
# abort requests: one partition, rows expire by TTL
INSERT_ABORT = (
    "INSERT INTO abort_requests (registry, id, queue, continue_chain, requested_ms, expires_ms) "
    "VALUES (0, ?, ?, ?, ?, ?) USING TTL ?"
)
SELECT_ABORTS = (
    "SELECT id, queue, continue_chain, requested_ms, expires_ms FROM abort_requests "
    "WHERE registry = 0"
)
DELETE_ABORT = "DELETE FROM abort_requests WHERE registry = 0 AND id = ?"
ADD_COUNTER = "UPDATE counters SET value = value + ? WHERE queue = ? AND name = ?"
SELECT_COUNTERS = "SELECT name, value FROM counters WHERE queue = ?"

# -- pending messages ------------------------------------------------------------------------

INSERT_PENDING = (
    "INSERT INTO queue_messages (queue, bucket, shard, ready_ms, id, due_ms, priority, key, "
    "timeout_ms, attempt, body, last_error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "USING TIMESTAMP ?"
)
#: a pending row of a task with ``max_wait``: with the time it is promoted (a separate
#: statement, so the others write no null column: a null is a tombstone in Cassandra)
INSERT_PENDING_AGING = (
    "INSERT INTO queue_messages (queue, bucket, shard, ready_ms, id, due_ms, priority, key, "
    "timeout_ms, attempt, body, last_error, promote_ms) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?"
)
DELETE_PENDING = (
    "DELETE FROM queue_messages USING TIMESTAMP ? WHERE queue = ? AND bucket = ? AND "
    "shard = ? AND ready_ms = ? AND id = ?"
)
DELETE_BUCKET = (
    "DELETE FROM queue_messages USING TIMESTAMP ? WHERE queue = ? AND bucket = ? AND shard = ?"
)
SELECT_PENDING = (
    "SELECT bucket, ready_ms, id, due_ms, priority, key, timeout_ms, attempt, body, "
    "last_error, WRITETIME(body) AS written FROM queue_messages WHERE queue = ? AND "
    "bucket = ? AND shard = ? AND ready_ms = ? AND id = ?"
)
# One bucket's rows between two positions, oldest first: the claim and sweep reads.
SELECT_PENDING_BETWEEN = (
    "SELECT bucket, ready_ms, id, due_ms, priority, key, timeout_ms, attempt, body, "
    "last_error, promote_ms, WRITETIME(body) AS written FROM queue_messages WHERE queue = ? AND "
    "bucket = ? AND shard = ? AND (ready_ms, id) > (?, ?) AND (ready_ms, id) <= (?, ?) LIMIT ?"
)
# Every pending row after a position (stats, purge): below it everything was consumed.
COUNT_PENDING_AFTER = (
    "SELECT COUNT(*) FROM queue_messages WHERE queue = ? AND bucket IN ? AND shard = ? "
    "AND (ready_ms, id) > (?, ?)"
)
SET_BOUND = "INSERT INTO queue_bounds (registry, queue, max_pending) VALUES (0, ?, ?)"
DELETE_BOUND = "DELETE FROM queue_bounds WHERE registry = 0 AND queue = ?"
SELECT_BOUNDS = "SELECT queue, max_pending FROM queue_bounds WHERE registry = 0"
SELECT_PENDING_AFTER = (
    "SELECT ready_ms, id, due_ms FROM queue_messages WHERE queue = ? AND bucket IN ? AND shard = ? "
    "AND (ready_ms, id) > (?, ?)"
)
SELECT_FIRST_PENDING_AFTER = (
    "SELECT ready_ms FROM queue_messages WHERE queue = ? AND bucket IN ? AND shard = ? "
    "AND (ready_ms, id) > (?, ?) PER PARTITION LIMIT 1"
)

# -- where a message is, by id ---------------------------------------------------------------

INSERT_INDEX = (
    "INSERT INTO message_index (queue, id, bucket, shard, ready_ms, leased) VALUES (?, ?, "
    "?, ?, ?, false) USING TIMESTAMP ?"
)
INSERT_INDEX_LEASED = (
    "INSERT INTO message_index (queue, id, bucket, shard, ready_ms, leased) VALUES (?, ?, "
    "?, ?, ?, true) USING TIMESTAMP ?"
)
DELETE_INDEX = "DELETE FROM message_index USING TIMESTAMP ? WHERE queue = ? AND id = ?"
SELECT_INDEX = (
    "SELECT bucket, shard, ready_ms, leased FROM message_index WHERE queue = ? AND id = ?"
)

SELECT_INDEX_BY_IDS = (
    "SELECT id, bucket, shard, ready_ms, leased, WRITETIME(ready_ms) AS written "
    "FROM message_index WHERE queue = ? AND id IN ?"
)

# -- keys --------------------------------------------------------------------------------------

INSERT_KEY = "INSERT INTO key_index (queue, shard, key, id) VALUES (?, ?, ?, ?) USING TIMESTAMP ?"
DELETE_KEY = "DELETE FROM key_index USING TIMESTAMP ? WHERE queue = ? AND shard = ? AND key = ?"
DELETE_SHARD_KEYS = "DELETE FROM key_index USING TIMESTAMP ? WHERE queue = ? AND shard = ?"
SELECT_KEYS = (
    "SELECT key, id, WRITETIME(id) AS written FROM key_index WHERE queue = ? AND shard = ? "
    "AND key IN ?"
)
SELECT_SHARD_KEYS = "SELECT key, id FROM key_index WHERE queue = ? AND shard = ?"

# -- the shard lock and the shard's read positions (lightweight transactions only) -----------

SELECT_LOCK = (
    "SELECT owner, expires_ms, fence, read_ms, read_id, swept_ms, swept_id, expired_ms, "
    "lease_ms "
    "FROM shard_locks WHERE queue = ? AND shard = ?"
)
INSERT_LOCK = (
    "INSERT INTO shard_locks (queue, shard, owner, expires_ms, fence, expired_ms) "
    "VALUES (?, ?, ?, ?, ?, ?) IF NOT EXISTS"
)
TAKE_LOCK = (
    "UPDATE shard_locks SET owner = ?, expires_ms = ?, fence = ? WHERE queue = ? AND "
    "shard = ? IF fence = ?"
)
RELEASE_LOCK = (
    "UPDATE shard_locks SET owner = null, expires_ms = 0, read_ms = ?, read_id = ?, "
    "swept_ms = ?, swept_id = ?, expired_ms = ?, lease_ms = ? WHERE queue = ? AND shard = ? "
    "IF fence = ?"
)

# -- leases (in-flight messages) and their deadlines -----------------------------------------

INSERT_LEASE = (
    "INSERT INTO leases (queue, shard, id, lease_token, deadline_ms, due_ms, priority, "
    "key, timeout_ms, attempt, body, last_error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
    " ?) USING TIMESTAMP ?"
)
EXTEND_LEASE = (
    "UPDATE leases USING TIMESTAMP ? SET deadline_ms = ? WHERE queue = ? AND shard = ? AND id = ?"
)
DELETE_LEASE = "DELETE FROM leases USING TIMESTAMP ? WHERE queue = ? AND shard = ? AND id = ?"
DELETE_SHARD_LEASES = "DELETE FROM leases USING TIMESTAMP ? WHERE queue = ? AND shard = ?"
SELECT_LEASE = "SELECT * FROM leases WHERE queue = ? AND shard = ? AND id = ?"
SELECT_LEASES_BY_IDS = "SELECT * FROM leases WHERE queue = ? AND shard = ? AND id IN ?"

INSERT_DEADLINE = (
    "INSERT INTO lease_deadlines (queue, shard, bucket, deadline_ms, id) "
    "VALUES (?, ?, ?, ?, ?) USING TIMESTAMP ?"
)
DELETE_DEADLINE = (
    "DELETE FROM lease_deadlines USING TIMESTAMP ? "
    "WHERE queue = ? AND shard = ? AND bucket = ? AND deadline_ms = ? AND id = ?"
)
DELETE_DEADLINE_BUCKET = (
    "DELETE FROM lease_deadlines USING TIMESTAMP ? WHERE queue = ? AND shard = ? AND bucket = ?"
)
SELECT_DEADLINES_IN_BUCKET = (
    "SELECT deadline_ms, id FROM lease_deadlines WHERE queue = ? AND shard = ? AND bucket = ? "
    "AND deadline_ms > ? AND deadline_ms <= ?"
)

# -- the poison queue ------------------------------------------------------------------------

INSERT_POISON = (
    "INSERT INTO poison (queue, id, key, priority, timeout_ms, attempts, failed_ms, "
    "reason, error_type, error, traceback, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
SELECT_POISON = "SELECT * FROM poison WHERE queue = ?"
SELECT_POISON_ONE = "SELECT * FROM poison WHERE queue = ? AND id = ?"
SELECT_POISON_IDS = "SELECT id FROM poison WHERE queue = ?"
DELETE_POISON = "DELETE FROM poison WHERE queue = ? AND id = ?"
DELETE_QUEUE_POISON = "DELETE FROM poison WHERE queue = ?"

# -- concurrency limits (limit_slots: LWT only) ---------------------------------------------

SELECT_LIMIT = "SELECT holders, version FROM limit_slots WHERE name = ?"
INSERT_LIMIT = "INSERT INTO limit_slots (name, holders, version) VALUES (?, ?, 1) IF NOT EXISTS"
UPDATE_LIMIT = "UPDATE limit_slots SET holders = ?, version = ? WHERE name = ? IF version = ?"
INSERT_WAITER = (
    "INSERT INTO limit_waiters (name, seq, queue, key, id) VALUES (?, now(), ?, ?, ?) IF NOT EXISTS"
)
SELECT_WAITERS = "SELECT seq, queue, key, id FROM limit_waiters WHERE name = ?"
SELECT_FIRST_WAITERS = "SELECT seq, queue, key, id FROM limit_waiters WHERE name = ? LIMIT 4"
DELETE_WAITER = "DELETE FROM limit_waiters WHERE name = ? AND seq = ? IF EXISTS"
COUNT_WAITERS = "SELECT COUNT(*) AS n FROM limit_waiters WHERE name = ?"

# -- rate limits (rate_limits: LWT only; rate_starts: one row per start, with a TTL) --------

SELECT_RATE = "SELECT recent, version FROM rate_limits WHERE name = ?"
INSERT_RATE = "INSERT INTO rate_limits (name, recent, version) VALUES (?, ?, 1) IF NOT EXISTS"
UPDATE_RATE = "UPDATE rate_limits SET recent = ?, version = ? WHERE name = ? IF version = ?"
SELECT_RATE_MEMBERS = "SELECT member, at_ms FROM rate_starts WHERE name = ? AND member IN ?"
SELECT_RATE_STARTS = "SELECT at_ms FROM rate_starts WHERE name = ?"
INSERT_RATE_START = "INSERT INTO rate_starts (name, member, at_ms) VALUES (?, ?, ?) USING TTL ?"

# -- result records (one row per message id, with a TTL) ---------------------------------------

INSERT_RESULT = "INSERT INTO results (id, body) VALUES (?, ?) USING TTL ?"
SELECT_RESULTS = "SELECT id, body FROM results WHERE id IN ?"

# -- batches (one partition per batch: static description and counts, a row per member) -------
# the counts are only ever written with lightweight transactions

OPEN_BATCH = (
    "INSERT INTO batches (batch_id, description, settled, failed) VALUES (?, ?, 0, 0) "
    "IF NOT EXISTS USING TTL ?"
)
SELECT_BATCH_COUNTS = "SELECT settled, failed FROM batches WHERE batch_id = ? LIMIT 1"
SELECT_BATCH_SETTLED = "SELECT member FROM batches WHERE batch_id = ? AND member IN ?"
SETTLE_MEMBER = (
    "UPDATE batches USING TTL ? SET outcome = ?, failed_member = ? "
    "WHERE batch_id = ? AND member = ? IF outcome = null"
)
COUNT_MEMBERS = (
    "UPDATE batches USING TTL ? SET settled = ?, failed = ? WHERE batch_id = ? "
    "IF settled = ? AND failed = ?"
)
COUNT_FIRST_MEMBERS = (  # a batch whose description expired (or was never opened)
    "UPDATE batches USING TTL ? SET settled = ?, failed = ? WHERE batch_id = ? IF settled = null"
)
SELECT_BATCH = (
    "SELECT description, settled, failed, member, outcome FROM batches WHERE batch_id = ?"
)

# -- the occurrence ledger (a partition per subject, newest first, rows with a TTL) -----------

INSERT_LEDGER = (
    "INSERT INTO ledger (queue, subject, written, seq, record) VALUES (?, ?, ?, ?, ?) USING TTL ?"
)
SELECT_LEDGER = "SELECT record FROM ledger WHERE queue = ? AND subject = ? LIMIT ?"

# -- the worker registry (one partition, rows with a TTL) ---------------------------------------

PUT_WORKER = "INSERT INTO workers (registry, id, body) VALUES (0, ?, ?) USING TTL ?"
DELETE_WORKER = "DELETE FROM workers WHERE registry = 0 AND id = ?"
SELECT_WORKERS = "SELECT id, body FROM workers WHERE registry = 0"
