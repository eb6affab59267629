"""Priority aging on SQLite: a message of a task with ``max_wait`` has a row in ``aging``
with the time it is promoted (``Envelope.promote_ms``). Each claim first takes the rows
whose time has come and raises the priority of those messages still ready to
``PROMOTED_PRIORITY``, ahead of every priority a task may have; a message that is running
or waiting for a retry then keeps its priority. A cancelled or finished message's row
goes at its time too (nothing to promote), so the table holds at most the messages of
the last ``max_wait``."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from tickwork.scheduler.backends.values import PROMOTED_PRIORITY, Envelope

AGING_SCHEMA = """
CREATE TABLE IF NOT EXISTS aging (
    id         TEXT PRIMARY KEY,
    queue      TEXT NOT NULL,
    promote_ms INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS aging_due ON aging (queue, promote_ms);
"""


def age_in(db: sqlite3.Connection, envelopes: Iterable[Envelope]) -> None:
    """Record the promotion time of each of ``envelopes`` that has one (just written)."""
    rows = [(e.id, e.queue, e.promote_ms) for e in envelopes if e.promote_ms is not None]
    if rows:
        db.executemany(
            "INSERT OR REPLACE INTO aging (id, queue, promote_ms) VALUES (?, ?, ?)", rows
        )


def promote_in(db: sqlite3.Connection, queue: str, now: int) -> int:
    """Promote the ready messages of ``queue`` whose time has come; how many were."""
    due = db.execute(
        "DELETE FROM aging WHERE queue = ? AND promote_ms <= ? RETURNING id", (queue, now)
    ).fetchall()
    if not due:
        return 0
    ids = [row[0] for row in due]
    promoted = 0
    for first in range(0, len(ids), 500):
        part = ids[first : first + 500]
        promoted += db.execute(
            f"UPDATE messages SET priority = {PROMOTED_PRIORITY} WHERE state = 1 AND id IN "
            f"({', '.join('?' * len(part))})",
            part,
        ).rowcount
    return promoted
