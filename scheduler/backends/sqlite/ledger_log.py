"""The SQLite ledger's write path: the records of one write (an ack of many runs, a retry,
a poison) are appended as **one** row of ``ledger_writes``, packed, in the transaction
they describe, and folded into the ledger's pages (``ledger_pages.py``: clustered by
subject, numbered per subject, trimmed to ``keep``) at most once every 5 seconds, after
the next write that appends: the log is read and gathered by subject with no lock held
(``gather``), then a short write checks that no other fold took those rows meanwhile and
writes the pages (``fold_gathered``).
Reads take the appends not yet folded (a scan of about 5 seconds of them) before the
folded records.

Why: a row per record written at each commit writes a leaf page per schedule acked, and
a fold gathered inside the write would hold this process's writes for its Python work;
the interval trades the ledger's cost against how long records wait in the log (the
measurements are in ``bench/NOTES.md``).

Packed form: a JSON header, a list of ``[queue, subject, keep, expires_ms, [length of
each record]]`` (one per entry), a newline, then the records (opaque bytes) back to
back. ``ledger_writes`` numbers its rows with AUTOINCREMENT, so a number is never reused
and a fold can tell its rows are still there."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from pydantic_core import from_json, to_json

from tickwork.scheduler.backends.records import LedgerEntry
from tickwork.scheduler.backends.sqlite import ledger_pages
from tickwork.scheduler.backends.sqlite.ledger_pages import Logged, NewRecords
from tickwork.scheduler.errors import BackendError

log = logging.getLogger("tickwork.sqlite")

LEDGER_LOG_SCHEMA = """
CREATE TABLE IF NOT EXISTS ledger_writes (
    id     INTEGER PRIMARY KEY AUTOINCREMENT,
    packed BLOB NOT NULL
);
"""

#: records wait in the log at most about this long before a write folds them
FOLD_EVERY_MS = 5000


def pack(entries: Iterable[LedgerEntry], now: int) -> bytes:
    """The entries' records in their packed form (see the module's docstring)."""
    header: list[list[Any]] = []
    records: list[bytes] = []
    for queue, subject, logged, keep, ttl_ms in entries:
        if logged:
            header.append([queue, subject, keep, now + ttl_ms, list(map(len, logged))])
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
        db.execute("INSERT INTO ledger_writes (packed) VALUES (?)", (packed,))


def _logged(db: sqlite3.Connection) -> list[tuple[str, str, int, int, list[bytes]]]:
    """Every entry in the log, oldest first."""
    entries: list[tuple[str, str, int, int, list[bytes]]] = []
    for (packed,) in db.execute("SELECT packed FROM ledger_writes ORDER BY id"):
        entries += unpack(packed)
    return entries


@dataclass(frozen=True)
class Gathered:
    """The log's packed writes numbered ``first`` to ``last`` (``rows`` of them) gathered
    by subject."""

    first: int
    last: int
    rows: int
    by_subject: dict[tuple[str, str], NewRecords]


def gather(db: sqlite3.Connection) -> Gathered | None:
    """The log read and gathered by subject (no lock needed: one read), or None when it
    is empty."""
    rows = db.execute("SELECT id, packed FROM ledger_writes ORDER BY id").fetchall()
    if not rows:
        return None
    by_subject: dict[tuple[str, str], NewRecords] = {}
    for _, packed in rows:
        _gather_packed(by_subject, packed)
    return Gathered(rows[0][0], rows[-1][0], len(rows), by_subject)


def fold_gathered(db: sqlite3.Connection, gathered: Gathered) -> bool:
    """Inside a write: move ``gathered``'s records into the ledger's pages
    (``ledger_pages.write``) and delete them from the log; False, writing nothing, when
    another fold took some of them since."""
    (present,) = db.execute(
        "SELECT COUNT(*) FROM ledger_writes WHERE id BETWEEN ? AND ?",
        (gathered.first, gathered.last),
    ).fetchone()
    if present != gathered.rows:
        return False
    ledger_pages.write(db, gathered.by_subject)
    db.execute("DELETE FROM ledger_writes WHERE id <= ?", (gathered.last,))
    return True


def fold_apart(
    db: sqlite3.Connection, write: Callable[[], AbstractContextManager[sqlite3.Connection]]
) -> None:
    """Fold the log with no write open: ``gather`` on ``db``, then ``fold_gathered`` in
    ``write()``. On an error the records stay logged for the next fold (the write that
    found the fold due has committed: its caller is not told of it)."""
    try:
        gathered = gather(db)
        if gathered is not None:
            with write() as writing:
                fold_gathered(writing, gathered)
    except (sqlite3.Error, BackendError, ValueError) as err:  # ValueError: a damaged row
        log.warning("cannot fold the ledger's log (the next fold will): %s", err)


def fold(db: sqlite3.Connection) -> None:
    """Inside a write: ``gather`` and ``fold_gathered`` at once."""
    gathered = gather(db)
    if gathered is not None:
        fold_gathered(db, gathered)


def _gather_packed(by_subject: dict[tuple[str, str], NewRecords], packed: bytes) -> None:
    """Add a packed row's records to ``by_subject``: one chunk per entry, cut from the row
    as it lies (not a slice and a tuple per record)."""
    at = packed.index(b"\n")
    header = from_json(packed[:at])
    at += 1
    for queue, subject, keep, expires_ms, lengths in header:
        found = by_subject.get((queue, subject))
        if found is None:
            found = by_subject[(queue, subject)] = NewRecords()
        size = lengths[0] if len(lengths) == 1 else sum(lengths)
        found.add(keep, expires_ms, lengths, packed[at : at + size])
        at += size


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
