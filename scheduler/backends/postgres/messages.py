"""The PostgreSQL backend's messages: enqueue (``writing.py``: one statement for a batch
of fresh unkeyed messages, the careful path for keys, re-sends and replaces, each in one
transaction or a savepoint of the caller's), reads and cancels."""

from __future__ import annotations

from collections.abc import Sequence

from tickwork.scheduler.backends.postgres.aging import ages
from tickwork.scheduler.backends.postgres.store import Connection, PostgresStore
from tickwork.scheduler.backends.postgres.writing import NoRoom, aenqueue_on, enqueue_on, fresh, run
from tickwork.scheduler.backends.roles import Messages
from tickwork.scheduler.backends.states import COLUMNS, stored_message
from tickwork.scheduler.backends.values import Envelope, OnConflict, Outcome, StoredMessage
from tickwork.scheduler.errors import BackendError

# how often a cancel by key tries again when each DELETE waited on a row its ack replaced
_DELETE_BY_KEY_TRIES = 100


class PostgresMessages(Messages):
    """Stores, reads and cancels messages."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    def enqueue(
        self,
        envelopes: Sequence[Envelope],
        on_conflict: OnConflict = OnConflict.ERROR,
        bounded: bool = False,
    ) -> list[Outcome]:
        if not envelopes:
            return []
        store = self._store
        # in a caller's transaction a bounded write is all or nothing (writing.NoRoom)
        all_or_nothing = bounded and store.borrows()
        if (
            on_conflict is not OnConflict.REPLACE
            and all(e.key is None for e in envelopes)
            and not ages(envelopes)
        ):

            def fast(db: Connection) -> list[Outcome] | None:
                done = run(db, fresh(store, envelopes, bounded))
                if done is None and all_or_nothing:
                    raise NoRoom([])  # undo its savepoint: let go of the count rows
                return done

            try:
                done = store.statement(fast)
            except NoRoom:
                done = None
            if done is not None:
                return done
        return store.write(
            lambda db: enqueue_on(db, store, envelopes, on_conflict, bounded, all_or_nothing)
        )

    async def aenqueue(
        self,
        envelopes: Sequence[Envelope],
        on_conflict: OnConflict = OnConflict.ERROR,
        bounded: bool = False,
    ) -> list[Outcome]:
        """On the caller's asynchronous connection (``App.transaction`` with a psycopg
        ``AsyncConnection``) from the event loop itself; else in a thread."""
        connection = self._store.borrowed_async()
        if connection is None:
            return await super().aenqueue(envelopes, on_conflict, bounded)
        if not envelopes:
            return []
        with self._store.errors_explained():
            return await aenqueue_on(connection, self._store, envelopes, on_conflict, bounded)

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
        present = self._store.sql("SELECT 1 FROM tw.messages WHERE queue = %s AND key = %s")

        def work(db: Connection) -> bool:
            # a chain's ack deletes its row and inserts the next occurrence under the same
            # key: a DELETE that waited on the old row finds it gone and cannot see the new
            # one (read committed). A plain read, which waits on nothing, says whether a
            # row is there now; while one is, the next DELETE takes it or waits on it again
            for _ in range(_DELETE_BY_KEY_TRIES):
                deleted = db.execute(sql, (queue, key)).rowcount
                if deleted:
                    self._store.add_pending(db, queue, -deleted)
                    return True
                if db.execute(present, (queue, key)).fetchone() is None:
                    return False
            raise BackendError(
                f"cancel of key {key!r} in queue {queue!r}: its schedule was replaced by its "
                f"next occurrence {_DELETE_BY_KEY_TRIES} times while the cancel waited"
            )

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
