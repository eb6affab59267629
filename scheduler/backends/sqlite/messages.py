"""The SQLite backend's messages: enqueue in one write transaction per call, a fast path for fresh
unkeyed messages (one ``executemany``), the careful path for keys, re-sends and replaces,
and the bound of each bounded queue checked in that same transaction (``bounds.py``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from tickwork.scheduler.backends.outcomes import plan
from tickwork.scheduler.backends.roles import Messages
from tickwork.scheduler.backends.sqlite import bounds
from tickwork.scheduler.backends.sqlite.aging import age_in
from tickwork.scheduler.backends.sqlite.connection import SQLiteStore
from tickwork.scheduler.backends.states import COLUMNS, initial_state, stored_message
from tickwork.scheduler.backends.values import Envelope, OnConflict, Outcome, StoredMessage


class SQLiteMessages(Messages):
    """Stores, reads and cancels messages."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    def enqueue(
        self,
        envelopes: Sequence[Envelope],
        on_conflict: OnConflict = OnConflict.ERROR,
        bounded: bool = False,
    ) -> list[Outcome]:
        if not envelopes:
            return []
        now = self._store.now_ms()
        replace = on_conflict is OnConflict.REPLACE
        with self._store.write() as db:
            if not replace and all(e.key is None for e in envelopes):
                done = self._insert_fresh(db, envelopes, now, bounded)
                if done is not None:
                    return done
            room = bounds.room(db, envelopes) if bounded else {}
            holders = self._key_holders(db, envelopes)
            present = self._present_ids(db, [e.id for e in envelopes if e.key is None])
            planned = plan(envelopes, holders, present, on_conflict, room)
            rows = [
                (
                    e.id,
                    e.queue,
                    e.key,
                    e.priority,
                    initial_state(e, now),
                    e.due_ms,
                    e.due_ms,
                    e.timeout_ms,
                    e.body,
                    e.fair,
                )
                for e in planned.writes
            ]
            # REPLACE also removes a row that holds the key under another id (even a leased
            # one: its holder's ack is then refused, so a replaced chain cannot resurrect)
            db.executemany(
                f"INSERT {'OR REPLACE ' if replace else ''}INTO messages "
                "(id, queue, key, priority, state, at_ms, due_ms, timeout_ms, body, fair) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            age_in(db, planned.writes)
            for queue, count in planned.written.items():
                self._store.count(db, queue, "enqueued", count)
            for queue, count in planned.added.items():
                self._store.add_pending(db, queue, count)
        return planned.outcomes

    def _insert_fresh(
        self, db: sqlite3.Connection, envelopes: Sequence[Envelope], now: int, bounded: bool
    ) -> list[Outcome] | None:
        """Fast path for unkeyed messages with fresh ids: count them into their queues
        (one statement per queue, which also tells whether a bounded queue takes them all)
        and insert them with one ``executemany``. Returns None, having written nothing,
        if some id is already stored or a bounded queue is too full: the careful path
        then sorts them out one by one."""
        rows = [
            (
                e.id,
                e.queue,
                None,
                e.priority,
                initial_state(e, now),
                e.due_ms,
                e.due_ms,
                e.timeout_ms,
                e.body,
                e.fair,
            )
            for e in envelopes
        ]
        per_queue: dict[str, int] = {}
        for e in envelopes:
            per_queue[e.queue] = per_queue.get(e.queue, 0) + 1
        db.execute("SAVEPOINT fresh")
        if not bounds.count_in(db, per_queue, bounded):
            db.execute("ROLLBACK TO fresh")
            db.execute("RELEASE fresh")
            return None
        try:
            db.executemany(
                "INSERT INTO messages (id, queue, key, priority, state, at_ms, due_ms, "
                "timeout_ms, body, fair) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
        except sqlite3.IntegrityError:
            db.execute("ROLLBACK TO fresh")
            db.execute("RELEASE fresh")
            return None
        db.execute("RELEASE fresh")
        age_in(db, envelopes)
        for queue, count in per_queue.items():
            self._store.count(db, queue, "enqueued", count)
        return [Outcome.ENQUEUED] * len(envelopes)

    @staticmethod
    def _key_holders(
        db: sqlite3.Connection, envelopes: Sequence[Envelope]
    ) -> dict[tuple[str, str], tuple[str, bytes]]:
        """Who holds each key among ``envelopes`` now: (queue, key) -> (id, body)."""
        holders: dict[tuple[str, str], tuple[str, bytes]] = {}
        by_queue: dict[str, list[str]] = {}
        for e in envelopes:
            if e.key is not None:
                by_queue.setdefault(e.queue, []).append(e.key)
        for queue, keys in by_queue.items():
            for start in range(0, len(keys), 900):
                chunk = keys[start : start + 900]
                marks = ",".join("?" * len(chunk))
                for key, message_id, body in db.execute(
                    f"SELECT key, id, body FROM messages WHERE queue = ? AND key IN ({marks})",
                    [queue, *chunk],
                ):
                    holders[(queue, key)] = (message_id, body)
        return holders

    @staticmethod
    def _present_ids(db: sqlite3.Connection, ids: list[str]) -> set[str]:
        present: set[str] = set()
        for start in range(0, len(ids), 900):
            chunk = ids[start : start + 900]
            marks = ",".join("?" * len(chunk))
            present.update(
                row[0]
                for row in db.execute(f"SELECT id FROM messages WHERE id IN ({marks})", chunk)
            )
        return present

    # -- reading and cancelling ----------------------------------------------------------

    def get(self, message_id: str, queue: str | None = None) -> StoredMessage | None:
        sql = f"SELECT {COLUMNS} FROM messages WHERE id = ?"
        params: tuple[str, ...] = (message_id,)
        if queue is not None:
            sql += " AND queue = ?"
            params += (queue,)
        row = self._store.read().execute(sql, params).fetchone()
        return None if row is None else stored_message(row)

    def get_by_key(self, queue: str, key: str) -> StoredMessage | None:
        row = (
            self._store.read()
            .execute(f"SELECT {COLUMNS} FROM messages WHERE queue = ? AND key = ?", (queue, key))
            .fetchone()
        )
        return None if row is None else stored_message(row)

    def delete(self, message_id: str, queue: str | None = None) -> bool:
        with self._store.write() as db:
            if queue is None:
                row = db.execute(
                    "DELETE FROM messages WHERE id = ? RETURNING queue", (message_id,)
                ).fetchone()
            else:
                row = db.execute(
                    "DELETE FROM messages WHERE id = ? AND queue = ? RETURNING queue",
                    (message_id, queue),
                ).fetchone()
            if row is not None:
                self._store.add_pending(db, row[0], -1)
            return row is not None

    def delete_by_key(self, queue: str, key: str) -> bool:
        with self._store.write() as db:
            cursor = db.execute("DELETE FROM messages WHERE queue = ? AND key = ?", (queue, key))
            self._store.add_pending(db, queue, -cursor.rowcount)
            return cursor.rowcount > 0

    def keyed(self, queue: str | None = None) -> list[StoredMessage]:
        sql = f"SELECT {COLUMNS} FROM messages WHERE key IS NOT NULL"
        params: tuple[str, ...] = ()
        if queue is not None:
            sql += " AND queue = ?"
            params = (queue,)
        rows = self._store.read().execute(sql + " ORDER BY queue, key", params)
        return [stored_message(row) for row in rows]
