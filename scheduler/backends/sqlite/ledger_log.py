"""The SQLite ledger's write path: the records of one write (an ack of many runs, a retry,
a poison) are appended as **one** row of ``ledger_appends``, packed, in the transaction
they describe, and folded into the ledger's pages (``ledger_pages.py``: clustered by
subject, numbered per subject, trimmed to ``keep``) at most once every 5 seconds, by the
next write that appends.
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
from scheduler.backends.sqlite import ledger_pages
from scheduler.backends.sqlite.ledger_pages import Logged, NewRecords

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
    for queue, subject, logged, keep, ttl_ms in entries:
        if len(logged) == 1:  # most: a run's record
            header.append([queue, subject, keep, now + ttl_ms, [len(logged[0])]])
            records.append(logged[0])
        elif logged:
            header.append([queue, subject, keep, now + ttl_ms, [len(r) for r in logged]])
            records += logged
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
    """Inside a write: move the log's records into the ledger's pages, one page per
    subject (``ledger_pages.write``), and empty the log. (It walks each packed row's
    header and cuts one chunk per entry: 4.5 -> 2.9 us a record against unpacking each.)"""
    by_subject: dict[tuple[str, str], NewRecords] = {}
    for queue, subject, keep, expires_ms, record in db.execute(
        "SELECT queue, subject, keep, expires_ms, record FROM ledger_log ORDER BY rowid"
    ):
        by_subject.setdefault((queue, subject), NewRecords()).add(
            keep, expires_ms, [len(record)], record
        )
    for (packed,) in db.execute("SELECT packed FROM ledger_appends ORDER BY rowid"):
        at = packed.index(b"\n")
        header = from_json(packed[:at])
        at += 1
        for queue, subject, keep, expires_ms, lengths in header:
            found = by_subject.get((queue, subject))
            if found is None:
                found = by_subject[(queue, subject)] = NewRecords()
            found.keep = keep
            if len(lengths) == 1:  # most: a run's record (inlined: a fold's hot loop)
                size = lengths[0]
                found.expiries.append(expires_ms)
                found.lengths.append(size)
            else:
                size = sum(lengths)
                found.expiries += [expires_ms] * len(lengths)
                found.lengths += lengths
            found.chunks.append(packed[at : at + size])
            at += size
    if not by_subject:
        return
    ledger_pages.write(db, by_subject)
    db.execute("DELETE FROM ledger_log")
    db.execute("DELETE FROM ledger_appends")


def read_many(
    db: sqlite3.Connection, subjects: Sequence[tuple[str, str]], now: int, limit: int
) -> list[list[bytes]]:
    """The newest ``limit`` live records of each ``(queue, subject)``, newest first: those
    still in the log (one pass over it for all), then the folded ones
    (``ledger_pages.read``). Run it in one read transaction."""
    wanted: dict[tuple[str, str], list[Logged]] = {s: [] for s in subjects}
    for queue, subject, keep, expires_ms, records in reversed(_logged(db)):
        rows = wanted.get((queue, subject))
        if rows is not None:
            rows += [(keep, expires_ms, record) for record in reversed(records)]
    return [ledger_pages.read(db, *s, wanted[s], now, limit) for s in subjects]
