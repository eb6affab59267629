"""How the PostgreSQL backend writes messages, as *steps*: a generator yields each query
(statement, parameters) and is sent back its rows, so one piece of logic runs on a
synchronous connection (``run``) and on an asynchronous one (``arun``, for enqueue
inside an asyncio application's own transaction).

- ``fresh``: a batch of unkeyed messages (none with a promotion time: ``aging.py``) in
  one statement (``_FRESH``): the new ids inserted, their bounded queues counted under
  their row locks (nothing written when one lacks room: the careful path decides then),
  the counters, ``NOTIFY``.
- ``careful``: keys, re-sends and replaces: who holds each key, which ids are stored,
  one plan for all (``outcomes.plan``), then the deletes of replaced rows and the
  inserts. Two producers may race for one key: the loser's insert meets the unique
  index, its savepoint rolls back and the careful path runs again, now seeing the
  winner as the key's holder (``ERROR`` raises ``KeyConflict``, ``IGNORE`` ignores,
  ``REPLACE`` replaces).

Inside a caller's transaction a bounded write is all or nothing: when a queue lacks room
for some of its messages, its savepoint rolls back (``NoRoom``), which also lets go of
the queue's count row it locked, so that workers finishing messages can make the room
the producer then waits for; every message it would have written answers ``FULL``."""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg.pq import TransactionStatus

from tickwork.scheduler.backends.outcomes import WRITES, plan
from tickwork.scheduler.backends.postgres.aging import AGE, ages, aging_columns
from tickwork.scheduler.backends.postgres.notify import SOON_MS, channel
from tickwork.scheduler.backends.postgres.rows import INSERT_MANY, insert_columns
from tickwork.scheduler.backends.postgres.store import Connection, PostgresStore
from tickwork.scheduler.backends.values import Envelope, OnConflict, Outcome
from tickwork.scheduler.errors import BackendError

T = TypeVar("T")
Query = tuple[str, Any]  # a statement (its tables qualified) and its parameters
Rows = list[tuple[Any, ...]]
Steps = Generator[Query, Rows, T]

#: how often the careful path runs again after losing a race for a key
RACES = 5

#: the fast path of a batch of unkeyed messages, in one statement (one round trip, its
#: own transaction): lock the bounds of its queues (``locked``), write nothing if one
#: lacks room (``full_``, when bounded), insert the messages whose ids are new, add
#: them to the bounds and the counters, and notify the queues of those due soon
_FRESH = (
    "WITH given AS (SELECT * FROM unnest(%b::text[], %b::text[], %b::text[], %b::int[], "
    "%b::smallint[], %b::bigint[], %b::bigint[], %b::bytea[], %b::text[]) "
    "WITH ORDINALITY AS u(i, q, k, p, s, d, t, b, f, n)), "
    "need AS (SELECT q, count(*) AS n FROM given GROUP BY q), "
    "locked AS (SELECT b.queue, b.max_pending - b.pending AS room FROM tw.queue_bounds AS b "
    "WHERE b.queue IN (SELECT q FROM need) ORDER BY b.queue FOR UPDATE), "
    "full_ AS (SELECT 1 FROM locked JOIN need ON locked.queue = need.q "
    "WHERE %s AND locked.room < need.n), "
    "ins AS (INSERT INTO tw.messages "
    "(id, queue, key, priority, state, at_ms, due_ms, timeout_ms, body, fair) "
    "SELECT i, q, k, p, s, d, d, t, b, f FROM given WHERE NOT EXISTS (SELECT 1 FROM full_) "
    "ORDER BY n ON CONFLICT DO NOTHING RETURNING id, queue, due_ms), "
    "per AS (SELECT queue, count(*) AS n, min(due_ms) AS soonest FROM ins GROUP BY queue), "
    "bumped AS (UPDATE tw.queue_bounds AS b SET pending = b.pending + per.n FROM per "
    "WHERE b.queue = per.queue RETURNING 1), "
    "counted AS (INSERT INTO tw.counters (queue, name, slot, value) "
    "SELECT queue, 'enqueued', %s, n FROM per ORDER BY queue "
    "ON CONFLICT (queue, name, slot) DO UPDATE SET value = counters.value + excluded.value "
    "RETURNING 1), "
    "told AS (SELECT pg_notify(%s, queue) FROM per WHERE soonest <= %s) "
    "SELECT EXISTS (SELECT 1 FROM full_), ARRAY(SELECT id FROM ins), "
    "(SELECT count(*) FROM bumped) + (SELECT count(*) FROM counted) "
    "+ (SELECT count(*) FROM told)"
)

_ROOM = (
    "SELECT queue, max_pending - pending FROM tw.queue_bounds "
    "WHERE queue = ANY(%s) ORDER BY queue FOR UPDATE"
)
_HOLDERS = "SELECT key, id, body FROM tw.messages WHERE queue = %s AND key = ANY(%s)"
_PRESENT = "SELECT id FROM tw.messages WHERE id = ANY(%s)"
_REPLACE = (
    "DELETE FROM tw.messages WHERE id = ANY(%s) OR (queue, key) IN "
    "(SELECT * FROM unnest(%b::text[], %b::text[]))"
)
_COUNT = (
    "INSERT INTO tw.counters (queue, name, slot, value) "
    "SELECT q, 'enqueued', %s, n FROM unnest(%b::text[], %b::bigint[]) AS u(q, n) "
    "ORDER BY q ON CONFLICT (queue, name, slot) DO UPDATE "
    "SET value = counters.value + excluded.value"
)
_PENDING = (
    "UPDATE tw.queue_bounds AS b SET pending = b.pending + u.n "
    "FROM unnest(%b::text[], %b::bigint[]) AS u(q, n) WHERE b.queue = u.q"
)
_NOTIFY = "SELECT pg_notify(%s, q) FROM unnest(%b::text[]) AS q"


class NoRoom(Exception):
    """Raised inside a savepoint to undo a bounded write that found a queue full; carries
    the answers: ``FULL`` for every message it would have written."""

    def __init__(self, outcomes: list[Outcome]) -> None:
        super().__init__("a queue lacks room")
        self.outcomes = [Outcome.FULL if o in WRITES else o for o in outcomes]


def whole(outcomes: list[Outcome]) -> list[Outcome]:
    """``outcomes``, or ``NoRoom`` raised when any is ``FULL`` (see ``NoRoom``)."""
    if Outcome.FULL in outcomes:
        raise NoRoom(outcomes)
    return outcomes


def fresh(
    store: PostgresStore, envelopes: Sequence[Envelope], bounded: bool
) -> Steps[list[Outcome] | None]:
    """The outcomes of a batch of unkeyed messages written in one statement, or None
    (nothing written) when a bounded queue lacks room for all of them."""
    now = store.now_ms()
    params = (
        *insert_columns(envelopes, now),
        bounded,
        store.counter_slot(),
        channel(store.schema),
        now + SOON_MS,
    )
    rows = yield store.sql(_FRESH), params
    full, inserted, _ = rows[0]
    if full:
        return None
    new = set(inserted)
    return [Outcome.ENQUEUED if e.id in new else Outcome.DUPLICATE for e in envelopes]


def careful(
    store: PostgresStore, envelopes: Sequence[Envelope], on_conflict: OnConflict, bounded: bool
) -> Steps[list[Outcome]]:
    """Keys, re-sends and replaces, decided together (see the module's docstring)."""
    sql = store.sql
    now = store.now_ms()
    room: dict[str, int] = {}
    if bounded:
        rows = yield sql(_ROOM), (sorted({e.queue for e in envelopes}),)
        room = {str(queue): int(left) for queue, left in rows}
    holders: dict[tuple[str, str], tuple[str, bytes]] = {}
    by_queue: dict[str, list[str]] = {}
    for e in envelopes:
        if e.key is not None:
            by_queue.setdefault(e.queue, []).append(e.key)
    for queue, keys in by_queue.items():
        for key, message_id, body in (yield sql(_HOLDERS), (queue, keys)):
            holders[(queue, key)] = (message_id, body)
    unkeyed = [e.id for e in envelopes if e.key is None]
    present = {row[0] for row in (yield sql(_PRESENT), (unkeyed,))} if unkeyed else set()
    planned = plan(envelopes, holders, present, on_conflict, room)
    written: dict[tuple[str, str | None] | str, Envelope] = {}  # the last write wins
    for e in planned.writes:
        if e.key is not None:
            written.pop(e.id, None)
            written[(e.queue, e.key)] = e
        else:
            written[e.id] = e
    replaced = [
        e
        for e, outcome in zip(envelopes, planned.outcomes, strict=True)
        if outcome is Outcome.REPLACED
    ]
    if replaced:
        # a replacement removes the row holding its key under another id, and one with its
        # id (even a leased one: its holder's ack is then refused, so a replaced chain
        # cannot resurrect)
        keyed = [e for e in replaced if e.key is not None]
        yield (
            sql(_REPLACE),
            ([e.id for e in replaced], [e.queue for e in keyed], [e.key for e in keyed]),
        )
    if written:
        rows_written = list(written.values())
        yield sql(INSERT_MANY), insert_columns(rows_written, now)
        if ages(rows_written):
            yield sql(AGE), aging_columns(rows_written)
        soon = sorted({e.queue for e in rows_written if e.due_ms <= now + SOON_MS})
        if soon:
            yield _NOTIFY, (channel(store.schema), soon)
    if planned.written:
        queues = sorted(planned.written)
        yield sql(_COUNT), (store.counter_slot(), queues, [planned.written[q] for q in queues])
    if planned.added:
        queues = sorted(planned.added)
        yield sql(_PENDING), (queues, [planned.added[q] for q in queues])
    return planned.outcomes


def run(db: Connection, steps: Steps[T]) -> T:
    """Drive ``steps`` on a synchronous connection."""
    try:
        query = next(steps)
        while True:
            cursor = db.execute(*query)
            query = steps.send(cursor.fetchall() if cursor.description is not None else [])
    except StopIteration as done:
        result: T = done.value
        return result


async def arun(db: psycopg.AsyncConnection[Any], steps: Steps[T]) -> T:
    """Drive ``steps`` on an asynchronous connection."""
    try:
        query = next(steps)
        while True:
            cursor = await db.execute(*query)
            rows = await cursor.fetchall() if cursor.description is not None else []
            query = steps.send(rows)
    except StopIteration as done:
        result: T = done.value
        return result


def enqueue_on(
    db: Connection,
    store: PostgresStore,
    envelopes: Sequence[Envelope],
    on_conflict: OnConflict,
    bounded: bool,
    all_or_nothing: bool = False,
) -> list[Outcome]:
    """The careful path inside the current transaction, a savepoint per attempt (undone
    when a queue lacks room, with ``all_or_nothing``)."""
    for _ in range(RACES):
        try:
            with db.transaction():
                outcomes = run(db, careful(store, envelopes, on_conflict, bounded))
                return whole(outcomes) if all_or_nothing else outcomes
        except pg_errors.UniqueViolation:
            continue  # another producer took a key meanwhile: decide again
        except NoRoom as refused:
            return refused.outcomes
    raise BackendError("enqueue lost the race for its keys too often; try again")


async def aenqueue_on(
    db: psycopg.AsyncConnection[Any],
    store: PostgresStore,
    envelopes: Sequence[Envelope],
    on_conflict: OnConflict,
    bounded: bool,
) -> list[Outcome]:
    """Fast path then careful path on the caller's asynchronous connection, each in a
    savepoint of its open transaction (or a transaction of its own if none is open); a
    bounded write is all or nothing (``NoRoom``)."""
    if not db.autocommit and db.info.transaction_status == TransactionStatus.IDLE:
        await db.execute("SELECT 1")  # open its implicit transaction: ours are savepoints
    if (
        on_conflict is not OnConflict.REPLACE
        and all(e.key is None for e in envelopes)
        and not ages(envelopes)
    ):
        try:
            async with db.transaction():
                done = await arun(db, fresh(store, envelopes, bounded))
                if done is None:
                    raise NoRoom([])  # let go of the count rows it locked
            return done
        except NoRoom:
            pass  # the careful path answers for each message
    for _ in range(RACES):
        try:
            async with db.transaction():
                return whole(await arun(db, careful(store, envelopes, on_conflict, bounded)))
        except pg_errors.UniqueViolation:
            continue
        except NoRoom as refused:
            return refused.outcomes
    raise BackendError("enqueue lost the race for its keys too often; try again")
