"""Fair share on SQLite: ready messages that carry a fair-share key (``Envelope.fair``)
take turns between keys within a priority, so a key that floods a queue does not hold
back the others (start-time fair queueing).

A fair message is always stored as scheduled (state 0, ``at_ms`` its due time); the claim
that finds it due gives it its turn as it becomes ready: one after its key's last turn,
and never before the head of the queue's line of ready fair messages (the turn served
next). Its ``at_ms`` while ready is that turn (``turn`` keeps it), so the ready index
(priority, then ``at_ms``) orders it. A key with nothing waiting keeps no state: a turn
at or before the head is pruned, and with no fair message waiting every turn is.

A key of weight ``w`` (``fair_weights``, set by an operator; 1 when not set) takes ``w``
messages per turn: its next message shares its last turn until ``w`` of its ready
messages hold it, so with a backlog of two keys of weights 3 and 1, three of the first
run for one of the second (weighted fair queueing, in whole turns).
"""

from __future__ import annotations

import sqlite3

from tickwork.scheduler.backends.fair_turns import next_turn

#: run after the base schema (``connection.SCHEMA`` has the ``fair`` and ``turn`` columns)
FAIR_SCHEMA = """
CREATE INDEX IF NOT EXISTS messages_fair_ready
    ON messages (queue, at_ms) WHERE state = 1 AND fair IS NOT NULL;
CREATE INDEX IF NOT EXISTS messages_fair_scheduled
    ON messages (queue, at_ms) WHERE state = 0 AND fair IS NOT NULL;
CREATE TABLE IF NOT EXISTS fair_turns (
    queue TEXT NOT NULL,
    fair  TEXT NOT NULL,
    last  INTEGER NOT NULL,
    PRIMARY KEY (queue, fair)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS fair_weights (
    queue  TEXT NOT NULL,
    fair   TEXT NOT NULL,
    weight INTEGER NOT NULL,
    PRIMARY KEY (queue, fair)
) WITHOUT ROWID;
"""


def make_fair_ready(db: sqlite3.Connection, queue: str, until_ms: int) -> None:
    """Give every fair message of ``queue`` due by ``until_ms`` its turn and make it ready
    (inside the claim's write transaction)."""
    due = db.execute(
        "SELECT id, fair, due_ms FROM messages WHERE queue = ? AND state = 0 "
        "AND fair IS NOT NULL AND at_ms <= ? ORDER BY at_ms",
        (queue, until_ms),
    ).fetchall()
    if not due:
        return
    head = db.execute(
        "SELECT MIN(at_ms) FROM messages WHERE queue = ? AND state = 1 AND fair IS NOT NULL",
        (queue,),
    ).fetchone()[0]
    if head is None:  # nothing fair waits: earlier turns no longer count
        db.execute("DELETE FROM fair_turns WHERE queue = ?", (queue,))
    else:
        db.execute("DELETE FROM fair_turns WHERE queue = ? AND last < ?", (queue, head))
    weights = _weights(db, queue, {fair for _, fair, _ in due})
    last: dict[str, int | None] = {}
    shared: dict[str, int] = {}  # how many ready messages of a weighted key hold its last turn
    updates = []
    for message_id, fair, due_ms in due:
        weight = weights.get(fair, 1)
        if fair not in last:
            row = db.execute(
                "SELECT last FROM fair_turns WHERE queue = ? AND fair = ?", (queue, fair)
            ).fetchone()
            last[fair] = None if row is None else row[0]
            if weight > 1 and row is not None:
                shared[fair] = db.execute(
                    "SELECT COUNT(*) FROM messages WHERE queue = ? AND state = 1 AND fair = ? "
                    "AND at_ms = ?",
                    (queue, fair, row[0]),
                ).fetchone()[0]
        base = due_ms if head is None else head
        turn, shared[fair] = next_turn(base, last[fair], shared.get(fair, weight), weight)
        last[fair] = turn
        if head is None:
            head = turn
        updates.append((turn, turn, message_id))
    db.executemany("UPDATE messages SET state = 1, at_ms = ?, turn = ? WHERE id = ?", updates)
    db.executemany(
        "INSERT INTO fair_turns (queue, fair, last) VALUES (?, ?, ?) "
        "ON CONFLICT (queue, fair) DO UPDATE SET last = excluded.last",
        [(queue, fair, turn) for fair, turn in last.items() if turn is not None],
    )


def _weights(db: sqlite3.Connection, queue: str, keys: set[str]) -> dict[str, int]:
    """The weights set for ``keys`` of ``queue`` (a key not set has weight 1)."""
    if not db.execute("SELECT 1 FROM fair_weights WHERE queue = ? LIMIT 1", (queue,)).fetchone():
        return {}
    rows = db.execute("SELECT fair, weight FROM fair_weights WHERE queue = ?", (queue,))
    return {str(fair): int(weight) for fair, weight in rows if fair in keys}


def set_weight(db: sqlite3.Connection, queue: str, fair: str, weight: int | None) -> None:
    """Store ``fair``'s weight in ``queue`` (None: back to 1)."""
    if weight is None or weight == 1:
        db.execute("DELETE FROM fair_weights WHERE queue = ? AND fair = ?", (queue, fair))
    else:
        db.execute(
            "INSERT OR REPLACE INTO fair_weights (queue, fair, weight) VALUES (?, ?, ?)",
            (queue, fair, weight),
        )


def weights(db: sqlite3.Connection, queue: str) -> dict[str, int]:
    """Every weight set in ``queue``."""
    rows = db.execute(
        "SELECT fair, weight FROM fair_weights WHERE queue = ? ORDER BY fair", (queue,)
    )
    return {str(fair): int(weight) for fair, weight in rows}
