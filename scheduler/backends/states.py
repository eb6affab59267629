"""The states of a stored message in the SQL backends (SQLite, PostgreSQL): due later,
due (claimed by priority, then due time or turn), leased."""

from __future__ import annotations

from scheduler.backends.values import Envelope

SCHEDULED, READY, LEASED = 0, 1, 2


def initial_state(envelope: Envelope, now: int) -> int:
    """The state a message is written in: ready when due, else scheduled; one with a
    fair-share key always scheduled (the claim that finds it due gives it its turn)."""
    return READY if envelope.due_ms <= now and envelope.fair is None else SCHEDULED
