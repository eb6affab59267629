"""The SQLite backend's rate limits: every unit of a start a limit granted or reserved is
a row of ``rate_starts`` (limit, member, time, and when it stops counting; a start of
several units has rows ``member+2`` and on beside its own); a reservation is one
write transaction, which is the lock of every limit at once. A reservation reads only the
starts still in its limit's window; rows that left every window are deleted at most once
a second, by whichever reservation comes then."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from tickwork.scheduler.backends.records import RateRequest
from tickwork.scheduler.backends.roles import Rates
from tickwork.scheduler.backends.sqlite.connection import SQLiteStore


class SQLiteRates(Rates):
    """Starts and reservations of rate limits."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    def reserve(self, requests: Sequence[RateRequest]) -> list[int | None]:
        if not requests:
            return []
        now = self._store.now_ms()
        with self._store.write() as db:
            self._store.prune(db, "rate_starts", "until_ms", now)
            return [self._reserve(db, request, now) for request in requests]

    @staticmethod
    def _reserve(db: sqlite3.Connection, request: RateRequest, now: int) -> int | None:
        name, period, units = request.limit, request.period_ms, request.units
        row = db.execute(  # the unit that many places back still in the window, if any
            "SELECT at_ms FROM rate_starts WHERE name = ? AND at_ms > ? "
            "ORDER BY at_ms DESC LIMIT 1 OFFSET ?",
            (name, now - period, request.starts - units),
        ).fetchone()
        at = now if row is None else int(row[0]) + period
        if at > now and not request.reserve:  # a start only now, or none: unless it has one
            mine = db.execute(
                "SELECT at_ms FROM rate_starts WHERE name = ? AND member = ?",
                (name, request.member),
            ).fetchone()
            return at if mine is None or int(mine[0]) > now else None
        inserted = db.execute(
            "INSERT OR IGNORE INTO rate_starts (name, member, at_ms, until_ms) VALUES (?, ?, ?, ?)",
            (name, request.member, at, at + period),
        ).rowcount
        if not inserted:  # reserved before: its time stands
            (at,) = db.execute(
                "SELECT at_ms FROM rate_starts WHERE name = ? AND member = ?",
                (name, request.member),
            ).fetchone()
        elif units > 1:  # a start of several units: one row more per unit
            db.executemany(
                "INSERT OR IGNORE INTO rate_starts (name, member, at_ms, until_ms) "
                "VALUES (?, ?, ?, ?)",
                [(name, f"{request.member}+{n}", at, at + period) for n in range(2, units + 1)],
            )
        return None if at <= now else int(at)

    def usage(self, limits: Sequence[str], period_ms: int) -> dict[str, tuple[int, int]]:
        now = self._store.now_ms()
        usage: dict[str, tuple[int, int]] = {}
        db = self._store.read()
        for name in limits:
            started, ahead = db.execute(
                "SELECT COALESCE(SUM(at_ms <= ?), 0), COALESCE(SUM(at_ms > ?), 0) "
                "FROM rate_starts WHERE name = ? AND at_ms > ?",
                (now, now, name, now - period_ms),
            ).fetchone()
            usage[name] = (int(started), int(ahead))
        return usage
