"""The SQLite ledger's write path: the records of one write (an ack of many runs, a retry,
a poison) are appended as **one** row of ``ledger_appends``, packed, in the transaction
they describe, and folded into ``ledger`` (clustered by subject, numbered per subject,
trimmed to ``keep``) at most once every 5 seconds, by the next write that appends.
Reads take the appends not yet folded (a scan of about 5 seconds of them) before the
folded records.

Why: a row of ``ledger`` per record written at each commit wrote a leaf page per
schedule acked (most of a keyed recurring workload's cost with ``synchronous=full``); a
log row per record then cost the ack's transaction about 3.4 us a record (SQLite's
per-row insert work), one packed row per write about 1 us. A fold touches each
subject's page once and inserts at most ``keep`` of its records however many were
logged. The interval: folding every second cost that workload 15-17% of its throughput
against no ledger, every 4-5 seconds 9-12% (``bench.ledger``, 200 schedules,
``docs/benchmarks.md``); a longer one makes reads scan more and a fold hold the write
lock longer.

Packed form: a JSON header, a list of ``[queue, subject, keep, expires_ms, [length of
each record]]`` (one per entry), a newline, then the records (opaque bytes) back to
back. Rows of ``ledger_log`` (one per record, written by tickwork before 2026-11-25) are
still read and folded, so an upgrade loses nothing."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from pydantic_core import from_json, to_json

from scheduler.backends.records import LedgerEntry

LEDGER_LOG_SCHEMA = """
CREATE TABLE IF NOT EXISTS ledger_appends (
    packed BLOB NOT NULL
);
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


def pack(entries: Iterable[LedgerEntry], now: int) -> bytes:
    """The entries' records in their packed form (see the module's docstring)."""
    header: list[list[Any]] = []
    records: list[bytes] = []
    for entry in entries:
        if entry.records:
            lengths = [len(record) for record in entry.records]
            header.append([entry.queue, entry.subject, entry.keep, now + entry.ttl_ms, lengths])
            records += entry.records
    if not header:
        return b""
    return to_json(header) + b"\n" + b"".join(records)


def unpack(packed: bytes) -> Iterator[tuple[str, str, int, int, list[bytes]]]:
    """Each entry of a packed row, in the order appended: queue, subject, keep,
    expires_ms and its records."""
    at = packed.index(b"\n")
    header = from_json(packed[:at])
    at += 1
    for queue, subject, keep, expires_ms, lengths in header:
        records = []
        for length in lengths:
            records.append(packed[at : at + length])
            at += length
        yield queue, subject, keep, expires_ms, records


def append(db: sqlite3.Connection, entries: Iterable[LedgerEntry], now: int) -> None:
    """Inside a write: append the entries' records to the log, in order, as one row."""
    packed = pack(entries, now)
    if packed:
        db.execute("INSERT INTO ledger_appends (packed) VALUES (?)", (packed,))


def _logged(db: sqlite3.Connection) -> list[tuple[str, str, int, int, list[bytes]]]:
    """Every entry in the log, oldest first: the rows of the one-row-per-record table
    (only an upgrade leaves any), then the packed appends."""
    entries = [
        (queue, subject, keep, expires_ms, [record])
        for queue, subject, keep, expires_ms, record in db.execute(
            "SELECT queue, subject, keep, expires_ms, record FROM ledger_log ORDER BY rowid"
        )
    ]
    for (packed,) in db.execute("SELECT packed FROM ledger_appends ORDER BY rowid"):
        entries += unpack(packed)
    return entries


def fold(db: sqlite3.Connection) -> None:
    """Inside a write: move the log's records into ``ledger``, each subject's numbered
    after its last, then trim each subject written to its newest ``keep`` (records the
    trim would delete at once are not inserted)."""
    by_subject: dict[tuple[str, str], list[tuple[int, int, bytes]]] = {}
    for queue, subject, keep, expires_ms, logged in _logged(db):
        found = by_subject.setdefault((queue, subject), [])
        found += [(keep, expires_ms, record) for record in logged]
    if not by_subject:
        return
    inserts, trims = [], []
    for names, records in by_subject.items():
        (last,) = db.execute(
            "SELECT COALESCE(MAX(seq), 0) FROM ledger WHERE queue = ? AND subject = ?", names
        ).fetchone()
        newest, keep = last + len(records), records[-1][0]
        first = max(last + 1, newest - keep + 1)
        inserts += [
            (*names, seq, expires_ms, record)
            for seq, (_, expires_ms, record) in zip(
                range(first, newest + 1), records[first - last - 1 :], strict=True
            )
        ]
        if newest > keep:
            trims.append((*names, newest - keep))
    db.executemany(
        "INSERT INTO ledger (queue, subject, seq, expires_ms, record) VALUES (?, ?, ?, ?, ?)",
        inserts,
    )
    db.executemany("DELETE FROM ledger WHERE queue = ? AND subject = ? AND seq <= ?", trims)
    db.execute("DELETE FROM ledger_log")
    db.execute("DELETE FROM ledger_appends")


def read_many(
    db: sqlite3.Connection, subjects: Sequence[tuple[str, str]], now: int, limit: int
) -> list[list[bytes]]:
    """The newest ``limit`` live records of each ``(queue, subject)``, newest first: those
    still in the log (one pass over it for all), then the folded ones; no more than the
    newest record's ``keep`` (what the fold will trim to). Run it in one read
    transaction."""
    wanted: dict[tuple[str, str], list[tuple[bytes, int]]] = {s: [] for s in subjects}
    for queue, subject, keep, expires_ms, records in reversed(_logged(db)):
        rows = wanted.get((queue, subject))
        if rows is not None and expires_ms > now:
            rows += [(record, keep) for record in reversed(records)]
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
