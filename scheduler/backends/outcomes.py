"""What enqueue does with each message, decided the same way by the backends that decide
in Python (SQLite, Cassandra; Redis decides in its enqueue script): key conflicts,
re-sends, replacements, and the room left in bounded queues."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tickwork.scheduler.backends.base import Envelope, OnConflict, Outcome
from tickwork.scheduler.errors import KeyConflict

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


@dataclass
class Plan:
    """What a careful enqueue writes: each envelope's outcome, the envelopes to write in
    order (``writes``), how many new messages each queue gets (``added``: a replacement
    adds none) and how many writes each queue gets (``written``, for its counter)."""

    outcomes: list[Outcome] = field(default_factory=list)
    writes: list[Envelope] = field(default_factory=list)
    added: dict[str, int] = field(default_factory=dict)
    written: dict[str, int] = field(default_factory=dict)


def plan(
    envelopes: Sequence[Envelope],
    holders: Holders,
    present: set[str],
    on_conflict: OnConflict,
    room: dict[str, int],
) -> Plan:
    """Decide every envelope in order, as if the earlier ones were written already (a
    later one with the same key or id sees them): ``holders`` and ``present`` are
    updated as it goes. Raises ``KeyConflict`` first with ``ERROR`` (``refuse_taken_keys``)."""
    refuse_taken_keys(envelopes, holders, on_conflict)
    result = Plan()
    for e in envelopes:
        holder = holders.get((e.queue, e.key)) if e.key is not None else None
        outcome = decide(e, holder, e.id in present, on_conflict, room)
        result.outcomes.append(outcome)
        if outcome not in WRITES:
            continue
        if outcome is Outcome.ENQUEUED:
            result.added[e.queue] = result.added.get(e.queue, 0) + 1
        if e.key is not None:
            holders[(e.queue, e.key)] = (e.id, e.body)
        else:
            present.add(e.id)
        result.writes.append(e)
        result.written[e.queue] = result.written.get(e.queue, 0) + 1
    return result
