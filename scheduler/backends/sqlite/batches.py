"""The SQLite backend's batches: a row of ``batches`` per batch (its description and
counts) and a row of ``batch_members`` per settled member. A member's outcome and the
count it adds are written in one transaction, and only when the member's row is new, so
a redelivered run never counts twice. Expired rows are deleted at most once a second and
never read."""

from __future__ import annotations

from collections.abc import Sequence

from tickwork.scheduler.backends.records import BatchRecord, MemberOutcome
from tickwork.scheduler.backends.roles import Batches
from tickwork.scheduler.backends.sqlite.connection import SQLiteStore


class SQLiteBatches(Batches):
    """Descriptions, counts and member outcomes of batches."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    def open(self, batch_id: str, description: bytes, expires_ms: int) -> None:
        with self._store.write() as db:
            self._store.prune(db, "batches", "expires_ms", self._store.now_ms())
            db.execute(
                "INSERT INTO batches (id, description, settled, failed, expires_ms) "
                "VALUES (?, ?, 0, 0, ?) ON CONFLICT (id) DO UPDATE SET "
                "description = excluded.description, expires_ms = excluded.expires_ms",
                (batch_id, description, expires_ms),
            )

    def settle(self, outcomes: Sequence[MemberOutcome]) -> list[tuple[int, int]]:
        if not outcomes:
            return []
        counts = []
        with self._store.write() as db:
            self._store.prune(db, "batch_members", "expires_ms", self._store.now_ms())
            for o in outcomes:
                added = db.execute(
                    "INSERT OR IGNORE INTO batch_members "
                    "(batch, member, failed, outcome, expires_ms) VALUES (?, ?, ?, ?, ?)",
                    (o.batch, o.member, int(o.failed), o.outcome, o.expires_ms),
                ).rowcount
                row = db.execute(
                    "INSERT INTO batches (id, description, settled, failed, expires_ms) "
                    "VALUES (?, NULL, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
                    "settled = settled + excluded.settled, failed = failed + excluded.failed "
                    "RETURNING settled, failed",
                    (o.batch, added, added * int(o.failed), o.expires_ms),
                ).fetchone()
                counts.append((int(row[0]), int(row[1])))
        return counts

    def read(self, batch_id: str, outcomes: bool = True) -> BatchRecord | None:
        db = self._store.read()
        now = self._store.now_ms()
        row = db.execute(
            "SELECT description, settled, failed FROM batches WHERE id = ? AND expires_ms > ?",
            (batch_id, now),
        ).fetchone()
        if row is None:
            return None
        found: dict[int, bytes] = {}
        if outcomes:
            rows = db.execute(
                "SELECT member, outcome FROM batch_members WHERE batch = ? AND expires_ms > ?",
                (batch_id, now),
            )
            found = {int(member): bytes(outcome) for member, outcome in rows}
        description = None if row[0] is None else bytes(row[0])
        return BatchRecord(description, int(row[1]), int(row[2]), found)
