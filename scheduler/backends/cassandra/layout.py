"""Where a message lives: queue metadata, shards and time buckets, the rows a message is
written as and removed from, the key index and leases read back, and the order of write
timestamps relative to a fence."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from cassandra.cluster import (
    Cluster,
    Session,
)
from cassandra.query import BatchStatement

from tickwork.scheduler.backends.base import (
    Claim,
    Envelope,
    State,
    StoredMessage,
)
from tickwork.scheduler.backends.cassandra import cql
from tickwork.scheduler.backends.cassandra.batching import add_to_batch
from tickwork.scheduler.backends.cassandra.connection import CassandraConnection, CassandraOptions
from tickwork.scheduler.ids import stable_shard

Position = tuple[int, str]  # (ready_ms, id) in a shard's pending rows


FENCE_STEP = 1000  # microseconds between two holders' fences
# Write timestamps relative to a claim's fence, in the order the writes must win:


EXPIRE_INSERT = 1  # an expired lease's message is pending again (its lease deleted at +0)


CLAIM_DELETE = 2  # the claim removes the pending row ...


CLAIM_WRITE = 3  # ... and writes the lease


ACK_DELETE = 4  # ack / retry / release / poison drop the lease (extend also writes here)


ACK_INSERT = 5  # and write the next occurrence (or the retried message)


_CLAMP_MS = 100  # a message written this long after its due time is stored as ready now


END_ID = "\U0010ffff"  # sorts after every id: (ms, END_ID) is "all of that millisecond"


@dataclass(frozen=True)
class QueueMeta:
    shards: int
    buckets: int
    bucket_ms: int


def _root(message_id: str) -> str:
    return message_id.split(".", 1)[0]


class CassandraLayout(CassandraConnection):
    """Rows and partitions: the layout every operation reads and writes through."""

    def __init__(
        self,
        session: Session,
        cluster: Cluster,
        keyspace: str,
        options: CassandraOptions | None = None,
    ) -> None:
        """``options``: the URL's (shards, buckets and lock lifetime; defaults without)."""
        super().__init__(session, cluster, keyspace)
        options = options or CassandraOptions()
        self.defaults = QueueMeta(options.shards, options.buckets, options.bucket_seconds * 1000)
        self.metas: dict[str, QueueMeta] = {}
        self.lock_ttl_ms = options.lock_ttl_ms
        self.owner = secrets.token_hex(8)  # names this process in the shard locks it holds
        self.positions: dict[tuple[str, int], Position] = {}  # last read position seen
        self.cursor: dict[str, int] = {}  # the shard each queue's next claim starts at

    def meta(self, queue: str) -> QueueMeta:
        """The queue's shards and buckets, fixed at first use (an LWT insert, read back)."""
        found = self.metas.get(queue)
        if found is not None:
            return found
        d = self.defaults
        self.run(
            self.prepare(cql.INSERT_META),
            (queue, d.shards, d.buckets, d.bucket_ms),
        )
        row = self.run(
            self.prepare(cql.SELECT_META),
            (queue,),
        ).one()
        self.run(self.prepare(cql.REGISTER_QUEUE), (queue,))
        found = QueueMeta(row.shards, row.buckets, row.bucket_ms)
        self.metas[queue] = found
        return found

    def shard(self, queue: str, message_id: str, key: str | None) -> int:
        return stable_shard(key if key is not None else _root(message_id), self.meta(queue).shards)

    def key_shard(self, queue: str, key: str) -> int:
        return stable_shard(key, self.meta(queue).shards)

    def bucket(self, queue: str, due_ms: int) -> int:
        m = self.meta(queue)
        return (due_ms // m.bucket_ms) % m.buckets

    def count(self, queue: str, name: str, delta: int) -> None:
        if delta:
            self.run(
                self.prepare(cql.ADD_COUNTER),
                (delta, queue, name),
            )

    def ready_ms(self, due_ms: int) -> int:
        """Where a message due at ``due_ms`` is stored: its due time, or now if it is
        written late, so that it never lands behind a consumer's read position."""
        now = self.now_ms()
        return due_ms if due_ms >= now - _CLAMP_MS else now

    def insert(
        self,
        batch: BatchStatement,
        e: Envelope,
        ts: int,
        attempt: int = 0,
        error: str | None = None,
    ) -> None:
        """Add the writes that store ``e`` as pending (queue row, index, key)."""
        ready = self.ready_ms(e.due_ms)
        shard = self.shard(e.queue, e.id, e.key)
        bucket = self.bucket(e.queue, ready)
        row = (e.queue, bucket, shard, ready, e.id, e.due_ms, e.priority, e.key, e.timeout_ms)
        if e.promote_ms is None:
            add_to_batch(
                batch, self.prepare(cql.INSERT_PENDING), (*row, attempt, e.body, error, ts)
            )
        else:
            add_to_batch(
                batch,
                self.prepare(cql.INSERT_PENDING_AGING),
                (*row, attempt, e.body, error, e.promote_ms, ts),
            )
        add_to_batch(
            batch, self.prepare(cql.INSERT_INDEX), (e.queue, e.id, bucket, shard, ready, ts)
        )
        if e.key is not None:
            add_to_batch(
                batch,
                self.prepare(cql.INSERT_KEY),
                (e.queue, self.key_shard(e.queue, e.key), e.key, e.id, ts),
            )

    def remove(self, batch: BatchStatement, queue: str, message_id: str, ts: int) -> int | None:
        """Add the deletes that remove a message wherever it is; the timestamp they carry,
        or None if it is not stored. They are stamped above whatever a racing writer of the
        message can still write: an ack of its lease writes at ``fence + ACK_INSERT``, which
        may be ahead of this client's clock; a pending row keeps its write time; a claim
        taking a pending message writes its lease at the shard's fence (so a pending
        message's lease is deleted too, above that fence)."""
        where = self.run(self.prepare(cql.SELECT_INDEX), (queue, message_id)).one()
        if where is None:
            return None
        key = None
        if where.leased:
            lease = self.lease(queue, where.shard, message_id)
            if lease is not None:
                key = lease.key
                ts = max(ts, int(lease.lease_token) + ACK_INSERT + 1)
            add_to_batch(
                batch, self.prepare(cql.DELETE_LEASE), (ts, queue, where.shard, message_id)
            )
        else:
            place = (queue, where.bucket, where.shard, where.ready_ms, message_id)
            row = self.run(self.prepare(cql.SELECT_PENDING), place).one()
            if row is not None:
                key = row.key
                ts = max(ts, int(row.written) + 1)
            # a claim may be taking it now (it read the row, its lease not yet written):
            # stamped above the shard's fence, the lease's delete wins over that write
            lock = self.run(self.prepare(cql.SELECT_LOCK), (queue, where.shard)).one()
            if lock is not None and lock.fence is not None:
                ts = max(ts, int(lock.fence) + ACK_INSERT + 1)
            add_to_batch(batch, self.prepare(cql.DELETE_PENDING), (ts, *place))
            add_to_batch(
                batch, self.prepare(cql.DELETE_LEASE), (ts, queue, where.shard, message_id)
            )
        add_to_batch(batch, self.prepare(cql.DELETE_INDEX), (ts, queue, message_id))
        if key is not None and self.key_holder(queue, key) == message_id:
            add_to_batch(
                batch,
                self.prepare(cql.DELETE_KEY),
                (ts, queue, self.key_shard(queue, key), key),
            )
        return ts

    def key_holders(self, queue: str, keys: Iterable[str]) -> dict[str, str]:
        """key -> id for those of ``keys`` that are held: one ``IN`` read per shard and 100."""
        return {key: str(row.id) for key, row in self.key_rows(queue, keys).items()}

    def key_rows(self, queue: str, keys: Iterable[str]) -> dict[str, Any]:
        """key -> its index row (``id``, ``written``: the write time) for those of ``keys``
        that are held: one ``IN`` read per shard and 100."""
        by_shard: dict[int, list[str]] = {}
        for key in set(keys):
            by_shard.setdefault(self.key_shard(queue, key), []).append(key)
        args = [
            (queue, shard, names[i : i + 100])
            for shard, names in by_shard.items()
            for i in range(0, len(names), 100)
        ]
        results = self.concurrently(self.prepare(cql.SELECT_KEYS), args)
        return {str(row.key): row for result in results for row in result}

    def key_holder(self, queue: str, key: str) -> str | None:
        return self.key_holders(queue, [key]).get(key)

    def lease(self, queue: str, shard: int, message_id: str) -> Any:
        return self.run(self.prepare(cql.SELECT_LEASE), (queue, shard, message_id)).one()

    def holders(self, envelopes: Sequence[Envelope]) -> dict[tuple[str, str], tuple[str, bytes]]:
        """(queue, key) -> (id, body) of the messages holding the keys of ``envelopes``."""
        by_queue: dict[str, set[str]] = {}
        for e in envelopes:
            if e.key is not None:
                by_queue.setdefault(e.queue, set()).add(e.key)
        holders: dict[tuple[str, str], tuple[str, bytes]] = {}
        for queue, keys in by_queue.items():
            held = self.key_holders(queue, keys)
            bodies = self.bodies(queue, list(set(held.values())))
            for key, holder in held.items():
                if holder in bodies:
                    holders[(queue, key)] = (holder, bodies[holder])
        return holders

    def bodies(self, queue: str, ids: list[str]) -> dict[str, bytes]:
        """id -> body of those of ``ids`` that are stored (``stored_many``)."""
        return {i: stored.envelope.body for i, stored in self.stored_many(queue, ids).items()}

    def stored_many(self, queue: str, ids: list[str]) -> dict[str, StoredMessage]:
        """id -> message of those of ``ids`` that are stored: one index read per 100 ids,
        then concurrent reads of the pending rows and one lease read per shard. Like
        ``get_in`` without its rereads: a message a claim or an ack moved between the
        reads is left out, for the caller to read again by itself."""
        where = self.indexed(queue, ids)
        pending = [w for w in where.values() if not w.leased]
        places = [(queue, w.bucket, w.shard, w.ready_ms, str(w.id)) for w in pending]
        rows = self.concurrently(self.prepare(cql.SELECT_PENDING), places)
        now_ms = self.now_ms()
        found = {
            str(row.id): _pending_message(queue, row, now_ms) for result in rows for row in result
        }
        by_shard: dict[int, list[str]] = {}
        for w in where.values():
            if w.leased:
                by_shard.setdefault(w.shard, []).append(str(w.id))
        for shard, leased in by_shard.items():
            for message_id, lease in self.leases_by_id(queue, shard, leased).items():
                found[message_id] = _leased_message(queue, message_id, lease)
        return found

    def present(self, envelopes: Sequence[Envelope]) -> set[str]:
        by_queue: dict[str, list[str]] = {}
        for e in envelopes:
            by_queue.setdefault(e.queue, []).append(e.id)
        return {
            message_id for queue, ids in by_queue.items() for message_id in self.indexed(queue, ids)
        }

    def indexed(self, queue: str, ids: list[str]) -> dict[str, Any]:
        """The index rows of those of ``ids`` that are stored: one ``IN`` read per 100."""
        chunks = [(queue, ids[i : i + 100]) for i in range(0, len(ids), 100)]
        results = self.concurrently(self.prepare(cql.SELECT_INDEX_BY_IDS), chunks)
        return {str(row.id): row for result in results for row in result}

    def held(self, claim: Claim) -> Any:
        """The lease row if ``claim`` still holds it."""
        shard = self.shard(claim.queue, claim.id, claim.key)
        lease = self.lease(claim.queue, shard, claim.id)
        return lease if lease is not None and lease.lease_token == claim.token else None

    def held_many(self, claims: Sequence[Claim]) -> dict[tuple[str, str], Any]:
        """The current lease rows of ``claims``, by (queue, id): one query per shard."""
        groups: dict[tuple[str, int], list[str]] = {}
        for claim in claims:
            shard = self.shard(claim.queue, claim.id, claim.key)
            groups.setdefault((claim.queue, shard), []).append(claim.id)
        found = {}
        for (queue, shard), ids in groups.items():
            for message_id, row in self.leases_by_id(queue, shard, ids).items():
                found[(queue, message_id)] = row
        return found

    def leases_by_id(self, queue: str, shard: int, ids: list[str]) -> dict[str, Any]:
        rows = self.run(self.prepare(cql.SELECT_LEASES_BY_IDS), (queue, shard, ids))
        return {str(row.id): row for row in rows}

    # -- reading -----------------------------------------------------------------------

    def queues(self) -> list[str]:
        rows = self.run(self.prepare(cql.SELECT_QUEUES))
        return sorted(str(r.queue) for r in rows)

    def get(self, message_id: str, queue: str | None = None) -> StoredMessage | None:
        for name in [queue] if queue is not None else self.queues():
            found = self.get_in(name, message_id)
            if found is not None:
                return found
        return None

    # Reads here span partitions (index, then the row it names) with no isolation: a claim
    # or an ack between the two reads moves the row, and a reader may see one partition of
    # a batch written before another. A miss is therefore read again while what pointed at
    # the row keeps changing, and a few times more a few ms apart when it does not (only a
    # pointer to a missing row pays that): without it, a live schedule read by key came
    # back missing about one read in ten.
    _REREADS = 20
    _SETTLE_S = 0.005

    def reread(self, read: Callable[[], Any], follow: Callable[[Any], Any]) -> Any:
        """``follow(read())``, read again while it misses and the pointer moves or has not
        settled; None when the pointer is gone or stays put on a missing row."""
        pointer = read()
        stable = 0
        for _ in range(self._REREADS):
            if pointer is None:
                return None
            found = follow(pointer)
            if found is not None:
                return found
            again = read()
            if again == pointer:
                stable += 1
                if stable > 3:
                    return None
                time.sleep(self._SETTLE_S)
            pointer = again
        return None

    def get_in(self, queue: str, message_id: str) -> StoredMessage | None:
        return self.reread(  # type: ignore[no-any-return]
            lambda: self.run(self.prepare(cql.SELECT_INDEX), (queue, message_id)).one(),
            lambda where: self.read_row(queue, message_id, where),
        )

    def read_row(self, queue: str, message_id: str, where: Any) -> StoredMessage | None:
        if where.leased:
            lease = self.lease(queue, where.shard, message_id)
            return None if lease is None else _leased_message(queue, message_id, lease)
        row = self.run(
            self.prepare(cql.SELECT_PENDING),
            (queue, where.bucket, where.shard, where.ready_ms, message_id),
        ).one()
        return None if row is None else _pending_message(queue, row, self.now_ms())

    def get_by_key(self, queue: str, key: str) -> StoredMessage | None:
        return self.reread(  # type: ignore[no-any-return]
            lambda: self.key_holder(queue, key), lambda holder: self.get(holder, queue)
        )


def _leased_message(queue: str, message_id: str, lease: Any) -> StoredMessage:
    envelope = Envelope(
        message_id, queue, lease.key, lease.priority, lease.due_ms, lease.timeout_ms, lease.body
    )
    return StoredMessage(envelope, State.RUNNING, lease.attempt, lease.last_error)


def _pending_message(queue: str, row: Any, now_ms: int) -> StoredMessage:
    envelope = Envelope(
        str(row.id), queue, row.key, row.priority, row.due_ms, row.timeout_ms, row.body
    )
    state = State.SCHEDULED if row.ready_ms > now_ms else State.READY
    return StoredMessage(envelope, state, row.attempt, row.last_error)
