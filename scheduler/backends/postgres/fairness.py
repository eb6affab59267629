"""Fair share on PostgreSQL: ready messages that carry a fair-share key take turns
between keys within a priority (start-time fair queueing), as on SQLite
(``scheduler/backends/sqlite/fairness.py`` explains the turns).

A claim that finds fair messages due gives them their turns under a transaction-level
advisory lock of the queue, so two workers claiming at once never hand out turns from the
same stale ``last``; queues without fair messages never take the lock."""

from __future__ import annotations

from tickwork.scheduler.backends.fair_turns import next_turn
from tickwork.scheduler.backends.postgres.store import Connection, PostgresStore


def make_fair_ready(store: PostgresStore, db: Connection, queue: str, until_ms: int) -> None:
    """Give every fair message of ``queue`` due by ``until_ms`` its turn and make it ready
    (inside the claim's transaction)."""
    any_due = db.execute(
        store.sql(
            "SELECT 1 FROM tw.messages WHERE queue = %s AND state = 0 "
            "AND fair IS NOT NULL AND at_ms <= %s LIMIT 1"
        ),
        (queue, until_ms),
    ).fetchone()
    if any_due is None:
        return
    db.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 11))", (f"fair:{queue}",))
    due = db.execute(
        store.sql(
            "SELECT id, fair, due_ms FROM tw.messages WHERE queue = %s AND state = 0 "
            "AND fair IS NOT NULL AND at_ms <= %s ORDER BY at_ms, id FOR UPDATE SKIP LOCKED"
        ),
        (queue, until_ms),
    ).fetchall()
    if not due:
        return
    head_row = db.execute(
        store.sql(
            "SELECT min(at_ms) FROM tw.messages WHERE queue = %s AND state = 1 AND fair IS NOT NULL"
        ),
        (queue,),
    ).fetchone()
    head = None if head_row is None else head_row[0]
    if head is None:  # nothing fair waits: earlier turns no longer count
        db.execute(store.sql("DELETE FROM tw.fair_turns WHERE queue = %s"), (queue,))
    else:
        db.execute(
            store.sql("DELETE FROM tw.fair_turns WHERE queue = %s AND last < %s"), (queue, head)
        )
    keys = sorted({fair for _, fair, _ in due})
    last: dict[str, int | None] = dict.fromkeys(keys)
    for fair, turn in db.execute(
        store.sql("SELECT fair, last FROM tw.fair_turns WHERE queue = %s AND fair = ANY(%s)"),
        (queue, keys),
    ):
        last[fair] = int(turn)
    weights = {
        str(fair): int(weight)
        for fair, weight in db.execute(
            store.sql(
                "SELECT fair, weight FROM tw.fair_weights WHERE queue = %s AND fair = ANY(%s)"
            ),
            (queue, keys),
        )
    }
    shared = _shared(store, db, queue, {k: last[k] for k in weights if last[k] is not None})
    ids, turns = [], []
    for message_id, fair, due_ms in due:
        base = due_ms if head is None else head
        weight = weights.get(fair, 1)
        turn, shared[fair] = next_turn(base, last[fair], shared.get(fair, weight), weight)
        last[fair] = turn
        if head is None:
            head = turn
        ids.append(message_id)
        turns.append(turn)
    db.execute(
        store.sql(
            "UPDATE tw.messages AS m SET state = 1, at_ms = u.turn, turn = u.turn "
            "FROM unnest(%b::text[], %b::bigint[]) AS u(id, turn) WHERE m.id = u.id"
        ),
        (ids, turns),
    )
    kept = [(fair, turn) for fair, turn in last.items() if turn is not None]
    db.execute(
        store.sql(
            "INSERT INTO tw.fair_turns (queue, fair, last) "
            "SELECT %s, f, l FROM unnest(%b::text[], %b::bigint[]) AS u(f, l) "
            "ON CONFLICT (queue, fair) DO UPDATE SET last = excluded.last"
        ),
        (queue, [fair for fair, _ in kept], [turn for _, turn in kept]),
    )


def _shared(
    store: PostgresStore, db: Connection, queue: str, last: dict[str, int | None]
) -> dict[str, int]:
    """For each weighted key, how many of its ready messages hold its last turn."""
    shared: dict[str, int] = {}
    for fair, turn in last.items():
        row = db.execute(
            store.sql(
                "SELECT count(*) FROM tw.messages WHERE queue = %s AND state = 1 "
                "AND fair = %s AND at_ms = %s"
            ),
            (queue, fair, turn),
        ).fetchone()
        shared[fair] = 0 if row is None else int(row[0])
    return shared


def set_weight(
    store: PostgresStore, db: Connection, queue: str, fair: str, weight: int | None
) -> None:
    """Store ``fair``'s weight in ``queue`` (None: back to 1)."""
    if weight is None or weight == 1:
        db.execute(
            store.sql("DELETE FROM tw.fair_weights WHERE queue = %s AND fair = %s"), (queue, fair)
        )
        return
    db.execute(
        store.sql(
            "INSERT INTO tw.fair_weights (queue, fair, weight) VALUES (%s, %s, %s) "
            "ON CONFLICT (queue, fair) DO UPDATE SET weight = excluded.weight"
        ),
        (queue, fair, weight),
    )
