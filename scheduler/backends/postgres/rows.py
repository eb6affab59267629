"""How the PostgreSQL backend's rows become the values of the contract."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tickwork.scheduler.backends.states import initial_state
from tickwork.scheduler.backends.values import Claim, Envelope

#: a claimed row's columns, in ``claim_of``'s order
RETURNED = "id, key, body, attempt, due_ms, at_ms, timeout_ms, priority, turn"


def claim_of(row: tuple[Any, ...], queue: str, token: str) -> Claim:
    """The claim of a row returned as ``RETURNED``."""
    message_id, key, body, attempt, due_ms, deadline, timeout_ms, _, _ = row
    return Claim(message_id, queue, key, body, token, attempt, due_ms, deadline, timeout_ms)


def order(row: tuple[Any, ...]) -> tuple[int, int, str]:
    """Claim order of a returned row: priority first, then its turn (a message with a
    fair-share key) or due time, then id."""
    priority, due_ms, turn = row[7], row[4], row[8]
    return (-priority, turn if turn is not None else due_ms, row[0])


#: a batch of envelopes inserted in one statement, its arrays from ``insert_columns``
INSERT_MANY = (
    "INSERT INTO tw.messages "
    "(id, queue, key, priority, state, at_ms, due_ms, timeout_ms, body, fair) "
    "SELECT i, q, k, p, s, d, d, t, b, f FROM unnest("
    "%b::text[], %b::text[], %b::text[], %b::int[], %b::smallint[], %b::bigint[], "
    "%b::bigint[], %b::bytea[], %b::text[]) AS u(i, q, k, p, s, d, t, b, f)"
)


def insert_columns(envelopes: Sequence[Envelope], now: int) -> list[list[Any]]:
    """The envelopes as the column arrays of an ``INSERT ... SELECT FROM unnest``: id,
    queue, key, priority, state, due time, timeout, body, fair-share key."""
    return [
        [e.id for e in envelopes],
        [e.queue for e in envelopes],
        [e.key for e in envelopes],
        [e.priority for e in envelopes],
        [initial_state(e, now) for e in envelopes],
        [e.due_ms for e in envelopes],
        [e.timeout_ms for e in envelopes],
        [e.body for e in envelopes],
        [e.fair for e in envelopes],
    ]
