"""The SQLite backend's worker registry: one row per live worker in ``workers``, with the
time it expires unless its heartbeat refreshes it; expired rows are deleted at most once a
second, when a worker next writes its own (``SQLiteStore._prune``)."""

from __future__ import annotations

from tickwork.scheduler.backends.roles import Registry
from tickwork.scheduler.backends.sqlite.connection import SQLiteStore


class SQLiteRegistry(Registry):
    """Records of live workers."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    def put(self, worker_id: str, record: bytes, ttl_ms: int) -> None:
        now = self._store.now_ms()
        with self._store.write() as db:
            self._store.prune(db, "workers", "expires_ms", now)
            db.execute(
                "INSERT OR REPLACE INTO workers (id, body, expires_ms) VALUES (?, ?, ?)",
                (worker_id, record, now + ttl_ms),
            )

    def delete(self, worker_id: str) -> None:
        with self._store.write() as db:
            db.execute("DELETE FROM workers WHERE id = ?", (worker_id,))

    def records(self) -> dict[str, bytes]:
        rows = self._store.read().execute(
            "SELECT id, body FROM workers WHERE expires_ms > ? ORDER BY id", (self._store.now_ms(),)
        )
        return {str(row[0]): bytes(row[1]) for row in rows}
