"""The SQLite backend's operator roles: the poison queue, queues (statistics, pause,
bounds, purge) and abort requests."""

from __future__ import annotations

import builtins
import sqlite3
from collections.abc import Sequence

from tickwork.scheduler.backends.records import AbortRequest, Failure, QueueStats
from tickwork.scheduler.backends.roles import Aborts, PoisonStore, QueueAdmin
from tickwork.scheduler.backends.sqlite import fairness
from tickwork.scheduler.backends.sqlite.connection import SQLiteStore
from tickwork.scheduler.backends.values import Envelope, PoisonRecord
from tickwork.scheduler.errors import ConfigurationError


class SQLitePoison(PoisonStore):
    """The poison queue: reading, replaying, purging."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    _POISON_COLUMNS = (
        "id, queue, key, priority, timeout_ms, attempts, failed_ms, reason, error_type, error, "
        "traceback, body"
    )

    @staticmethod
    def _poison_record(row: sqlite3.Row) -> PoisonRecord:
        envelope = Envelope(row[0], row[1], row[2], row[3], row[6], row[4], row[11])
        return PoisonRecord(envelope, Failure(row[7], row[8], row[9], row[10]), row[5], row[6])

    def list(self, queue: str | None = None, limit: int = 100) -> builtins.list[PoisonRecord]:
        sql = f"SELECT {self._POISON_COLUMNS} FROM poison"
        params: list[object] = []
        if queue is not None:
            sql += " WHERE queue = ?"
            params.append(queue)
        params.append(limit)
        rows = (
            self._store.read().execute(sql + " ORDER BY failed_ms, id LIMIT ?", params).fetchall()
        )
        return [self._poison_record(r) for r in rows]

    def get(self, message_id: str) -> PoisonRecord | None:
        row = (
            self._store.read()
            .execute(f"SELECT {self._POISON_COLUMNS} FROM poison WHERE id = ?", (message_id,))
            .fetchone()
        )
        return None if row is None else self._poison_record(row)

    def replay(self, ids: Sequence[str] | None = None, queue: str | None = None) -> int:
        now = self._store.now_ms()
        with self._store.write() as db:
            if ids is None:
                sql = "SELECT id FROM poison" + (" WHERE queue = ?" if queue else "")
                ids = [r[0] for r in db.execute(sql, (queue,) if queue else ())]
            moved: dict[str, int] = {}
            for message_id in ids:
                inserted = db.execute(
                    "INSERT OR IGNORE INTO messages "
                    "(id, queue, key, priority, state, at_ms, due_ms, timeout_ms, body) "
                    "SELECT id, queue, key, priority, 1, ?, ?, timeout_ms, body FROM poison "
                    "WHERE id = ?",
                    (now, now, message_id),
                ).rowcount
                if inserted:
                    (name,) = db.execute(
                        "DELETE FROM poison WHERE id = ? RETURNING queue", (message_id,)
                    ).fetchone()
                    moved[name] = moved.get(name, 0) + 1
            for name, count in moved.items():
                self._store.add_pending(db, name, count)
            return sum(moved.values())

    def purge(self, queue: str | None = None, ids: Sequence[str] | None = None) -> int:
        with self._store.write() as db:
            if ids is not None:
                where = " AND queue = ?" if queue is not None else ""
                extra = (queue,) if queue is not None else ()
                return sum(
                    db.execute(f"DELETE FROM poison WHERE id = ?{where}", (i, *extra)).rowcount
                    for i in dict.fromkeys(ids)
                )
            if queue is None:
                return db.execute("DELETE FROM poison").rowcount
            return db.execute("DELETE FROM poison WHERE queue = ?", (queue,)).rowcount


class SQLiteQueues(QueueAdmin):
    """Counting, pausing, bounding and purging queues."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    def names(self) -> list[str]:
        rows = (
            self._store.read()
            .execute(
                "SELECT queue FROM messages UNION SELECT queue FROM poison "
                "UNION SELECT queue FROM counters UNION SELECT queue FROM paused_queues "
                "UNION SELECT queue FROM queue_bounds "
                "ORDER BY 1"
            )
            .fetchall()
        )
        return [r[0] for r in rows]

    def stats(self, queue: str | None = None) -> list[QueueStats]:
        db = self._store.read()
        now = self._store.now_ms()
        result = []
        paused = set(self.paused())
        bounds = dict(db.execute("SELECT queue, max_pending FROM queue_bounds").fetchall())
        for name in [queue] if queue is not None else self.names():
            ready, scheduled, running, next_due = db.execute(
                "SELECT COALESCE(SUM(state = 1 OR (state = 0 AND at_ms <= ?)), 0), "
                "COALESCE(SUM(state = 0 AND at_ms > ?), 0), COALESCE(SUM(state = 2), 0), "
                "MIN(CASE WHEN state != 2 THEN at_ms END) FROM messages WHERE queue = ?",
                (now, now, name),
            ).fetchone()
            poison = db.execute("SELECT COUNT(*) FROM poison WHERE queue = ?", (name,)).fetchone()[
                0
            ]
            counters = dict(
                db.execute("SELECT name, value FROM counters WHERE queue = ?", (name,)).fetchall()
            )
            result.append(
                QueueStats(
                    name,
                    ready,
                    scheduled,
                    running,
                    poison,
                    next_due,
                    counters,
                    {0: ready + scheduled + running},
                    name in paused,
                    bounds.get(name),
                )
            )
        return result

    def pause(self, queue: str) -> bool:
        with self._store.write() as db:
            return (
                db.execute(
                    "INSERT OR IGNORE INTO paused_queues (queue, since_ms) VALUES (?, ?)",
                    (queue, self._store.now_ms()),
                ).rowcount
                == 1
            )

    def resume(self, queue: str) -> bool:
        with self._store.write() as db:
            return db.execute("DELETE FROM paused_queues WHERE queue = ?", (queue,)).rowcount == 1

    def paused(self) -> list[str]:
        rows = self._store.read().execute("SELECT queue FROM paused_queues ORDER BY queue")
        return [row[0] for row in rows]

    def set_bound(self, queue: str, max_pending: int | None) -> None:
        if max_pending is not None and max_pending < 1:
            raise ConfigurationError(f"max_pending must be at least 1, not {max_pending}")
        with self._store.write() as db:
            if max_pending is None:
                db.execute("DELETE FROM queue_bounds WHERE queue = ?", (queue,))
                return
            db.execute(
                "INSERT OR REPLACE INTO queue_bounds (queue, max_pending, pending) "
                "VALUES (?, ?, (SELECT COUNT(*) FROM messages WHERE queue = ?))",
                (queue, max_pending, queue),
            )

    def bounds(self) -> dict[str, int]:
        rows = self._store.read().execute(
            "SELECT queue, max_pending FROM queue_bounds ORDER BY queue"
        )
        return {str(row[0]): int(row[1]) for row in rows}

    def set_fair_weight(self, queue: str, fair: str, weight: int | None) -> None:
        with self._store.write() as db:
            fairness.set_weight(db, queue, fair, weight)

    def fair_weights(self, queue: str) -> dict[str, int]:
        return fairness.weights(self._store.read(), queue)

    def add_counters(self, queue: str, deltas: dict[str, int]) -> None:
        if any(deltas.values()):
            with self._store.write() as db:
                for name, delta in deltas.items():
                    self._store.count(db, queue, name, delta)

    def purge(self, queue: str) -> int:
        with self._store.write() as db:
            db.execute("UPDATE queue_bounds SET pending = 0 WHERE queue = ?", (queue,))
            return db.execute("DELETE FROM messages WHERE queue = ?", (queue,)).rowcount


class SQLiteAborts(Aborts):
    """Requests to abort running messages."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    def request(self, request: AbortRequest) -> None:
        with self._store.write() as db:
            db.execute("DELETE FROM abort_requests WHERE expires_ms <= ?", (self._store.now_ms(),))
            db.execute(
                "INSERT OR REPLACE INTO abort_requests "
                "(id, queue, continue_chain, requested_ms, expires_ms) VALUES (?, ?, ?, ?, ?)",
                (
                    request.message_id,
                    request.queue,
                    int(request.continue_chain),
                    request.requested_ms,
                    request.expires_ms,
                ),
            )

    def pending(self) -> list[AbortRequest]:
        rows = self._store.read().execute(
            "SELECT id, queue, continue_chain, requested_ms, expires_ms FROM abort_requests "
            "WHERE expires_ms > ? ORDER BY id",
            (self._store.now_ms(),),
        )
        return [AbortRequest(r[0], r[1], bool(r[2]), r[3], r[4]) for r in rows]

    def clear(self, message_ids: Sequence[str]) -> int:
        if not message_ids:
            return 0
        with self._store.write() as db:
            return db.executemany(
                "DELETE FROM abort_requests WHERE id = ?", [(i,) for i in message_ids]
            ).rowcount
