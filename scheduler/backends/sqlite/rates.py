"""The SQLite backend's rate limits: every start a limit granted or reserved is a row of
``rate_starts`` (limit, member, time); a reservation is one write transaction, which is
the lock of every limit at once. Rows older than the limit's period are deleted when
the limit's log holds ``count`` of them or more, so a start under the rate is two
statements."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from scheduler.backends.base import RateRequest
from scheduler.backends.sqlite.connection import SQLiteStore


class SQLiteRates(SQLiteStore):
    """Starts and reservations of rate limits."""

    def reserve_starts(self, requests: Sequence[RateRequest]) -> list[int | None]:
        if not requests:
            return []
        now = self.now_ms()
        with self._write() as db:
            return [self._reserve(db, request, now) for request in requests]

    @staticmethod
    def _reserve(db: sqlite3.Connection, request: RateRequest, now: int) -> int | None:
        name = request.limit
        row = db.execute(
            "SELECT at_ms FROM rate_starts WHERE name = ? ORDER BY at_ms DESC LIMIT 1 OFFSET ?",
            (name, request.starts - 1),
        ).fetchone()
        at = now
        if row is not None:  # count starts or more: the count-th last one decides
            if row[0] > now - request.period_ms:
                at = int(row[0]) + request.period_ms
            else:  # it left the window: fewer are in it, and the log keeps old starts
                db.execute(
                    "DELETE FROM rate_starts WHERE name = ? AND at_ms <= ?",
                    (name, now - request.period_ms),
                )
        inserted = db.execute(
            "INSERT OR IGNORE INTO rate_starts (name, member, at_ms) VALUES (?, ?, ?)",
            (name, request.member, at),
        ).rowcount
        if not inserted:  # reserved before: its time stands
            (at,) = db.execute(
                "SELECT at_ms FROM rate_starts WHERE name = ? AND member = ?",
                (name, request.member),
            ).fetchone()
        return None if at <= now else int(at)

    def rate_usage(self, limits: Sequence[str], period_ms: int) -> dict[str, tuple[int, int]]:
        now = self.now_ms()
        usage: dict[str, tuple[int, int]] = {}
        db = self._read()
        for name in limits:
            started, ahead = db.execute(
                "SELECT COALESCE(SUM(at_ms <= ?), 0), COALESCE(SUM(at_ms > ?), 0) "
                "FROM rate_starts WHERE name = ? AND at_ms > ?",
                (now, now, name, now - period_ms),
            ).fetchone()
            usage[name] = (int(started), int(ahead))
        return usage
