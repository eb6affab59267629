"""The PostgreSQL backend's messages: enqueue in one transaction per call (a savepoint of
the caller's, on a borrowed connection), a fast path for fresh unkeyed messages (one
``INSERT ... SELECT FROM unnest`` of the whole batch), the careful path for keys,
re-sends and replaces, and the bound of each bounded queue checked in that transaction.

Two producers may race for one key: the loser's insert meets the unique index, its
savepoint rolls back and the careful path runs again, now seeing the winner as the key's
holder (so ``ERROR`` raises ``KeyConflict``, ``IGNORE`` ignores, ``REPLACE`` replaces)."""

from __future__ import annotations

from collections.abc import Sequence

import psycopg
from psycopg import errors as pg_errors

from scheduler.backends.outcomes import WRITES, decide, refuse_taken_keys
from scheduler.backends.postgres.notify import announce
from scheduler.backends.postgres.rows import COLUMNS, insert_columns, stored_message
from scheduler.backends.postgres.store import Connection, PostgresStore
from scheduler.backends.roles import Messages
from scheduler.backends.values import Envelope, OnConflict, Outcome, StoredMessage
from scheduler.errors import BackendError

#: how often the careful path runs again after losing a race for a key
_RACES = 5

_INSERT_MANY = (
    "INSERT INTO tw.messages "
    "(id, queue, key, priority, state, at_ms, due_ms, timeout_ms, body, fair) "
    "SELECT i, q, k, p, s, d, d, t, b, f FROM unnest("
    "%s::text[], %s::text[], %s::text[], %s::int[], %s::smallint[], %s::bigint[], "
    "%s::bigint[], %s::bytea[], %s::text[]) AS u(i, q, k, p, s, d, t, b, f)"
)


class PostgresMessages(Messages):
    """Stores, reads and cancels messages."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store
        self._insert_many = store.sql(_INSERT_MANY)

    def enqueue(
        self,
        envelopes: Sequence[Envelope],
        on_conflict: OnConflict = OnConflict.ERROR,
        bounded: bool = False,
    ) -> list[Outcome]:
        if not envelopes:
            return []
        replace = on_conflict is OnConflict.REPLACE

        def work(db: Connection) -> list[Outcome]:
            now = self._store.now_ms()
            if not replace and all(e.key is None for e in envelopes):
                done = self._insert_fresh(db, envelopes, now, bounded)
                if done is not None:
                    return done
            for _ in range(_RACES):
                try:
                    with db.transaction():
                        return self._insert_careful(db, envelopes, now, on_conflict, bounded)
                except pg_errors.UniqueViolation:
                    continue  # another producer took a key meanwhile: decide again
            raise BackendError("enqueue lost the race for its keys too often; try again")

        return self._store.write(work)

    def _insert_fresh(
        self, db: Connection, envelopes: Sequence[Envelope], now: int, bounded: bool
    ) -> list[Outcome] | None:
        """Fast path for unkeyed messages with fresh ids: count them into their bounded
        queues and insert them in one statement. Returns None, having written nothing, if
        some id is stored already or a bounded queue is too full: the careful path then
        sorts them out one by one."""
        per_queue: dict[str, int] = {}
        for e in envelopes:
            per_queue[e.queue] = per_queue.get(e.queue, 0) + 1
        fits = False
        try:
            with db.transaction():
                fits = self._count_in(db, per_queue, bounded)
                if not fits:
                    raise psycopg.Rollback()  # a bounded queue is too full: undo the counts
                db.execute(self._insert_many, insert_columns(envelopes, now))
                announce(self._store, db, envelopes, now)
                for queue, count in sorted(per_queue.items()):
                    self._store.count(db, queue, "enqueued", count)
        except pg_errors.UniqueViolation:
            return None
        return [Outcome.ENQUEUED] * len(envelopes) if fits else None

    def _count_in(self, db: Connection, added: dict[str, int], bounded: bool) -> bool:
        """Add ``added`` (queue -> new messages) to the counts of bounded queues; False
        when ``bounded`` and a queue would pass its bound (the caller rolls back)."""
        fits = True
        for queue, count in sorted(added.items()):
            row = db.execute(
                self._store.sql(
                    "UPDATE tw.queue_bounds SET pending = pending + %s WHERE queue = %s "
                    "RETURNING max_pending, pending"
                ),
                (count, queue),
            ).fetchone()
            if bounded and row is not None and row[1] > row[0]:
                fits = False
        return fits

    def _insert_careful(
        self,
        db: Connection,
        envelopes: Sequence[Envelope],
        now: int,
        on_conflict: OnConflict,
        bounded: bool,
    ) -> list[Outcome]:
        room = self._room(db, envelopes) if bounded else {}
        holders = self._key_holders(db, envelopes)
        present = self._present_ids(db, [e.id for e in envelopes if e.key is None])
        refuse_taken_keys(envelopes, holders, on_conflict)
        outcomes: list[Outcome] = []
        written: dict[tuple[str, str | None] | str, Envelope] = {}  # the last write wins
        added: dict[str, int] = {}  # new messages (a replacement adds none)
        for e in envelopes:
            holder = holders.get((e.queue, e.key)) if e.key is not None else None
            outcome = decide(e, holder, e.id in present, on_conflict, room)
            outcomes.append(outcome)
            if outcome not in WRITES:
                continue
            if outcome is Outcome.ENQUEUED:
                added[e.queue] = added.get(e.queue, 0) + 1
            if e.key is not None:
                holders[(e.queue, e.key)] = (e.id, e.body)
                written.pop(e.id, None)
                written[(e.queue, e.key)] = e
            else:
                present.add(e.id)
                written[e.id] = e
        rows = list(written.values())
        replaced = [
            e for e, outcome in zip(envelopes, outcomes, strict=True) if outcome is Outcome.REPLACED
        ]
        if replaced:
            # a replacement removes the row holding its key under another id, and one with
            # its id (even a leased one: its holder's ack is then refused, so a replaced
            # chain cannot resurrect)
            db.execute(
                self._store.sql(
                    "DELETE FROM tw.messages WHERE id = ANY(%s) OR (queue, key) IN "
                    "(SELECT * FROM unnest(%s::text[], %s::text[]))"
                ),
                (
                    [e.id for e in replaced],
                    [e.queue for e in replaced if e.key is not None],
                    [e.key for e in replaced if e.key is not None],
                ),
            )
        if rows:
            db.execute(self._insert_many, insert_columns(rows, now))
            announce(self._store, db, rows, now)
        per_queue: dict[str, int] = {}
        for e, outcome in zip(envelopes, outcomes, strict=True):
            if outcome in WRITES:
                per_queue[e.queue] = per_queue.get(e.queue, 0) + 1
        for queue, count in sorted(per_queue.items()):
            self._store.count(db, queue, "enqueued", count)
        for queue, count in sorted(added.items()):
            self._store.add_pending(db, queue, count)
        return outcomes

    def _room(self, db: Connection, envelopes: Sequence[Envelope]) -> dict[str, int]:
        """How many more messages each bounded queue among ``envelopes`` takes (queues
        without a bound are left out); their rows stay locked until the transaction
        ends, so two producers cannot both take the last place."""
        rows = db.execute(
            self._store.sql(
                "SELECT queue, max_pending - pending FROM tw.queue_bounds "
                "WHERE queue = ANY(%s) ORDER BY queue FOR UPDATE"
            ),
            (sorted({e.queue for e in envelopes}),),
        )
        return {str(row[0]): int(row[1]) for row in rows}

    def _key_holders(
        self, db: Connection, envelopes: Sequence[Envelope]
    ) -> dict[tuple[str, str], tuple[str, bytes]]:
        """Who holds each key among ``envelopes`` now: (queue, key) -> (id, body)."""
        holders: dict[tuple[str, str], tuple[str, bytes]] = {}
        by_queue: dict[str, list[str]] = {}
        for e in envelopes:
            if e.key is not None:
                by_queue.setdefault(e.queue, []).append(e.key)
        for queue, keys in by_queue.items():
            for key, message_id, body in db.execute(
                self._store.sql(
                    "SELECT key, id, body FROM tw.messages WHERE queue = %s AND key = ANY(%s)"
                ),
                (queue, keys),
            ):
                holders[(queue, key)] = (message_id, body)
        return holders

    def _present_ids(self, db: Connection, ids: list[str]) -> set[str]:
        if not ids:
            return set()
        rows = db.execute(self._store.sql("SELECT id FROM tw.messages WHERE id = ANY(%s)"), (ids,))
        return {row[0] for row in rows}

    # -- reading and cancelling ----------------------------------------------------------

    def get(self, message_id: str, queue: str | None = None) -> StoredMessage | None:
        sql = f"SELECT {COLUMNS} FROM tw.messages WHERE id = %s"
        params: tuple[str, ...] = (message_id,)
        if queue is not None:
            sql += " AND queue = %s"
            params += (queue,)
        row = self._store.read(lambda db: db.execute(self._store.sql(sql), params).fetchone())
        return None if row is None else stored_message(row)

    def get_by_key(self, queue: str, key: str) -> StoredMessage | None:
        sql = self._store.sql(f"SELECT {COLUMNS} FROM tw.messages WHERE queue = %s AND key = %s")
        row = self._store.read(lambda db: db.execute(sql, (queue, key)).fetchone())
        return None if row is None else stored_message(row)

    def delete(self, message_id: str, queue: str | None = None) -> bool:
        sql = "DELETE FROM tw.messages WHERE id = %s"
        params: tuple[str, ...] = (message_id,)
        if queue is not None:
            sql += " AND queue = %s"
            params += (queue,)

        def work(db: Connection) -> bool:
            row = db.execute(self._store.sql(sql + " RETURNING queue"), params).fetchone()
            if row is not None:
                self._store.add_pending(db, row[0], -1)
            return row is not None

        return self._store.write(work)

    def delete_by_key(self, queue: str, key: str) -> bool:
        sql = self._store.sql("DELETE FROM tw.messages WHERE queue = %s AND key = %s")

        def work(db: Connection) -> bool:
            deleted = db.execute(sql, (queue, key)).rowcount
            self._store.add_pending(db, queue, -deleted)
            return deleted > 0

        return self._store.write(work)

    def keyed(self, queue: str | None = None) -> list[StoredMessage]:
        sql = f"SELECT {COLUMNS} FROM tw.messages WHERE key IS NOT NULL"
        params: tuple[str, ...] = ()
        if queue is not None:
            sql += " AND queue = %s"
            params = (queue,)
        statement = self._store.sql(sql + " ORDER BY queue, key")
        rows = self._store.read(lambda db: db.execute(statement, params).fetchall())
        return [stored_message(row) for row in rows]
