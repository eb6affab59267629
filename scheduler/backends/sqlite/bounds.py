"""The SQLite backend's queue bounds: one row per bounded queue in ``queue_bounds`` with its
``max_pending`` and ``pending``, the count of its messages (waiting or leased). Every write
that adds or removes messages adds its net change to ``pending`` in the same transaction,
one statement per queue (``SQLiteStore.add_pending``): triggers on ``messages`` did the
same per row and cost a quarter of bulk enqueue's speed. Setting a bound recounts the
queue. Rare writes are not counted exactly: a replacement counts as adding nothing, but
one whose id another stored message already has (in this queue, or in another) removes
that one too; such a count is off by one until the bound is set again."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from tickwork.scheduler.backends.base import Envelope


def count_in(db: sqlite3.Connection, added: dict[str, int], bounded: bool) -> bool:
    """Inside enqueue's transaction: add ``added`` (queue -> new messages) to the counts
    of bounded queues; False when ``bounded`` and a queue would pass its bound (the
    caller rolls the counts back)."""
    fits = True
    for queue, count in added.items():
        row = db.execute(
            "UPDATE queue_bounds SET pending = pending + ? WHERE queue = ? "
            "RETURNING max_pending, pending",
            (count, queue),
        ).fetchone()
        if bounded and row is not None and row[1] > row[0]:
            fits = False
    return fits


def room(db: sqlite3.Connection, envelopes: Sequence[Envelope]) -> dict[str, int]:
    """Inside enqueue's transaction: how many more messages each bounded queue among
    ``envelopes`` takes (queues without a bound are left out)."""
    queues = sorted({e.queue for e in envelopes})
    marks = ", ".join("?" * len(queues))
    rows = db.execute(
        f"SELECT queue, max_pending - pending FROM queue_bounds WHERE queue IN ({marks})",
        queues,
    )
    return {str(row[0]): int(row[1]) for row in rows}
