"""The PostgreSQL backend's leases: a claim leases a whole batch in one round trip
(``tw.claim``, a function of the schema) with ``FOR UPDATE SKIP LOCKED`` (workers
claiming at once take different rows and never wait for each other); acks, retries,
releases and poisons are fenced by the batch's token, and a plain ack is one
statement."""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tickwork.scheduler.backends.postgres import ledger as ledger_rows
from tickwork.scheduler.backends.postgres.aging import AGE, ages, aging_columns
from tickwork.scheduler.backends.postgres.fairness import make_fair_ready
from tickwork.scheduler.backends.postgres.limits import release_in
from tickwork.scheduler.backends.postgres.notify import SOON_MS, announce, announce_queues
from tickwork.scheduler.backends.postgres.rows import (
    INSERT_MANY,
    RETURNED,
    claim_of,
    insert_columns,
    order,
)
from tickwork.scheduler.backends.postgres.store import Connection, PostgresStore
from tickwork.scheduler.backends.records import Failure, LedgerEntry, Waiter
from tickwork.scheduler.backends.roles import Leases
from tickwork.scheduler.backends.states import READY, SCHEDULED
from tickwork.scheduler.backends.values import Claim, ClaimBatch, Envelope

#: the state a message goes back to: the one given, but a message with a fair-share key
#: waits scheduled (the next claim gives it a new turn: ``fairness.py``)
_UNLESS_FAIR = "CASE WHEN fair IS NULL THEN %s ELSE 0 END"

# Rows are picked in a MATERIALIZED common table expression, never in ``WHERE id IN
# (SELECT ... LIMIT n FOR UPDATE SKIP LOCKED)``: the planner may run such a subquery more
# than once, and with SKIP LOCKED each run picks other rows (more than n in all).
_EXPIRE = (
    "WITH picked AS MATERIALIZED (SELECT id FROM tw.messages WHERE queue = %s AND state = 2 "
    "AND at_ms <= %s FOR UPDATE SKIP LOCKED) "
    "UPDATE tw.messages AS m SET state = 1, at_ms = COALESCE(m.turn, m.due_ms), token = NULL "
    "FROM picked WHERE m.id = picked.id"
)

_CLAIM = (
    "WITH picked AS MATERIALIZED (SELECT id FROM tw.messages WHERE queue = %s AND state = 1 "
    "ORDER BY priority DESC, at_ms, id LIMIT %s FOR UPDATE SKIP LOCKED) "
    "UPDATE tw.messages AS m SET state = 2, token = %s, attempt = m.attempt + 1, "
    "at_ms = GREATEST(%s, m.due_ms) + m.timeout_ms FROM picked WHERE m.id = picked.id "
    f"RETURNING {', '.join('m.' + c.strip() for c in RETURNED.split(','))}"
)

#: acks without a next occurrence or a ledger entry, in one statement: the fenced
#: deletes, the counters, the bounded queues' counts
_ACK = (
    "WITH gone AS (DELETE FROM tw.messages AS m USING unnest(%b::text[], %b::text[]) "
    "AS c(id, token) WHERE m.id = c.id AND m.token = c.token RETURNING m.id, m.queue), "
    "per AS (SELECT queue, count(*) AS n FROM gone GROUP BY queue), "
    "counted AS (INSERT INTO tw.counters AS k (queue, name, slot, value) "
    "SELECT queue, 'acked', %s, n FROM per ORDER BY queue ON CONFLICT (queue, name, slot) "
    "DO UPDATE SET value = k.value + excluded.value RETURNING 1), "
    "bounded AS (UPDATE tw.queue_bounds AS b SET pending = b.pending - per.n FROM per "
    "WHERE b.queue = per.queue RETURNING 1) "
    "SELECT ARRAY(SELECT id FROM gone), (SELECT count(*) FROM counted) "
    "+ (SELECT count(*) FROM bounded)"
)

#: ``tw.claim`` (``schema.py``): the claim's rows, then a summary row
_CLAIM_FUNCTION = "SELECT * FROM tw.claim(%s, %s, %s, %s, %s, %s::smallint)"


class PostgresLeases(Leases):
    """Claims and their settling."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store
        sql = store.sql
        self._claim, self._claim_fn = sql(_CLAIM), sql(_CLAIM_FUNCTION)
        self._ack = sql(_ACK)
        self._insert_next = sql(INSERT_MANY + " ON CONFLICT DO NOTHING RETURNING queue, id")
        self._age = sql(AGE)

    def claim(
        self,
        queue: str,
        limit: int,
        lookahead_ms: int = 0,
        slots: Mapping[str, int] | None = None,  # slots are taken by Limits.acquire here
    ) -> ClaimBatch:
        """One round trip (``tw.claim``, the schema's function); a second transaction
        only when fair messages are due, to give them their turns and lease them."""
        store = self._store
        now = store.now_ms()
        until = now + lookahead_ms
        # one statement leases the whole batch; the batch's token fences each message
        token = secrets.token_hex(8)
        params = (queue, max(limit, 0), now, until, token, store.counter_slot())
        rows = store.statement(lambda db: db.execute(self._claim_fn, params).fetchall())
        summary = rows.pop()  # the function's last row: next due time, fair messages due
        if summary[8] and len(rows) < limit:
            rows += store.write(
                lambda db: self._claim_fair(db, queue, limit - len(rows), now, until, token)
            )
        rows.sort(key=order)  # RETURNING order is unspecified
        claims = [claim_of(r, queue, token) for r in rows]
        next_due = None if claims or summary[4] is None else int(summary[4])
        return ClaimBatch(claims, next_due)

    def _claim_fair(
        self, db: Connection, queue: str, limit: int, now: int, until: int, token: str
    ) -> list[tuple[Any, ...]]:
        """Give due fair messages their turns (``fairness.py``), then lease up to ``limit``
        ready ones under ``token``."""
        make_fair_ready(self._store, db, queue, until)
        rows = db.execute(self._claim, (queue, limit, token, now)).fetchall()
        self._store.count(db, queue, "claimed", len(rows))
        return rows

    def requeue_expired(self, queue: str) -> int:
        def work(db: Connection) -> int:
            count = db.execute(self._store.sql(_EXPIRE), (queue, self._store.now_ms())).rowcount
            self._store.count(db, queue, "redelivered", count)
            return count

        return self._store.write(work)

    def ack(
        self,
        items: Sequence[tuple[Claim, Envelope | None]],
        ledger: Sequence[LedgerEntry | None] = (),
    ) -> list[bool]:
        if not items:
            return []
        if all(nxt is None for _, nxt in items) and not any(ledger):
            return self._store.statement(lambda db: self._ack_plain(db, items))
        return self._store.write(lambda db: self._ack_in(db, items, ledger))

    def _ack_plain(
        self, db: Connection, items: Sequence[tuple[Claim, Envelope | None]]
    ) -> list[bool]:
        """Acks with no next occurrence and no ledger entry: one statement (``_ACK``)."""
        row = db.execute(
            self._ack,
            (
                [c.id for c, _ in items],
                [c.token for c, _ in items],
                self._store.counter_slot(),
            ),
        ).fetchone()
        assert row is not None
        deleted = set(row[0])
        results = []
        for claim, _ in items:
            results.append(claim.id in deleted)
            deleted.discard(claim.id)  # the same claim twice in one call is acked once
        return results

    def ack_releasing(
        self,
        items: Sequence[tuple[Claim, Envelope | None]],
        held: Sequence[tuple[str, str]],
        ledger: Sequence[LedgerEntry | None] = (),
    ) -> tuple[list[bool], list[Waiter]]:
        """Both in one transaction."""

        if not held:
            return self.ack(items, ledger), []

        def work(db: Connection) -> tuple[list[bool], list[Waiter]]:
            return self._ack_in(db, items, ledger), release_in(self._store, db, held)

        return self._store.write(work)

    def _ack_in(
        self,
        db: Connection,
        items: Sequence[tuple[Claim, Envelope | None]],
        ledger: Sequence[LedgerEntry | None],
    ) -> list[bool]:
        now = self._store.now_ms()
        deleted = {
            row[0]
            for row in db.execute(
                self._store.sql(
                    "DELETE FROM tw.messages AS m USING unnest(%b::text[], %b::text[]) "
                    "AS c(id, token) WHERE m.id = c.id AND m.token = c.token RETURNING m.id"
                ),
                ([c.id for c, _ in items], [c.token for c, _ in items]),
            )
        }
        results = []
        acked: dict[str, int] = {}
        nexts: list[Envelope] = []
        entries: list[LedgerEntry] = []
        for index, (claim, nxt) in enumerate(items):
            held = claim.id in deleted
            deleted.discard(claim.id)  # the same claim twice in one call is acked once
            results.append(held)
            if not held:
                continue
            acked[claim.queue] = acked.get(claim.queue, 0) + 1
            if nxt is not None:
                nexts.append(nxt)
            if index < len(ledger) and (entry := ledger[index]) is not None:
                entries.append(entry)
        if nexts:
            self.insert_next(db, nexts, now)
        for queue, count in sorted(acked.items()):
            self._store.count(db, queue, "acked", count)
            self._store.add_pending(db, queue, -count)
        if entries:
            ledger_rows.append_in(self._store, db, entries, now)
        return results

    def insert_next(self, db: Connection, nexts: Sequence[Envelope], now: int) -> None:
        """Store chains' next occurrences; a deterministic id makes a repeat a no-op."""
        inserted: dict[str, int] = {}
        written: set[str] = set()
        for queue, message_id in db.execute(self._insert_next, insert_columns(nexts, now)):
            inserted[queue] = inserted.get(queue, 0) + 1
            written.add(message_id)
        if ages(nexts):
            db.execute(self._age, aging_columns([e for e in nexts if e.id in written]))
        announce(self._store, db, nexts, now)
        for queue, count in sorted(inserted.items()):
            self._store.count(db, queue, "enqueued", count)
            self._store.add_pending(db, queue, count)

    def retry(
        self, claim: Claim, due_ms: int, error: str, ledger: LedgerEntry | None = None
    ) -> bool:
        def work(db: Connection) -> bool:
            now = self._store.now_ms()
            state = READY if due_ms <= now else SCHEDULED
            held = (
                db.execute(
                    self._store.sql(
                        f"UPDATE tw.messages SET state = {_UNLESS_FAIR}, at_ms = %s, "
                        "due_ms = %s, token = NULL, last_error = %s WHERE id = %s AND token = %s"
                    ),
                    (state, due_ms, due_ms, _text(error), claim.id, claim.token),
                ).rowcount
                == 1
            )
            self._store.count(db, claim.queue, "retried", int(held))
            if held and due_ms <= now + SOON_MS:
                announce_queues(self._store, db, [claim.queue])
            if held and ledger is not None:
                ledger_rows.append_in(self._store, db, [ledger], now)
            return held

        return self._store.write(work)

    def release(self, claims: Iterable[Claim], due_ms: int | None = None) -> int:
        given = list(claims)
        if not given:
            return 0
        ids, tokens = [c.id for c in given], [c.token for c in given]

        def work(db: Connection) -> int:
            if due_ms is None or due_ms <= self._store.now_ms() + SOON_MS:
                announce_queues(self._store, db, sorted({c.queue for c in given}))
            if due_ms is None:
                return db.execute(
                    self._store.sql(
                        "UPDATE tw.messages AS m SET state = 1, at_ms = COALESCE(turn, due_ms), "
                        "token = NULL, attempt = attempt - 1 FROM unnest(%b::text[], %b::text[]) "
                        "AS c(id, token) WHERE m.id = c.id AND m.token = c.token"
                    ),
                    (ids, tokens),
                ).rowcount
            state = READY if due_ms <= self._store.now_ms() else SCHEDULED
            return db.execute(
                self._store.sql(
                    f"UPDATE tw.messages AS m SET state = {_UNLESS_FAIR}, at_ms = %s, "
                    "due_ms = %s, token = NULL, attempt = attempt - 1 FROM "
                    "unnest(%b::text[], %b::text[]) AS c(id, token) "
                    "WHERE m.id = c.id AND m.token = c.token"
                ),
                (state, due_ms, due_ms, ids, tokens),
            ).rowcount

        return self._store.write(work)

    def extend(self, claims: Sequence[Claim], lease_ms: int) -> list[bool]:
        if not claims:
            return []
        deadline = self._store.now_ms() + lease_ms

        def work(db: Connection) -> list[bool]:
            extended = {
                row[0]
                for row in db.execute(
                    self._store.sql(
                        "UPDATE tw.messages AS m SET at_ms = %s FROM "
                        "unnest(%b::text[], %b::text[]) AS c(id, token) "
                        "WHERE m.id = c.id AND m.token = c.token RETURNING m.id"
                    ),
                    (deadline, [c.id for c in claims], [c.token for c in claims]),
                )
            }
            return [c.id in extended for c in claims]

        return self._store.write(work)

    def poison(
        self,
        claim: Claim,
        failure: Failure,
        next_occurrence: Envelope | None = None,
        ledger: LedgerEntry | None = None,
    ) -> bool:
        def work(db: Connection) -> bool:
            now = self._store.now_ms()
            row = db.execute(
                self._store.sql(
                    "DELETE FROM tw.messages WHERE id = %s AND token = %s RETURNING priority"
                ),
                (claim.id, claim.token),
            ).fetchone()
            if row is None:
                return False
            self._store.add_pending(db, claim.queue, -1)
            db.execute(
                self._store.sql(
                    "INSERT INTO tw.poison (id, queue, key, priority, timeout_ms, attempts, "
                    "failed_ms, reason, error_type, error, traceback, body) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (id) DO UPDATE SET queue = excluded.queue, key = excluded.key, "
                    "priority = excluded.priority, timeout_ms = excluded.timeout_ms, "
                    "attempts = excluded.attempts, failed_ms = excluded.failed_ms, "
                    "reason = excluded.reason, error_type = excluded.error_type, "
                    "error = excluded.error, traceback = excluded.traceback, body = excluded.body"
                ),
                (
                    claim.id,
                    claim.queue,
                    claim.key,
                    row[0],
                    claim.timeout_ms,
                    claim.attempt,
                    now,
                    failure.reason,
                    failure.error_type,
                    _text(failure.message),
                    _text(failure.traceback),
                    claim.body,
                ),
            )
            self._store.count(db, claim.queue, "poisoned", 1)
            if next_occurrence is not None:
                self.insert_next(db, [next_occurrence], now)
            if ledger is not None:
                ledger_rows.append_in(self._store, db, [ledger], now)
            return True

        return self._store.write(work)


def _text(value: str) -> str:
    """``value`` as PostgreSQL ``text`` takes it (which refuses the NUL character)."""
    return value.replace("\x00", "\\x00")
