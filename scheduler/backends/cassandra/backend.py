"""The public Cassandra backend: enqueue, read and cancel by id or key (claiming, settling
and administration come from the layers it extends; see the package docstring)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from scheduler.backends.base import (
    Backend,
    Envelope,
    OnConflict,
    Outcome,
    StoredMessage,
)
from scheduler.backends.cassandra import cql
from scheduler.backends.cassandra.batches import CassandraBatches
from scheduler.backends.cassandra.batching import MAX_BODY_BYTES, Batches, add_to_batch
from scheduler.backends.cassandra.bounds import CassandraBounds
from scheduler.backends.cassandra.connection import connect
from scheduler.backends.cassandra.ledger import CassandraLedger
from scheduler.backends.cassandra.rates import CassandraRates
from scheduler.backends.cassandra.registry import CassandraRegistry
from scheduler.backends.cassandra.results import CassandraResults
from scheduler.backends.outcomes import WRITES, decide, refuse_taken_keys
from scheduler.clock import Clock
from scheduler.errors import (
    InvalidMessage,
)

_KEY_SETTLE_READS = 5  # reads of a key that names a missing message before it is stale


class CassandraBackend(
    CassandraBounds,
    CassandraRates,
    CassandraResults,
    CassandraRegistry,
    CassandraBatches,
    CassandraLedger,
    Backend,
):
    """Storage on Cassandra. Thread-safe (the driver's session is)."""

    @classmethod
    def from_url(cls, url: str, clock: Clock | None = None) -> CassandraBackend:
        del clock  # due times follow the coordinator's clock
        session, cluster, keyspace, options = connect(url)
        return cls(
            session,
            cluster,
            keyspace,
            shards=options.shards,
            buckets=options.buckets,
            bucket_ms=options.bucket_seconds * 1000,
            lock_ttl_ms=options.lock_ttl_ms,
        )

    def enqueue(
        self,
        envelopes: Sequence[Envelope],
        on_conflict: OnConflict = OnConflict.ERROR,
        bounded: bool = False,
    ) -> list[Outcome]:
        """Logged batches of several messages each (a batch is atomic, so a message's row
        and its index entries are written together). A bound is approximate (``bounds.py``)."""
        if not envelopes:
            return []
        too_large = [e.id for e in envelopes if len(e.body) > MAX_BODY_BYTES]
        if too_large:
            raise InvalidMessage(
                f"message {too_large[0]!r} is larger than the Cassandra backend stores "
                f"({MAX_BODY_BYTES} bytes: a logged batch fails above 50 KiB)"
                + (f"; {len(too_large) - 1} more" if len(too_large) > 1 else "")
            )
        fair = [e.id for e in envelopes if e.fair is not None]
        if fair:
            raise InvalidMessage(
                f"message {fair[0]!r} has a fair-share key (its task's fair_key): fair share "
                "is not offered on Cassandra, whose claims read due messages in time order "
                "(use Redis or SQLite for it, or a task without fair_key)"
            )
        holders = self._holders(envelopes)
        present = self._present(envelopes)
        room = self._room(envelopes) if bounded else {}
        refuse_taken_keys(envelopes, holders, on_conflict)
        outcomes: list[Outcome] = []
        batches = Batches()
        counts: dict[str, int] = {}
        added: dict[str, int] = {}  # new messages of bounded queues
        for e in envelopes:
            batch = batches.current
            ts = self._now_us()
            holder = holders.get((e.queue, e.key)) if e.key is not None else None
            outcome = decide(e, holder, e.id in present, on_conflict, room)
            outcomes.append(outcome)
            if outcome not in WRITES:
                continue
            if outcome is Outcome.ENQUEUED:
                added[e.queue] = added.get(e.queue, 0) + 1
            replaced = []  # what this message replaces: its key's holder, its own id
            if e.key is not None and holder is not None:
                replaced.append(holder[0])
            if e.id in present and (holder is None or holder[0] != e.id):
                replaced.append(e.id)
            for old_id in replaced:  # the insert is written after the deletes
                ts = max(ts, self._remove(batch, e.queue, old_id, ts) or ts)
            if e.key is not None:
                holders[(e.queue, e.key)] = (e.id, e.body)
            present.add(e.id)
            self._insert(batch, e, ts + 1)
            counts[e.queue] = counts.get(e.queue, 0) + 1
            batches.added(len(e.body))
        self._execute_many(batches.all())
        self._wrote(added)
        for queue, count in counts.items():
            self._count(queue, "enqueued", count)
        return outcomes

    def delete(self, message_id: str, queue: str | None = None) -> bool:
        for name in [queue] if queue is not None else self.queues():
            batch = self._batch()
            if self._remove(batch, name, message_id, self._now_us()) is not None:
                self._run(batch)
                return True
        return False

    def delete_by_key(self, queue: str, key: str) -> bool:
        holder = self._key_holder(queue, key)
        for _ in range(_KEY_SETTLE_READS):  # after them a key naming no message is stale
            if holder is None:
                return False
            batch = self._batch()
            ts = self._now_us()
            stamped = self._remove(batch, queue, holder, ts)
            found = stamped is not None
            if stamped is not None:
                ts = stamped  # the key's delete wins over an ack's write like the rest
                break
            # the key names a message not (yet) stored: an ack handing the key on is half
            # applied (a logged batch is atomic, not isolated); look again before calling
            # the key stale, or the message the ack writes would outlive the cancel
            time.sleep(0.02)
            holder = self._key_holder(queue, key)
        add_to_batch(
            batch,
            self._prepare(cql.DELETE_KEY),
            (ts, queue, self._key_shard(queue, key), key),
        )
        self._run(batch)
        return found

    def keyed(self, queue: str | None = None) -> list[StoredMessage]:
        found = []
        for name in [queue] if queue is not None else self.queues():
            for shard in range(self.meta(name).shards):
                for row in self._run(self._prepare(cql.SELECT_SHARD_KEYS), (name, shard)):
                    stored = self.get(row.id, name)
                    if stored is None:  # a chain moved on between the reads: follow its key
                        stored = self.get_by_key(name, row.key)
                    if stored is not None:
                        found.append(stored)
        return found
