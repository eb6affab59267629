"""The SQLite backend's occurrence ledger: pages of records in ``ledger_pages``
(``ledger_pages.py``), clustered by subject and numbered in write order, each record with
the time it expires; a subject keeps its newest ``keep`` records. Records are written in
the same transaction as the ack, retry or poison they describe, to a log folded into the
pages every few seconds (``ledger_log.py``); reads take both."""

from __future__ import annotations

from collections.abc import Sequence

from tickwork.scheduler.backends.records import LedgerEntry
from tickwork.scheduler.backends.roles import Ledger
from tickwork.scheduler.backends.sqlite import ledger_log
from tickwork.scheduler.backends.sqlite.connection import SQLiteStore


class SQLiteLedger(Ledger):
    """The ledger operations of the contract."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    def append(self, entries: Sequence[LedgerEntry]) -> None:
        if not entries:
            return
        with self._store.write() as db:
            self._store.append_ledger_in(db, entries, self._store.now_ms())

    def read(self, queue: str, subject: str, limit: int = 100) -> list[bytes]:
        return self.read_many([(queue, subject)], limit)[0]

    def read_many(self, subjects: Sequence[tuple[str, str]], limit: int = 100) -> list[list[bytes]]:
        """The log and the folded rows read in one read transaction: a fold between the
        two reads would otherwise show its records twice (in both) or not at all."""
        db = self._store.read()
        db.execute("BEGIN")
        try:
            return ledger_log.read_many(db, subjects, self._store.now_ms(), limit)
        finally:
            db.execute("COMMIT")
