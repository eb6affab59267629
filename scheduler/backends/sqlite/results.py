"""The SQLite backend's result records: one row per message id in ``results``, with the
time it expires; expired rows are deleted at most once a second, by whichever write
comes then, and never read."""

from __future__ import annotations

from collections.abc import Sequence

from tickwork.scheduler.backends.roles import Results
from tickwork.scheduler.backends.sqlite.connection import SQLiteStore


class SQLiteResults(Results):
    """Result records of messages."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    def put(self, results: Sequence[tuple[str, bytes, int]]) -> None:
        if not results:
            return
        now = self._store.now_ms()
        with self._store.write() as db:
            self._store.prune(db, "results", "expires_ms", now)
            db.executemany(
                "INSERT OR REPLACE INTO results (id, body, expires_ms) VALUES (?, ?, ?)",
                [(message_id, body, now + ttl_ms) for message_id, body, ttl_ms in results],
            )

    def get(self, message_ids: Sequence[str]) -> dict[str, bytes]:
        if not message_ids:
            return {}
        now = self._store.now_ms()
        marks = ",".join("?" * len(message_ids))
        rows = self._store.read().execute(
            f"SELECT id, body FROM results WHERE id IN ({marks}) AND expires_ms > ?",
            (*message_ids, now),
        )
        return {str(row[0]): bytes(row[1]) for row in rows}
