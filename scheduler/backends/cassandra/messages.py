"""The Cassandra backend's messages: enqueue in logged batches, reads (``layout.py``)
and cancels by id or key."""

from __future__ import annotations

import time
from collections.abc import Sequence

from tickwork.scheduler.backends.cassandra import cql
from tickwork.scheduler.backends.cassandra.batching import MAX_BODY_BYTES, Batches, add_to_batch
from tickwork.scheduler.backends.cassandra.bounds import CassandraBounds
from tickwork.scheduler.backends.cassandra.key_claims import KeyClaims
from tickwork.scheduler.backends.cassandra.shard_lock import CassandraShardLock
from tickwork.scheduler.backends.outcomes import WRITES, decide, refuse_taken_keys
from tickwork.scheduler.backends.roles import Messages
from tickwork.scheduler.backends.values import Envelope, OnConflict, Outcome, StoredMessage
from tickwork.scheduler.errors import InvalidMessage

_KEY_SETTLE_READS = 5  # reads of a key that names a missing message before it is stale


class CassandraMessages(Messages):
    """Stores, reads and cancels messages."""

    def __init__(self, store: CassandraShardLock, bounds: CassandraBounds) -> None:
        self._store = store
        self._bounds = bounds
        self._claims = KeyClaims(store)

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
        holders = self._store.holders(envelopes)
        claimed = self._claims.claim(envelopes, holders, on_conflict)  # one writer per key
        try:
            return self._write(envelopes, on_conflict, bounded, holders)
        finally:
            self._claims.let_go(claimed)

    def _write(
        self,
        envelopes: Sequence[Envelope],
        on_conflict: OnConflict,
        bounded: bool,
        holders: dict[tuple[str, str], tuple[str, bytes]],
    ) -> list[Outcome]:
        present = self._store.present(envelopes)
        room = self._bounds.room(envelopes) if bounded else {}
        refuse_taken_keys(envelopes, holders, on_conflict)
        outcomes: list[Outcome] = []
        batches = Batches()
        counts: dict[str, int] = {}
        added: dict[str, int] = {}  # new messages of bounded queues
        written: set[tuple[str, str]] = set()  # (queue, id) inserted by this call so far
        for e in envelopes:
            ts = self._store.now_us()
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
            if any((e.queue, old_id) in written for old_id in replaced):
                # a remove finds what it deletes by reading: what this call wrote
                # before (a message replaced within the batch) is written first
                self._store.execute_many(batches.all())
                batches = Batches()
            batch = batches.current
            for old_id in replaced:  # the insert is written after the deletes
                ts = max(ts, self._store.remove(batch, e.queue, old_id, ts) or ts)
            if e.key is not None:
                holders[(e.queue, e.key)] = (e.id, e.body)
            present.add(e.id)
            written.add((e.queue, e.id))
            self._store.insert(batch, e, ts + 1)
            counts[e.queue] = counts.get(e.queue, 0) + 1
            batches.added(len(e.body))
        self._store.execute_many(batches.all())
        self._bounds.wrote(added)
        for queue, count in counts.items():
            self._store.count(queue, "enqueued", count)
        return outcomes

    def get(self, message_id: str, queue: str | None = None) -> StoredMessage | None:
        return self._store.get(message_id, queue)

    def get_by_key(self, queue: str, key: str) -> StoredMessage | None:
        return self._store.get_by_key(queue, key)

    def delete(self, message_id: str, queue: str | None = None) -> bool:
        for name in [queue] if queue is not None else self._store.queues():
            batch = self._store.batch()
            if self._store.remove(batch, name, message_id, self._store.now_us()) is not None:
                self._store.run(batch)
                return True
        return False

    def delete_by_key(self, queue: str, key: str) -> bool:
        holder = self._store.key_holder(queue, key)
        for _ in range(_KEY_SETTLE_READS):  # after them a key naming no message is stale
            if holder is None:
                return False
            batch = self._store.batch()
            ts = self._store.now_us()
            stamped = self._store.remove(batch, queue, holder, ts)
            found = stamped is not None
            if stamped is not None:
                ts = stamped  # the key's delete wins over an ack's write like the rest
                break
            # the key names a message not (yet) stored: an ack handing the key on is half
            # applied (a logged batch is atomic, not isolated); look again before calling
            # the key stale, or the message the ack writes would outlive the cancel
            time.sleep(0.02)
            holder = self._store.key_holder(queue, key)
        add_to_batch(
            batch,
            self._store.prepare(cql.DELETE_KEY),
            (ts, queue, self._store.key_shard(queue, key), key),
        )
        self._store.run(batch)
        return found

    def keyed(self, queue: str | None = None) -> list[StoredMessage]:
        """Each shard's keys in one read, their messages read together (``stored_many``);
        one that a claim or an ack moved meanwhile is read again by itself."""
        found = []
        for name in [queue] if queue is not None else self._store.queues():
            for shard in range(self._store.meta(name).shards):
                rows = list(
                    self._store.run(self._store.prepare(cql.SELECT_SHARD_KEYS), (name, shard))
                )
                read = self._store.stored_many(name, [str(row.id) for row in rows])
                for row in rows:
                    stored = read.get(str(row.id)) or self._store.get(row.id, name)
                    if stored is None:  # a chain moved on between the reads: follow its key
                        stored = self._store.get_by_key(name, row.key)
                    if stored is not None:
                        found.append(stored)
        return found
