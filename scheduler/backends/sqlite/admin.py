"""The SQLite backend's poison queue, statistics, paused queues, abort requests and purging."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from scheduler.backends.base import Claim, Envelope, PoisonRecord
from scheduler.backends.records import AbortRequest, Failure, LedgerEntry, QueueStats
from scheduler.backends.sqlite.connection import SQLiteStore


class SQLiteAdmin(SQLiteStore):
    """The poison queue (moving a claim there, reading, replaying), counting and purging
    queues."""

    _POISON_COLUMNS = (
        "id, queue, key, priority, timeout_ms, attempts, failed_ms, reason, error_type, error, "
        "traceback, body"
    )

    @staticmethod
    def _poison_record(row: sqlite3.Row) -> PoisonRecord:
        envelope = Envelope(row[0], row[1], row[2], row[3], row[6], row[4], row[11])
        return PoisonRecord(envelope, Failure(row[7], row[8], row[9], row[10]), row[5], row[6])

    def poison(
        self,
        claim: Claim,
        failure: Failure,
        next_occurrence: Envelope | None = None,
        ledger: LedgerEntry | None = None,
    ) -> bool:
        with self._write() as db:
            row = db.execute(
                "SELECT priority FROM messages WHERE id = ? AND token = ?", (claim.id, claim.token)
            ).fetchone()
            if row is None:
                return False
            db.execute("DELETE FROM messages WHERE id = ?", (claim.id,))
            self._add_pending(db, claim.queue, -1)
            db.execute(
                "INSERT OR REPLACE INTO poison (id, queue, key, priority, timeout_ms, attempts, "
                "failed_ms, reason, error_type, error, traceback, body) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    claim.id,
                    claim.queue,
                    claim.key,
                    row[0],
                    claim.timeout_ms,
                    claim.attempt,
                    self.now_ms(),
                    failure.reason,
                    failure.error_type,
                    failure.message,
                    failure.traceback,
                    claim.body,
                ),
            )
            self._count(db, claim.queue, "poisoned", 1)
            if next_occurrence is not None:
                self._insert_next(db, next_occurrence, self.now_ms())
            if ledger is not None:
                self._append_ledger_in(db, [ledger], self.now_ms())
            return True

    def poison_list(self, queue: str | None = None, limit: int = 100) -> list[PoisonRecord]:
        sql = f"SELECT {self._POISON_COLUMNS} FROM poison"
        params: list[object] = []
        if queue is not None:
            sql += " WHERE queue = ?"
            params.append(queue)
        params.append(limit)
        rows = self._read().execute(sql + " ORDER BY failed_ms, id LIMIT ?", params).fetchall()
        return [self._poison_record(r) for r in rows]

    def poison_get(self, message_id: str) -> PoisonRecord | None:
        row = (
            self._read()
            .execute(f"SELECT {self._POISON_COLUMNS} FROM poison WHERE id = ?", (message_id,))
            .fetchone()
        )
        return None if row is None else self._poison_record(row)

    def poison_replay(self, ids: Sequence[str] | None = None, queue: str | None = None) -> int:
        now = self.now_ms()
        with self._write() as db:
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
                self._add_pending(db, name, count)
            return sum(moved.values())

    def poison_purge(self, queue: str | None = None, ids: Sequence[str] | None = None) -> int:
        with self._write() as db:
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

    # -- operations ----------------------------------------------------------------------

    def queues(self) -> list[str]:
        rows = (
            self._read()
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
        db = self._read()
        now = self.now_ms()
        result = []
        paused = set(self.paused_queues())
        bounds = dict(db.execute("SELECT queue, max_pending FROM queue_bounds").fetchall())
        for name in [queue] if queue is not None else self.queues():
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

    def pause_queue(self, queue: str) -> bool:
        with self._write() as db:
            return (
                db.execute(
                    "INSERT OR IGNORE INTO paused_queues (queue, since_ms) VALUES (?, ?)",
                    (queue, self.now_ms()),
                ).rowcount
                == 1
            )

    def resume_queue(self, queue: str) -> bool:
        with self._write() as db:
            return db.execute("DELETE FROM paused_queues WHERE queue = ?", (queue,)).rowcount == 1

    def paused_queues(self) -> list[str]:
        rows = self._read().execute("SELECT queue FROM paused_queues ORDER BY queue")
        return [row[0] for row in rows]

    def request_abort(self, request: AbortRequest) -> None:
        with self._write() as db:
            db.execute("DELETE FROM abort_requests WHERE expires_ms <= ?", (self.now_ms(),))
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

    def abort_requests(self) -> list[AbortRequest]:
        rows = self._read().execute(
            "SELECT id, queue, continue_chain, requested_ms, expires_ms FROM abort_requests "
            "WHERE expires_ms > ? ORDER BY id",
            (self.now_ms(),),
        )
        return [AbortRequest(r[0], r[1], bool(r[2]), r[3], r[4]) for r in rows]

    def clear_aborts(self, message_ids: Sequence[str]) -> int:
        if not message_ids:
            return 0
        with self._write() as db:
            return db.executemany(
                "DELETE FROM abort_requests WHERE id = ?", [(i,) for i in message_ids]
            ).rowcount

    def add_counters(self, queue: str, deltas: dict[str, int]) -> None:
        if any(deltas.values()):
            with self._write() as db:
                for name, delta in deltas.items():
                    self._count(db, queue, name, delta)

    def purge(self, queue: str) -> int:
        with self._write() as db:
            db.execute("UPDATE queue_bounds SET pending = 0 WHERE queue = ?", (queue,))
            return db.execute("DELETE FROM messages WHERE queue = ?", (queue,)).rowcount
