"""The SQLite backend: read, cancel, claim and settle (``connection.py`` holds the schema
and connections, ``producing.py`` enqueue, ``bounds.py`` the bounds of queues, ``admin.py``
the poison queue and statistics)."""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from urllib.parse import urlsplit

from scheduler.backends.base import (
    Backend,
    Claim,
    ClaimBatch,
    Envelope,
    StoredMessage,
)
from scheduler.backends.options import parse_options
from scheduler.backends.records import LedgerEntry, Waiter
from scheduler.backends.sqlite.admin import SQLiteAdmin
from scheduler.backends.sqlite.batches import SQLiteBatches
from scheduler.backends.sqlite.connection import COLUMNS, SQLiteOptions, stored_message
from scheduler.backends.sqlite.fairness import make_fair_ready
from scheduler.backends.sqlite.ledger import SQLiteLedger
from scheduler.backends.sqlite.limits import SQLiteLimits
from scheduler.backends.sqlite.producing import SQLiteProducing
from scheduler.backends.sqlite.rates import SQLiteRates
from scheduler.backends.sqlite.registry import SQLiteRegistry
from scheduler.backends.sqlite.results import SQLiteResults
from scheduler.backends.sqlite.rows import (
    DEADLINE,
    READY,
    RETURNED,
    SCHEDULED,
    SOUND,
    claim_of,
    order,
)
from scheduler.clock import Clock
from scheduler.errors import ConfigurationError

#: the state a message goes back to: the one given, but a message with a fair-share key
#: waits scheduled (the next claim gives it a new turn: ``fairness.py``)
_UNLESS_FAIR = "CASE WHEN fair IS NULL THEN ? ELSE 0 END"


class SQLiteBackend(
    SQLiteProducing,
    SQLiteAdmin,
    SQLiteLimits,
    SQLiteRates,
    SQLiteResults,
    SQLiteRegistry,
    SQLiteBatches,
    SQLiteLedger,
    Backend,
):
    """SQLite storage. One connection per thread; all of them share the file."""

    @classmethod
    def from_url(cls, url: str, clock: Clock | None = None) -> SQLiteBackend:
        parts = urlsplit(url)
        path = parts.netloc + parts.path if parts.netloc else parts.path
        if path.startswith("/") and not path.startswith("//") and parts.netloc == "":
            path = path[1:]  # sqlite:///rel.db -> rel.db ; sqlite:////abs.db -> /abs.db
        if not path:
            raise ConfigurationError(
                f"SQLite URL {url!r} names no file (sqlite:///path/to/file.db)"
            )
        options = parse_options(SQLiteOptions, url, "SQLite")
        return cls(
            path,
            synchronous=options.synchronous,
            busy_timeout_ms=options.busy_timeout_ms,
            clock=clock,
        )

    # -- reading and cancelling ----------------------------------------------------------

    def get(self, message_id: str, queue: str | None = None) -> StoredMessage | None:
        sql = f"SELECT {COLUMNS} FROM messages WHERE id = ?"
        params: tuple[str, ...] = (message_id,)
        if queue is not None:
            sql += " AND queue = ?"
            params += (queue,)
        row = self._read().execute(sql, params).fetchone()
        return None if row is None else stored_message(row)

    def get_by_key(self, queue: str, key: str) -> StoredMessage | None:
        row = (
            self._read()
            .execute(f"SELECT {COLUMNS} FROM messages WHERE queue = ? AND key = ?", (queue, key))
            .fetchone()
        )
        return None if row is None else stored_message(row)

    def delete(self, message_id: str, queue: str | None = None) -> bool:
        with self._write() as db:
            if queue is None:
                row = db.execute(
                    "DELETE FROM messages WHERE id = ? RETURNING queue", (message_id,)
                ).fetchone()
            else:
                row = db.execute(
                    "DELETE FROM messages WHERE id = ? AND queue = ? RETURNING queue",
                    (message_id, queue),
                ).fetchone()
            if row is not None:
                self._add_pending(db, row[0], -1)
            return row is not None

    def delete_by_key(self, queue: str, key: str) -> bool:
        with self._write() as db:
            cursor = db.execute("DELETE FROM messages WHERE queue = ? AND key = ?", (queue, key))
            self._add_pending(db, queue, -cursor.rowcount)
            return cursor.rowcount > 0

    def keyed(self, queue: str | None = None) -> list[StoredMessage]:
        sql = f"SELECT {COLUMNS} FROM messages WHERE key IS NOT NULL"
        params: tuple[str, ...] = ()
        if queue is not None:
            sql += " AND queue = ?"
            params = (queue,)
        rows = self._read().execute(sql + " ORDER BY queue, key", params)
        return [stored_message(row) for row in rows]

    # -- consuming -----------------------------------------------------------------------

    def claim(
        self,
        queue: str,
        limit: int,
        lookahead_ms: int = 0,
        slots: Mapping[str, int] | None = None,  # slots are taken by acquire_slots here
    ) -> ClaimBatch:
        now = self.now_ms()
        with self._write() as db:
            self._requeue_expired(db, queue, now)
            db.execute(
                "UPDATE messages SET state = 1 WHERE queue = ? AND state = 0 AND at_ms <= ? "
                "AND fair IS NULL",
                (queue, now + lookahead_ms),
            )
            make_fair_ready(db, queue, now + lookahead_ms)
            # one statement leases the whole batch; the batch's token fences each message
            # (a message is in at most one live batch, so a per-batch token is enough)
            token = secrets.token_hex(8)
            rows = (
                db.execute(
                    "UPDATE messages SET state = 2, token = ?, attempt = attempt + 1, "
                    f"at_ms = {DEADLINE} WHERE rowid IN ("
                    "SELECT rowid FROM messages WHERE queue = ? AND state = 1 "
                    "ORDER BY priority DESC, at_ms LIMIT ?) "
                    f"RETURNING {RETURNED}, {SOUND}",
                    (token, now, now, queue, limit),
                ).fetchall()
                if limit > 0
                else []
            )
            rows.sort(key=order)  # RETURNING order is unspecified
            claims = [claim_of(row, queue, token) for row in rows]
            self._count(db, queue, "claimed", len(claims))
            next_due = None
            if not claims:
                next_due = db.execute(
                    "SELECT MIN(at) FROM ("
                    "SELECT MIN(at_ms) AS at FROM messages WHERE queue = ? AND state = 0 "
                    "UNION ALL "
                    "SELECT MIN(at_ms) FROM messages WHERE queue = ? AND state = 2)",
                    (queue, queue),
                ).fetchone()[0]
        return ClaimBatch(claims, next_due)

    def _requeue_expired(self, db: sqlite3.Connection, queue: str, now: int) -> int:
        count = db.execute(
            "UPDATE messages SET state = 1, at_ms = COALESCE(turn, due_ms), token = NULL "
            "WHERE queue = ? AND state = 2 AND at_ms <= ?",
            (queue, now),
        ).rowcount
        self._count(db, queue, "redelivered", count)
        return count

    def requeue_expired(self, queue: str) -> int:
        with self._write() as db:
            return self._requeue_expired(db, queue, self.now_ms())

    def ack(
        self,
        items: Sequence[tuple[Claim, Envelope | None]],
        ledger: Sequence[LedgerEntry | None] = (),
    ) -> list[bool]:
        if not items:
            return []
        with self._write() as db:
            return self._ack_in(db, items, ledger)

    def ack_releasing(
        self,
        items: Sequence[tuple[Claim, Envelope | None]],
        held: Sequence[tuple[str, str]],
        ledger: Sequence[LedgerEntry | None] = (),
    ) -> tuple[list[bool], list[Waiter]]:
        """Both in one write transaction."""
        with self._write() as db:
            return self._ack_in(db, items, ledger), self._release_slots_in(db, held)

    def _ack_in(
        self,
        db: sqlite3.Connection,
        items: Sequence[tuple[Claim, Envelope | None]],
        ledger: Sequence[LedgerEntry | None],
    ) -> list[bool]:
        now = self.now_ms()
        results = []
        acked: dict[str, int] = {}
        entries: list[LedgerEntry] = []
        for index, (claim, nxt) in enumerate(items):
            held = (
                db.execute(
                    "DELETE FROM messages WHERE id = ? AND token = ?", (claim.id, claim.token)
                ).rowcount
                == 1
            )
            results.append(held)
            if not held:
                continue
            acked[claim.queue] = acked.get(claim.queue, 0) + 1
            if nxt is not None:
                self._insert_next(db, nxt, now)
            if index < len(ledger) and (entry := ledger[index]) is not None:
                entries.append(entry)
        for queue, count in acked.items():
            self._count(db, queue, "acked", count)
            self._add_pending(db, queue, -count)
        if entries:
            self._append_ledger_in(db, entries, now)
        return results

    def retry(
        self, claim: Claim, due_ms: int, error: str, ledger: LedgerEntry | None = None
    ) -> bool:
        with self._write() as db:
            now = self.now_ms()
            state = READY if due_ms <= now else SCHEDULED
            held = (
                db.execute(
                    f"UPDATE messages SET state = {_UNLESS_FAIR}, at_ms = ?, due_ms = ?, "
                    "token = NULL, last_error = ? WHERE id = ? AND token = ?",
                    (state, due_ms, due_ms, error, claim.id, claim.token),
                ).rowcount
                == 1
            )
            self._count(db, claim.queue, "retried", int(held))
            if held and ledger is not None:
                self._append_ledger_in(db, [ledger], now)
            return held

    def release(self, claims: Iterable[Claim], due_ms: int | None = None) -> int:
        params = [(c.id, c.token) for c in claims]
        if not params:
            return 0
        with self._write() as db:
            if due_ms is None:
                return sum(
                    db.execute(
                        "UPDATE messages SET state = 1, at_ms = COALESCE(turn, due_ms), "
                        "token = NULL, attempt = attempt - 1 WHERE id = ? AND token = ?",
                        p,
                    ).rowcount
                    for p in params
                )
            state = READY if due_ms <= self.now_ms() else SCHEDULED
            return sum(
                db.execute(
                    f"UPDATE messages SET state = {_UNLESS_FAIR}, at_ms = ?, due_ms = ?, "
                    "token = NULL, attempt = attempt - 1 WHERE id = ? AND token = ?",
                    (state, due_ms, due_ms, *p),
                ).rowcount
                for p in params
            )

    def extend(self, claims: Sequence[Claim], lease_ms: int) -> list[bool]:
        if not claims:
            return []
        deadline = self.now_ms() + lease_ms
        with self._write() as db:
            return [
                db.execute(
                    "UPDATE messages SET at_ms = ? WHERE id = ? AND token = ?",
                    (deadline, c.id, c.token),
                ).rowcount
                == 1
                for c in claims
            ]
