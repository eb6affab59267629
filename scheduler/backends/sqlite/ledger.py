"""The SQLite backend's occurrence ledger: one row per record in ``ledger``, clustered by
subject and numbered in write order (``seq``), each with the time it expires; a subject
keeps its newest ``keep`` rows (trimmed as it is appended to, in the same transaction as
the ack, retry or poison it describes: ``SQLiteStore._append_ledger_in``)."""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.backends.records import LedgerEntry
from scheduler.backends.sqlite.connection import SQLiteStore


class SQLiteLedger(SQLiteStore):
    """The ledger operations of the contract."""

    def append_ledger(self, entries: Sequence[LedgerEntry]) -> None:
        if not entries:
            return
        with self._write() as db:
            self._append_ledger_in(db, entries, self.now_ms())

    def read_ledger(self, queue: str, subject: str, limit: int = 100) -> list[bytes]:
        rows = self._read().execute(
            "SELECT record FROM ledger WHERE queue = ? AND subject = ? AND expires_ms > ? "
            "ORDER BY seq DESC LIMIT ?",
            (queue, subject, self.now_ms(), limit),
        )
        return [bytes(row[0]) for row in rows]
