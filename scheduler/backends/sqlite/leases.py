"""The SQLite backend's leases: a claim leases a whole batch in one write transaction
(the shard lock), and acks, retries, releases and poisons are fenced by the batch's
token."""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Iterable, Mapping, Sequence

from tickwork.scheduler.backends.records import Failure, LedgerEntry, Waiter
from tickwork.scheduler.backends.roles import Leases
from tickwork.scheduler.backends.sqlite.aging import promote_in
from tickwork.scheduler.backends.sqlite.connection import SQLiteStore
from tickwork.scheduler.backends.sqlite.fairness import make_fair_ready
from tickwork.scheduler.backends.sqlite.limits import SQLiteLimits
from tickwork.scheduler.backends.sqlite.rows import DEADLINE, RETURNED, SOUND, claim_of, order
from tickwork.scheduler.backends.states import READY, SCHEDULED
from tickwork.scheduler.backends.values import Claim, ClaimBatch, Envelope

#: the state a message goes back to: the one given, but a message with a fair-share key
#: waits scheduled (the next claim gives it a new turn: ``fairness.py``)
_UNLESS_FAIR = "CASE WHEN fair IS NULL THEN ? ELSE 0 END"


class SQLiteLeases(Leases):
    """Claims and their settling."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    def claim(
        self,
        queue: str,
        limit: int,
        lookahead_ms: int = 0,
        slots: Mapping[str, int] | None = None,  # slots are taken by Limits.acquire here
    ) -> ClaimBatch:
        now = self._store.now_ms()
        with self._store.write() as db:
            self._requeue_expired(db, queue, now)
            db.execute(
                "UPDATE messages SET state = 1 WHERE queue = ? AND state = 0 AND at_ms <= ? "
                "AND fair IS NULL",
                (queue, now + lookahead_ms),
            )
            make_fair_ready(db, queue, now + lookahead_ms)
            promote_in(db, queue, now)
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
            self._store.count(db, queue, "claimed", len(claims))
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
        self._store.count(db, queue, "redelivered", count)
        return count

    def requeue_expired(self, queue: str) -> int:
        with self._store.write() as db:
            return self._requeue_expired(db, queue, self._store.now_ms())

    def ack(
        self,
        items: Sequence[tuple[Claim, Envelope | None]],
        ledger: Sequence[LedgerEntry | None] = (),
    ) -> list[bool]:
        if not items:
            return []
        with self._store.write() as db:
            return self._ack_in(db, items, ledger)

    def ack_releasing(
        self,
        items: Sequence[tuple[Claim, Envelope | None]],
        held: Sequence[tuple[str, str]],
        ledger: Sequence[LedgerEntry | None] = (),
    ) -> tuple[list[bool], list[Waiter]]:
        """Both in one write transaction."""
        with self._store.write() as db:
            return self._ack_in(db, items, ledger), SQLiteLimits.release_in(db, held)

    def _ack_in(
        self,
        db: sqlite3.Connection,
        items: Sequence[tuple[Claim, Envelope | None]],
        ledger: Sequence[LedgerEntry | None],
    ) -> list[bool]:
        now = self._store.now_ms()
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
                self._store.insert_next(db, nxt, now)
            if index < len(ledger) and (entry := ledger[index]) is not None:
                entries.append(entry)
        for queue, count in acked.items():
            self._store.count(db, queue, "acked", count)
            self._store.add_pending(db, queue, -count)
        if entries:
            self._store.append_ledger_in(db, entries, now)
        return results

    def retry(
        self, claim: Claim, due_ms: int, error: str, ledger: LedgerEntry | None = None
    ) -> bool:
        with self._store.write() as db:
            now = self._store.now_ms()
            state = READY if due_ms <= now else SCHEDULED
            held = (
                db.execute(
                    f"UPDATE messages SET state = {_UNLESS_FAIR}, at_ms = ?, due_ms = ?, "
                    "token = NULL, last_error = ? WHERE id = ? AND token = ?",
                    (state, due_ms, due_ms, error, claim.id, claim.token),
                ).rowcount
                == 1
            )
            self._store.count(db, claim.queue, "retried", int(held))
            if held and ledger is not None:
                self._store.append_ledger_in(db, [ledger], now)
            return held

    def release(self, claims: Iterable[Claim], due_ms: int | None = None) -> int:
        params = [(c.id, c.token) for c in claims]
        if not params:
            return 0
        with self._store.write() as db:
            if due_ms is None:
                return sum(
                    db.execute(
                        "UPDATE messages SET state = 1, at_ms = COALESCE(turn, due_ms), "
                        "token = NULL, attempt = attempt - 1 WHERE id = ? AND token = ?",
                        p,
                    ).rowcount
                    for p in params
                )
            state = READY if due_ms <= self._store.now_ms() else SCHEDULED
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
        deadline = self._store.now_ms() + lease_ms
        with self._store.write() as db:
            return [
                db.execute(
                    "UPDATE messages SET at_ms = ? WHERE id = ? AND token = ?",
                    (deadline, c.id, c.token),
                ).rowcount
                == 1
                for c in claims
            ]

    def poison(
        self,
        claim: Claim,
        failure: Failure,
        next_occurrence: Envelope | None = None,
        ledger: LedgerEntry | None = None,
    ) -> bool:
        with self._store.write() as db:
            row = db.execute(
                "SELECT priority FROM messages WHERE id = ? AND token = ?", (claim.id, claim.token)
            ).fetchone()
            if row is None:
                return False
            db.execute("DELETE FROM messages WHERE id = ?", (claim.id,))
            self._store.add_pending(db, claim.queue, -1)
            db.execute(
                "INSERT OR REPLACE INTO poison (id, queue, key, priority, timeout_ms, attempts, "
                "failed_ms, reason, error_type, error, traceback, body) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    claim.id,
                    claim.queue,
                    claim.key,
                    row[0],
                    claim.timeout_ms,
                    claim.attempt,
                    self._store.now_ms(),
                    failure.reason,
                    failure.error_type,
                    failure.message,
                    failure.traceback,
                    claim.body,
                ),
            )
            self._store.count(db, claim.queue, "poisoned", 1)
            if next_occurrence is not None:
                self._store.insert_next(db, next_occurrence, self._store.now_ms())
            if ledger is not None:
                self._store.append_ledger_in(db, [ledger], self._store.now_ms())
            return True
