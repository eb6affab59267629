"""What enqueue does with each message, decided the same way by the backends that decide
in Python (SQLite, Cassandra; Redis decides in its enqueue script): key conflicts,
re-sends, replacements, and the room left in bounded queues."""

from __future__ import annotations

from collections.abc import Sequence

from scheduler.backends.base import Envelope, OnConflict, Outcome
from scheduler.errors import KeyConflict

#: the outcomes that store the message
WRITES = (Outcome.ENQUEUED, Outcome.REPLACED)

Holders = dict[tuple[str, str], tuple[str, bytes]]  # (queue, key) -> (id, body) holding it


def refuse_taken_keys(
    envelopes: Sequence[Envelope], holders: Holders, on_conflict: OnConflict
) -> None:
    """With ``ERROR``: raise ``KeyConflict`` naming every key that a different message
    holds (the same id and body is a re-send, never a conflict)."""
    if on_conflict is not OnConflict.ERROR:
        return
    taken = [
        e.key
        for e in envelopes
        if e.key is not None and holders.get((e.queue, e.key), (e.id, e.body)) != (e.id, e.body)
    ]
    if taken:
        raise KeyConflict(envelopes[0].queue, [k for k in taken if k is not None])


def decide(
    e: Envelope,
    holder: tuple[str, bytes] | None,
    present: bool,
    on_conflict: OnConflict,
    room: dict[str, int],
) -> Outcome:
    """The outcome for ``e``, given who holds its key (``holder``, keyed messages) or
    whether its id is stored (``present``, unkeyed ones). A new message of a bounded
    queue takes a place in ``room`` (queue -> places left), or is ``FULL`` when none is
    left; a replacement or a duplicate takes none."""
    replace = on_conflict is OnConflict.REPLACE
    if e.key is not None:
        if holder == (e.id, e.body) and not replace:
            return Outcome.DUPLICATE
        if holder is not None and on_conflict is OnConflict.IGNORE:
            return Outcome.IGNORED
        outcome = Outcome.ENQUEUED if holder is None else Outcome.REPLACED
    else:
        if present and not replace:
            return Outcome.DUPLICATE
        outcome = Outcome.REPLACED if present else Outcome.ENQUEUED
    if outcome is Outcome.ENQUEUED and e.queue in room:
        if room[e.queue] <= 0:
            return Outcome.FULL
        room[e.queue] -= 1
    return outcome
