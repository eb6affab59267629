"""The SQLite backend's concurrency limits: slots with leases, and the messages waiting
for one (``limit_slots`` and ``limit_waiters``; the waiters' rowid is their place in line).
Every step is one write transaction, which is the lock of every limit at once."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from tickwork.scheduler.backends.records import SlotRequest, Waiter
from tickwork.scheduler.backends.roles import Limits
from tickwork.scheduler.backends.sqlite.connection import SQLiteStore
from tickwork.scheduler.backends.states import LEASED, READY


class SQLiteLimits(Limits):
    """Slots and waiters of concurrency limits."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    def acquire(self, requests: Sequence[SlotRequest]) -> list[int | None]:
        if not requests:
            return []
        now = self._store.now_ms()
        with self._store.write() as db:
            return [self._acquire(db, request, now) for request in requests]

    @staticmethod
    def _acquire(db: sqlite3.Connection, request: SlotRequest, now: int) -> int | None:
        db.execute(
            "DELETE FROM limit_slots WHERE name = ? AND expires_ms <= ?", (request.limit, now)
        )
        expires = now + request.lease_ms
        renewed = db.execute(
            "UPDATE limit_slots SET expires_ms = ? WHERE name = ? AND holder = ?",
            (expires, request.limit, request.message_id),
        ).rowcount
        if renewed:
            return None
        held, earliest = db.execute(
            "SELECT COUNT(*), MIN(expires_ms) FROM limit_slots WHERE name = ?", (request.limit,)
        ).fetchone()
        if held >= request.capacity:
            return int(earliest)
        db.execute(
            "INSERT INTO limit_slots (name, holder, expires_ms) VALUES (?, ?, ?)",
            (request.limit, request.message_id, expires),
        )
        db.execute(
            "DELETE FROM limit_waiters WHERE name = ? AND message_id = ?",
            (request.limit, request.message_id),
        )
        return None

    def wait(self, request: SlotRequest) -> bool:
        now = self._store.now_ms()
        with self._store.write() as db:
            db.execute(
                "INSERT OR IGNORE INTO limit_waiters (name, message_id, queue, key) "
                "VALUES (?, ?, ?, ?)",
                (request.limit, request.message_id, request.queue, request.key),
            )
            (held,) = db.execute(
                "SELECT COUNT(*) FROM limit_slots WHERE name = ? AND expires_ms > ?",
                (request.limit, now),
            ).fetchone()
            return bool(held < request.capacity)

    def release(self, held: Sequence[tuple[str, str]]) -> list[Waiter]:
        if not held:
            return []
        with self._store.write() as db:
            return self.release_in(db, held)

    @staticmethod
    def release_in(db: sqlite3.Connection, held: Sequence[tuple[str, str]]) -> list[Waiter]:
        woken: list[Waiter] = []
        for limit, message_id in held:
            freed = db.execute(
                "DELETE FROM limit_slots WHERE name = ? AND holder = ?", (limit, message_id)
            ).rowcount
            if not freed:
                continue
            row = db.execute(
                "SELECT rowid, queue, key, message_id FROM limit_waiters "
                "WHERE name = ? ORDER BY rowid LIMIT 1",
                (limit,),
            ).fetchone()
            if row is not None:
                db.execute("DELETE FROM limit_waiters WHERE rowid = ?", (row[0],))
                woken.append(Waiter(limit, row[1], row[2], row[3]))
        return woken

    def pop_waiters(self, limit: str, count: int) -> list[Waiter]:
        with self._store.write() as db:
            rows = db.execute(
                "SELECT rowid, queue, key, message_id FROM limit_waiters "
                "WHERE name = ? ORDER BY rowid LIMIT ?",
                (limit, count),
            ).fetchall()
            db.executemany("DELETE FROM limit_waiters WHERE rowid = ?", [(r[0],) for r in rows])
        return [Waiter(limit, r[1], r[2], r[3]) for r in rows]

    def extend(self, held: Sequence[tuple[str, str]], lease_ms: int) -> None:
        if not held:
            return
        expires = self._store.now_ms() + lease_ms
        with self._store.write() as db:
            db.executemany(
                "UPDATE limit_slots SET expires_ms = ? WHERE name = ? AND holder = ?",
                [(expires, limit, message_id) for limit, message_id in held],
            )

    def wake(self, waiters: Sequence[Waiter]) -> list[bool]:
        if not waiters:
            return []
        now = self._store.now_ms()
        with self._store.write() as db:
            return [
                db.execute(
                    "UPDATE messages SET state = ?, due_ms = MIN(due_ms, ?), "
                    "at_ms = MIN(due_ms, ?) WHERE id = ? AND queue = ? AND state != ?",
                    (READY, now, now, w.message_id, w.queue, LEASED),
                ).rowcount
                == 1
                for w in waiters
            ]

    def usage(self, limits: Sequence[str]) -> dict[str, tuple[int, int]]:
        db = self._store.read()
        now = self._store.now_ms()
        usage: dict[str, tuple[int, int]] = {}
        for limit in limits:
            (held,) = db.execute(
                "SELECT COUNT(*) FROM limit_slots WHERE name = ? AND expires_ms > ?", (limit, now)
            ).fetchone()
            (waiting,) = db.execute(
                "SELECT COUNT(*) FROM limit_waiters WHERE name = ?", (limit,)
            ).fetchone()
            usage[limit] = (int(held), int(waiting))
        return usage
