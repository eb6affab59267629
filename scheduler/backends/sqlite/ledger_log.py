"""The SQLite ledger's write path: records are appended to ``ledger_log`` (a rowid table
with no other index, so an ack's records touch only its last page) in the transaction of
the ack, retry or poison they describe, and folded into ``ledger`` (clustered by subject,
numbered per subject, trimmed to ``keep``) at most once every 5 seconds, by the next
write that appends. Before, every commit wrote a leaf page of ``ledger`` per schedule it
acked: with ``synchronous=full`` those pages were most of a keyed recurring workload's
cost. A fold touches each schedule's page once per fold instead of once per batch, and
inserts at most ``keep`` records of a subject however many were logged. Reads take the
log's rows of a subject (a scan of the log: about 5 seconds of records) before the
folded ones.

The interval: folding every second cost a keyed recurring workload that writes a record
per ack 15-17% of its throughput, every 4-5 seconds 9-11% (``bench.ledger``, 200
schedules; ``docs/benchmarks.md``); a longer one makes reads scan more of the log and a
fold hold the write lock longer."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence

from scheduler.backends.records import LedgerEntry

LEDGER_LOG_SCHEMA = """
CREATE TABLE IF NOT EXISTS ledger_log (
    queue      TEXT NOT NULL,
    subject    TEXT NOT NULL,
    keep       INTEGER NOT NULL,
    expires_ms INTEGER NOT NULL,
    record     BLOB NOT NULL
);
"""

#: records wait in the log at most about this long before a write folds them
FOLD_EVERY_MS = 5000


def append(db: sqlite3.Connection, entries: Iterable[LedgerEntry], now: int) -> None:
    """Inside a write: append each entry's records to the log, in order."""
    db.executemany(
        "INSERT INTO ledger_log (queue, subject, keep, expires_ms, record) VALUES (?, ?, ?, ?, ?)",
        [
            (entry.queue, entry.subject, entry.keep, now + entry.ttl_ms, record)
            for entry in entries
            for record in entry.records
        ],
    )


def fold(db: sqlite3.Connection) -> None:
    """Inside a write: move the log's records into ``ledger``, each subject's numbered
    after its last, then trim each subject written to its newest ``keep`` (records the
    trim would delete at once are not inserted)."""
    rows = db.execute(
        "SELECT rowid, queue, subject, keep, expires_ms, record FROM ledger_log ORDER BY rowid"
    ).fetchall()
    if not rows:
        return
    by_subject: dict[tuple[str, str], list[tuple[int, int, bytes]]] = {}
    for _, queue, subject, keep, expires_ms, record in rows:
        by_subject.setdefault((queue, subject), []).append((keep, expires_ms, record))
    inserts, trims = [], []
    for subject, records in by_subject.items():
        (last,) = db.execute(
            "SELECT COALESCE(MAX(seq), 0) FROM ledger WHERE queue = ? AND subject = ?", subject
        ).fetchone()
        newest, keep = last + len(records), records[-1][0]
        first = max(last + 1, newest - keep + 1)
        inserts += [
            (*subject, seq, expires_ms, record)
            for seq, (_, expires_ms, record) in zip(
                range(first, newest + 1), records[first - last - 1 :], strict=True
            )
        ]
        if newest > keep:
            trims.append((*subject, newest - keep))
    db.executemany(
        "INSERT INTO ledger (queue, subject, seq, expires_ms, record) VALUES (?, ?, ?, ?, ?)",
        inserts,
    )
    db.executemany("DELETE FROM ledger WHERE queue = ? AND subject = ? AND seq <= ?", trims)
    db.execute("DELETE FROM ledger_log WHERE rowid <= ?", (rows[-1][0],))


def read(db: sqlite3.Connection, queue: str, subject: str, now: int, limit: int) -> list[bytes]:
    """The newest ``limit`` live records of a subject, newest first: those still in the
    log, then the folded ones; no more than the newest record's ``keep`` (what the fold
    will trim to)."""
    rows = db.execute(
        "SELECT record, keep FROM ledger_log WHERE queue = ? AND subject = ? AND expires_ms > ? "
        "ORDER BY rowid DESC LIMIT ?",
        (queue, subject, now, limit),
    ).fetchall()
    return _with_folded(db, queue, subject, now, limit, rows)


def read_many(
    db: sqlite3.Connection, subjects: Sequence[tuple[str, str]], now: int, limit: int
) -> list[list[bytes]]:
    """``read`` for each ``(queue, subject)``, in order, with one pass over the log."""
    wanted: dict[tuple[str, str], list[tuple[bytes, int]]] = {s: [] for s in subjects}
    for queue, subject, record, keep in db.execute(
        "SELECT queue, subject, record, keep FROM ledger_log WHERE expires_ms > ? "
        "ORDER BY rowid DESC",
        (now,),
    ):
        rows = wanted.get((queue, subject))
        if rows is not None:
            rows.append((record, keep))
    return [_with_folded(db, *s, now, limit, wanted[s]) for s in subjects]


def _with_folded(
    db: sqlite3.Connection,
    queue: str,
    subject: str,
    now: int,
    limit: int,
    rows: Sequence[tuple[bytes, int]],
) -> list[bytes]:
    """A subject's log ``rows`` (record, keep; newest first), then its folded records."""
    if rows:
        limit = min(limit, rows[0][1])
    pending = [bytes(row[0]) for row in rows[:limit]]
    if len(pending) >= limit:
        return pending
    folded = db.execute(
        "SELECT record FROM ledger WHERE queue = ? AND subject = ? AND expires_ms > ? "
        "ORDER BY seq DESC LIMIT ?",
        (queue, subject, now, limit - len(pending)),
    )
    return pending + [bytes(row[0]) for row in folded]
