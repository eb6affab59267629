"""What the SQL backends (SQLite, PostgreSQL) share about a stored message: its states
(due later, due: claimed by priority, then due time or turn, leased) and the columns a
read of it selects."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tickwork.scheduler.backends.values import Envelope, State, StoredMessage

SCHEDULED, READY, LEASED = 0, 1, 2
STATE_NAMES = {SCHEDULED: State.SCHEDULED, READY: State.READY, LEASED: State.RUNNING}

#: a stored message's columns, in ``stored_message``'s order
COLUMNS = "id, queue, key, priority, state, due_ms, timeout_ms, attempt, last_error, body, fair"


def stored_message(row: Sequence[Any]) -> StoredMessage:
    """The message of a row selected as ``COLUMNS``."""
    envelope = Envelope(
        id=row[0],
        queue=row[1],
        key=row[2],
        priority=row[3],
        due_ms=row[5],
        timeout_ms=row[6],
        body=row[9],
        fair=row[10],
    )
    return StoredMessage(envelope, STATE_NAMES[row[4]], row[7], row[8])


def initial_state(envelope: Envelope, now: int) -> int:
    """The state a message is written in: ready when due, else scheduled; one with a
    fair-share key always scheduled (the claim that finds it due gives it its turn)."""
    return READY if envelope.due_ms <= now and envelope.fair is None else SCHEDULED
