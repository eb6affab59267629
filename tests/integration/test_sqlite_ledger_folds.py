"""SQLite's ledger folded by several processes at once: each gathers the log with no lock
held, so two may gather the same rows; every record must still be read exactly once,
in the order its writer wrote it (a Jepsen-style count over all writers)."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from tickwork.scheduler.backends import LedgerEntry
from tickwork.scheduler.backends.sqlite import SQLiteBackend, ledger_log

WRITERS = 3
WRITES = 150
SUBJECTS = ("k:a", "k:b", "k:c", "k:d")
KEEP = 10_000  # nothing trimmed: every record written is read back


def _write(path: str, writer: int) -> None:
    """Append ``WRITES`` entries to every subject, folding after each write."""
    ledger_log.FOLD_EVERY_MS = 0  # this process folds after every write that appends
    backend = SQLiteBackend(path)
    try:
        for index in range(WRITES):
            backend.ledger.append(
                [
                    LedgerEntry(
                        "q",
                        subject,
                        (b"%d:%d:%s" % (writer, index, subject.encode()),),
                        KEEP,
                        3_600_000,
                    )
                    for subject in SUBJECTS
                ]
            )
    finally:
        backend.close()


def test_records_folded_by_several_processes_at_once_read_once_each_in_order(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "ledger.db")
    SQLiteBackend(path).close()  # the schema, before the writers race to make it
    context = multiprocessing.get_context("fork")
    writers = [context.Process(target=_write, args=(path, w)) for w in range(WRITERS)]
    for process in writers:
        process.start()
    for process in writers:
        process.join(120)
        assert process.exitcode == 0
    backend = SQLiteBackend(path)
    try:
        with backend.store.write() as db:
            ledger_log.fold(db)  # whatever the last folds left in the log
            assert db.execute("SELECT COUNT(*) FROM ledger_writes").fetchone() == (0,)
        for subject in SUBJECTS:
            records = backend.ledger.read("q", subject, KEEP)
            assert len(records) == len(set(records)) == WRITERS * WRITES, subject
            for writer in range(WRITERS):
                mine = [r for r in records if r.startswith(b"%d:" % writer)]
                indexes = [int(r.split(b":")[1]) for r in mine]
                assert indexes == list(range(WRITES - 1, -1, -1)), (subject, writer)
    finally:
        backend.close()
