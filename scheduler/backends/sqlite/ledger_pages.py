"""The SQLite ledger's folded records: each fold (``ledger_log.fold``) writes a subject's
new records as **one** row of ``ledger_pages`` (a page: the records numbered up to its
``last_seq``, oldest first, packed), and trims the subject to its newest ``keep`` records
by deleting the pages wholly older than that; a page partly older stays, and reads
count records from the newest so they never show one past ``keep``.

Why pages: a row per record would make a fold insert and (once a subject is full)
delete one row per record written since the last fold; a page per subject and fold
does that work once per subject (the measurements are in ``bench/NOTES.md``).

Packed form: a JSON header ``[[expires_ms of each record], [length of each record]]``,
a newline, then the records back to back."""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Iterator, Mapping, Sequence

from pydantic_core import from_json, to_json

LEDGER_PAGES_SCHEMA = """
CREATE TABLE IF NOT EXISTS ledger_pages (
    queue      TEXT NOT NULL,
    subject    TEXT NOT NULL,
    last_seq   INTEGER NOT NULL,
    keep       INTEGER NOT NULL,
    expires_ms INTEGER NOT NULL,
    packed     BLOB NOT NULL,
    PRIMARY KEY (queue, subject, last_seq)
) WITHOUT ROWID;
"""

#: a logged record: the subject's keep when it was written, when it expires, its bytes
Logged = tuple[int, int, bytes]


class NewRecords:
    """One subject's records logged since the last fold, oldest first, as a fold gathers
    them: each one's expiry and length, and their bytes in chunks as they lay in the log
    (an entry's records are back to back there: a chunk each, not a slice per record)."""

    __slots__ = ("chunks", "expiries", "keep", "lengths")

    def __init__(self) -> None:
        self.keep = 1  # that of the newest record
        self.expiries: list[int] = []
        self.lengths: list[int] = []
        self.chunks: list[bytes] = []

    def add(self, keep: int, expires_ms: int, lengths: list[int], chunk: bytes) -> None:
        """Records logged together: their lengths, and ``chunk`` holding them in order."""
        self.keep = keep
        if len(lengths) == 1:  # most: a run's record
            self.expiries.append(expires_ms)
        else:
            self.expiries += [expires_ms] * len(lengths)
        self.lengths += lengths
        self.chunks.append(chunk)


def pack_page(expiries: Sequence[int], lengths: Sequence[int], data: bytes) -> bytes:
    """Records (oldest first; their ``data`` back to back) in a page's packed form."""
    return to_json([expiries, lengths]) + b"\n" + data


def unpack_page(packed: bytes) -> list[tuple[int, bytes]]:
    """A page's records, oldest first, each with the time it expires."""
    at = packed.index(b"\n")
    expiries, lengths = from_json(packed[:at])
    at += 1
    records = []
    for expires_ms, length in zip(expiries, lengths, strict=True):
        records.append((expires_ms, packed[at : at + length]))
        at += length
    return records


def write(db: sqlite3.Connection, by_subject: Mapping[tuple[str, str], NewRecords]) -> None:
    """Inside a write: add each ``(queue, subject)``'s records (oldest first) as one page
    numbered after its last, then trim it to its newest ``keep`` (that of its newest
    record); records the trim would delete at once are not written."""
    pages, trims = [], []
    for (queue, subject), new in by_subject.items():
        count = len(new.lengths)
        if not count:
            continue
        last = _last_seq(db, queue, subject)
        keep = max(1, new.keep)
        newest = last + count
        expiries, lengths, data = new.expiries, new.lengths, b"".join(new.chunks)
        if count > keep:  # the oldest would be trimmed at once
            expiries, lengths = expiries[count - keep :], lengths[count - keep :]
            data = data[len(data) - sum(lengths) :]
        page = pack_page(expiries, lengths, data)
        pages.append((queue, subject, newest, keep, max(expiries), page))
        if newest > keep:
            trims.append((queue, subject, newest - keep))
    db.executemany(
        "INSERT INTO ledger_pages (queue, subject, last_seq, keep, expires_ms, packed) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        pages,
    )
    db.executemany(
        "DELETE FROM ledger_pages WHERE queue = ? AND subject = ? AND last_seq <= ?", trims
    )


def _last_seq(db: sqlite3.Connection, queue: str, subject: str) -> int:
    """The number of ``subject``'s newest folded record (0 if none)."""
    (last,) = db.execute(
        "SELECT COALESCE(MAX(last_seq), 0) FROM ledger_pages WHERE queue = ? AND subject = ?",
        (queue, subject),
    ).fetchone()
    return int(last)


def read(
    db: sqlite3.Connection,
    queue: str,
    subject: str,
    logged: Sequence[Logged],
    now: int,
    limit: int,
) -> list[bytes]:
    """The newest ``limit`` live records of ``subject``, newest first: ``logged`` (those
    not folded yet, newest first), then the folded ones; none past the newest ``keep``
    (the newest record's), which a fold may leave in a page it did not delete whole.
    Run it in a read transaction."""
    newest_first = itertools.chain(logged, _folded(db, queue, subject))
    first = next(newest_first, None)
    if first is None:
        return []
    kept = itertools.islice(itertools.chain([first], newest_first), first[0])
    live = (bytes(record) for _, expires_ms, record in kept if expires_ms > now)
    return list(itertools.islice(live, limit))


def _folded(db: sqlite3.Connection, queue: str, subject: str) -> Iterator[Logged]:
    """``subject``'s folded records, newest first."""
    pages = db.execute(
        "SELECT keep, packed FROM ledger_pages WHERE queue = ? AND subject = ? "
        "ORDER BY last_seq DESC",
        (queue, subject),
    ).fetchall()
    for keep, packed in pages:
        for expires_ms, record in reversed(unpack_page(packed)):
            yield keep, expires_ms, record
