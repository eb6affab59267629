"""The PostgreSQL backend's messages: enqueue in one transaction per call (a savepoint of
the caller's, on a borrowed connection), a fast path for fresh unkeyed messages (one
``INSERT ... SELECT FROM unnest`` of the whole batch), the careful path for keys,
re-sends and replaces, and the bound of each bounded queue checked in that transaction.

Two producers may race for one key: the loser's insert meets the unique index, its
savepoint rolls back and the careful path runs again, now seeing the winner as the key's
holder (so ``ERROR`` raises ``KeyConflict``, ``IGNORE`` ignores, ``REPLACE`` replaces)."""

from __future__ import annotations

from collections.abc import Sequence

from psycopg import errors as pg_errors

from scheduler.backends.outcomes import plan
from scheduler.backends.postgres.notify import SOON_MS, announce, channel
from scheduler.backends.postgres.rows import insert_columns
from scheduler.backends.postgres.store import Connection, PostgresStore
from scheduler.backends.roles import Messages
from scheduler.backends.states import COLUMNS, stored_message
from scheduler.backends.values import Envelope, OnConflict, Outcome, StoredMessage
from scheduler.errors import BackendError

#: how often the careful path runs again after losing a race for a key
_RACES = 5

_INSERT_MANY = (
    "INSERT INTO tw.messages "
    "(id, queue, key, priority, state, at_ms, due_ms, timeout_ms, body, fair) "
    "SELECT i, q, k, p, s, d, d, t, b, f FROM unnest("
    "%b::text[], %b::text[], %b::text[], %b::int[], %b::smallint[], %b::bigint[], "
    "%b::bigint[], %b::bytea[], %b::text[]) AS u(i, q, k, p, s, d, t, b, f)"
)


#: the fast path of a batch of unkeyed messages, in one statement (one round trip, its
#: own transaction): lock the bounds of its queues (``locked``), write nothing if one
#: lacks room (``full_``, when bounded), insert the messages whose ids are new, add
#: them to the bounds and the counters, and notify the queues of those due soon
_FRESH = (
    "WITH given AS (SELECT * FROM unnest(%b::text[], %b::text[], %b::text[], %b::int[], "
    "%b::smallint[], %b::bigint[], %b::bigint[], %b::bytea[], %b::text[]) "
    "WITH ORDINALITY AS u(i, q, k, p, s, d, t, b, f, n)), "
    "need AS (SELECT q, count(*) AS n FROM given GROUP BY q), "
    "locked AS (SELECT b.queue, b.max_pending - b.pending AS room FROM tw.queue_bounds AS b "
    "WHERE b.queue IN (SELECT q FROM need) ORDER BY b.queue FOR UPDATE), "
    "full_ AS (SELECT 1 FROM locked JOIN need ON locked.queue = need.q "
    "WHERE %s AND locked.room < need.n), "
    "ins AS (INSERT INTO tw.messages "
    "(id, queue, key, priority, state, at_ms, due_ms, timeout_ms, body, fair) "
    "SELECT i, q, k, p, s, d, d, t, b, f FROM given WHERE NOT EXISTS (SELECT 1 FROM full_) "
    "ORDER BY n ON CONFLICT DO NOTHING RETURNING id, queue, due_ms), "
    "per AS (SELECT queue, count(*) AS n, min(due_ms) AS soonest FROM ins GROUP BY queue), "
    "bumped AS (UPDATE tw.queue_bounds AS b SET pending = b.pending + per.n FROM per "
    "WHERE b.queue = per.queue RETURNING 1), "
    "counted AS (INSERT INTO tw.counters (queue, name, slot, value) "
    "SELECT queue, 'enqueued', %s, n FROM per ORDER BY queue "
    "ON CONFLICT (queue, name, slot) DO UPDATE SET value = counters.value + excluded.value "
    "RETURNING 1), "
    "told AS (SELECT pg_notify(%s, queue) FROM per WHERE soonest <= %s) "
    "SELECT EXISTS (SELECT 1 FROM full_), ARRAY(SELECT id FROM ins), "
    "(SELECT count(*) FROM bumped) + (SELECT count(*) FROM counted) "
    "+ (SELECT count(*) FROM told)"
)


class PostgresMessages(Messages):
    """Stores, reads and cancels messages."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store
        self._insert_many = store.sql(_INSERT_MANY)
        self._fresh = store.sql(_FRESH)

    def enqueue(
        self,
        envelopes: Sequence[Envelope],
        on_conflict: OnConflict = OnConflict.ERROR,
        bounded: bool = False,
    ) -> list[Outcome]:
        if not envelopes:
            return []
        if on_conflict is not OnConflict.REPLACE and all(e.key is None for e in envelopes):
            done = self._store.statement(lambda db: self._insert_fresh(db, envelopes, bounded))
            if done is not None:
                return done

        def careful(db: Connection) -> list[Outcome]:
            now = self._store.now_ms()
            for _ in range(_RACES):
                try:
                    with db.transaction():
                        return self._insert_careful(db, envelopes, now, on_conflict, bounded)
                except pg_errors.UniqueViolation:
                    continue  # another producer took a key meanwhile: decide again
            raise BackendError("enqueue lost the race for its keys too often; try again")

        return self._store.write(careful)

    def _insert_fresh(
        self, db: Connection, envelopes: Sequence[Envelope], bounded: bool
    ) -> list[Outcome] | None:
        """Fast path for unkeyed messages, one statement (``_FRESH``): insert those whose
        ids are new, count them into their bounded queues and the counters, notify their
        queues. Returns None, having written nothing, when a bounded queue lacks room
        for all of them: the careful path then sorts them out one by one."""
        now = self._store.now_ms()
        row = db.execute(
            self._fresh,
            (
                *insert_columns(envelopes, now),
                bounded,
                self._store.counter_slot(),
                channel(self._store.schema),
                now + SOON_MS,
            ),
        ).fetchone()
        assert row is not None
        full, inserted, _ = row
        if full:
            return None
        new = set(inserted)
        return [Outcome.ENQUEUED if e.id in new else Outcome.DUPLICATE for e in envelopes]

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
        planned = plan(envelopes, holders, present, on_conflict, room)
        written: dict[tuple[str, str | None] | str, Envelope] = {}  # the last write wins
        for e in planned.writes:
            if e.key is not None:
                written.pop(e.id, None)
                written[(e.queue, e.key)] = e
            else:
                written[e.id] = e
        rows = list(written.values())
        replaced = [
            e
            for e, outcome in zip(envelopes, planned.outcomes, strict=True)
            if outcome is Outcome.REPLACED
        ]
        if replaced:
            # a replacement removes the row holding its key under another id, and one with
            # its id (even a leased one: its holder's ack is then refused, so a replaced
            # chain cannot resurrect)
            db.execute(
                self._store.sql(
                    "DELETE FROM tw.messages WHERE id = ANY(%s) OR (queue, key) IN "
                    "(SELECT * FROM unnest(%b::text[], %b::text[]))"
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
        for queue, count in sorted(planned.written.items()):
            self._store.count(db, queue, "enqueued", count)
        for queue, count in sorted(planned.added.items()):
            self._store.add_pending(db, queue, count)
        return planned.outcomes

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
