"""Every CQL statement the Cassandra backend runs, by name (tables in ``cassandra_schema``).

Table names are qualified with the keyspace when the statements are prepared.
"""

SELECT_MESSAGE_INDEX = "SELECT id FROM message_index WHERE queue = ? AND id = ?"

INSERT_QUEUE_META = (
    "INSERT INTO queue_meta (queue, shards, buckets, bucket_ms) VALUES (?, ?, ?, ?) IF NOT EXISTS"
)

INSERT_QUEUES = "INSERT INTO queues (registry, queue) VALUES (0, ?)"

INSERT_QUEUE_MESSAGES = (
    "INSERT INTO queue_messages (queue, bucket, shard, due_ms, id, priority, key, "
    "timeout_ms, attempt, body, last_error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "USING TIMESTAMP ?"
)

INSERT_MESSAGE_INDEX = (
    "INSERT INTO message_index (queue, id, bucket, shard, due_ms, leased) VALUES (?, ?, "
    "?, ?, ?, false) USING TIMESTAMP ?"
)

DELETE_MESSAGE_INDEX = "DELETE FROM message_index USING TIMESTAMP ? WHERE queue = ? AND id = ?"

DELETE_KEY_INDEX = (
    "DELETE FROM key_index USING TIMESTAMP ? WHERE queue = ? AND shard = ? AND key = ?"
)

UPDATE_SHARD_LOCKS = (
    "UPDATE shard_locks SET owner = null, expires_ms = 0 WHERE queue = ? AND shard = ? IF fence = ?"
)

SELECT_LEASES = "SELECT * FROM leases WHERE queue = ? AND shard = ?"

DELETE_LEASES = "DELETE FROM leases USING TIMESTAMP ? WHERE queue = ? AND shard = ? AND id = ?"

INSERT_POISON = (
    "INSERT INTO poison (queue, id, key, priority, timeout_ms, attempts, failed_ms, "
    "reason, error_type, error, traceback, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
    " ?)"
)

SELECT_QUEUES = "SELECT queue FROM queues WHERE registry = 0"

UPDATE_COUNTERS = "UPDATE counters SET value = value + ? WHERE queue = ? AND name = ?"

INSERT_KEY_INDEX = (
    "INSERT INTO key_index (queue, shard, key, id) VALUES (?, ?, ?, ?) USING TIMESTAMP ?"
)

DELETE_QUEUE_MESSAGES = (
    "DELETE FROM queue_messages USING TIMESTAMP ? WHERE queue = ? AND bucket = ? AND "
    "shard = ? AND due_ms = ? AND id = ?"
)

INSERT_SHARD_LOCKS = (
    "INSERT INTO shard_locks (queue, shard, owner, expires_ms, fence) VALUES (?, ?, ?, ?,"
    " ?) IF NOT EXISTS"
)

UPDATE_SHARD_LOCKS_2 = (
    "UPDATE shard_locks SET owner = ?, expires_ms = ?, fence = ? WHERE queue = ? AND "
    "shard = ? IF fence = ?"
)

SELECT_QUEUE_MESSAGES = (
    "SELECT due_ms, id, priority, key, timeout_ms, attempt, body, last_error FROM "
    "queue_messages WHERE queue = ? AND bucket IN ? AND shard = ? AND due_ms > ? AND "
    "due_ms <= ? LIMIT ?"
)

INSERT_LEASES = (
    "INSERT INTO leases (queue, shard, id, lease_token, deadline_ms, due_ms, priority, "
    "key, timeout_ms, attempt, body, last_error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,"
    " ?) USING TIMESTAMP ?"
)

INSERT_MESSAGE_INDEX_2 = (
    "INSERT INTO message_index (queue, id, bucket, shard, due_ms, leased) VALUES (?, ?, "
    "?, ?, ?, true) USING TIMESTAMP ?"
)

SELECT_QUEUE_MESSAGES_2 = (
    "SELECT due_ms FROM queue_messages WHERE queue = ? AND bucket IN ? AND shard = ? PER "
    "PARTITION LIMIT 1"
)

SELECT_LEASES_2 = "SELECT deadline_ms FROM leases WHERE queue = ? AND shard = ?"

UPDATE_LEASES = (
    "UPDATE leases USING TIMESTAMP ? SET deadline_ms = ? WHERE queue = ? AND shard = ? AND id = ?"
)

SELECT_POISON = "SELECT * FROM poison WHERE queue = ?"

DELETE_POISON = "DELETE FROM poison WHERE queue = ? AND id = ?"

DELETE_POISON_2 = "DELETE FROM poison WHERE queue = ?"

DELETE_LEASES_2 = "DELETE FROM leases USING TIMESTAMP ? WHERE queue = ? AND shard = ?"

DELETE_KEY_INDEX_2 = "DELETE FROM key_index USING TIMESTAMP ? WHERE queue = ? AND shard = ?"

SELECT_QUEUE_META = "SELECT shards, buckets, bucket_ms FROM queue_meta WHERE queue = ?"

SELECT_MESSAGE_INDEX_2 = (
    "SELECT bucket, shard, due_ms, leased FROM message_index WHERE queue = ? AND id = ?"
)

SELECT_KEY_INDEX = "SELECT id FROM key_index WHERE queue = ? AND shard = ? AND key = ?"

SELECT_LEASES_3 = "SELECT * FROM leases WHERE queue = ? AND shard = ? AND id = ?"

SELECT_KEY_INDEX_2 = "SELECT key, id FROM key_index WHERE queue = ? AND shard = ?"

SELECT_SHARD_LOCKS = (
    "SELECT owner, expires_ms, fence FROM shard_locks WHERE queue = ? AND shard = ?"
)

SELECT_QUEUE_MESSAGES_3 = (
    "SELECT due_ms FROM queue_messages WHERE queue = ? AND bucket IN ? AND shard = ?"
)

SELECT_QUEUE_MESSAGES_4 = (
    "SELECT id FROM queue_messages WHERE queue = ? AND bucket IN ? AND shard = ?"
)

SELECT_LEASES_4 = "SELECT id FROM leases WHERE queue = ? AND shard = ?"

DELETE_QUEUE_MESSAGES_2 = (
    "DELETE FROM queue_messages USING TIMESTAMP ? WHERE queue = ? AND bucket = ? AND shard = ?"
)

SELECT_QUEUE_MESSAGES_5 = (
    "SELECT key FROM queue_messages WHERE queue = ? AND bucket = ? AND shard = ? AND "
    "due_ms = ? AND id = ?"
)

SELECT_QUEUE_MESSAGES_6 = (
    "SELECT * FROM queue_messages WHERE queue = ? AND bucket = ? AND shard = ? AND due_ms"
    " = ? AND id = ?"
)

SELECT_POISON_2 = "SELECT * FROM poison WHERE queue = ? AND id = ?"

SELECT_POISON_3 = "SELECT id FROM poison WHERE queue = ?"

SELECT_COUNTERS = "SELECT name, value FROM counters WHERE queue = ?"

SELECT_LEASES_BY_IDS = "SELECT * FROM leases WHERE queue = ? AND shard = ? AND id IN ?"

INSERT_LEASE_DEADLINE = (
    "INSERT INTO lease_deadlines (queue, shard, bucket, deadline_ms, id) "
    "VALUES (?, ?, ?, ?, ?) USING TIMESTAMP ?"
)

DELETE_LEASE_DEADLINE = (
    "DELETE FROM lease_deadlines USING TIMESTAMP ? "
    "WHERE queue = ? AND shard = ? AND bucket = ? AND deadline_ms = ? AND id = ?"
)

SELECT_LEASE_DEADLINES = (
    "SELECT deadline_ms, id FROM lease_deadlines WHERE queue = ? AND shard = ? AND bucket IN ? "
    "AND deadline_ms > ? AND deadline_ms <= ?"
)

SELECT_NEXT_LEASE_DEADLINE = (
    "SELECT deadline_ms FROM lease_deadlines WHERE queue = ? AND shard = ? AND bucket IN ? "
    "AND deadline_ms > ? PER PARTITION LIMIT 1"
)

SELECT_NEXT_DUE = (
    "SELECT due_ms FROM queue_messages WHERE queue = ? AND bucket IN ? AND shard = ? "
    "AND due_ms > ? PER PARTITION LIMIT 1"
)

SELECT_DUE_IN_BUCKET = (
    "SELECT bucket, due_ms, id, priority, key, timeout_ms, attempt, body, last_error FROM "
    "queue_messages WHERE queue = ? AND bucket = ? AND shard = ? AND due_ms > ? AND "
    "due_ms <= ? LIMIT ?"
)

SELECT_KEY_INDEX_WITH_KEY = (
    "SELECT key, id FROM key_index WHERE queue = ? AND shard = ? AND key = ?"
)
