"""Priority aging on PostgreSQL: a message of a task with ``max_wait`` has a row in
``tw.aging`` with the time it is promoted (``Envelope.promote_ms``), written in the
transaction that writes the message (such messages take the careful path, not the
one-statement fast path). Each claim (``tw.claim``, schema version 3) first deletes the
rows whose time has come and raises the priority of those messages still ready to
``PROMOTED_PRIORITY``; one running or waiting for a retry then keeps its priority."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tickwork.scheduler.backends.values import Envelope

#: record promotion times (id, queue, promote_ms arrays); a message written again by id
#: takes its new time
AGE = (
    "INSERT INTO tw.aging (id, queue, promote_ms) "
    "SELECT * FROM unnest(%b::text[], %b::text[], %b::bigint[]) "
    "ON CONFLICT (id) DO UPDATE SET queue = excluded.queue, promote_ms = excluded.promote_ms"
)


def ages(envelopes: Sequence[Envelope]) -> bool:
    """Whether any of ``envelopes`` is promoted if it waits long enough."""
    return any(e.promote_ms is not None for e in envelopes)


def aging_columns(envelopes: Sequence[Envelope]) -> list[list[Any]]:
    """``AGE``'s parameters for those of ``envelopes`` that have a promotion time."""
    aging = [e for e in envelopes if e.promote_ms is not None]
    return [[e.id for e in aging], [e.queue for e in aging], [e.promote_ms for e in aging]]
