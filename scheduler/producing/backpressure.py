"""Producers and bounded queues: write what fits, wait with backoff for the rest, or give
up with ``QueueFull``.

A bounded enqueue answers ``FULL`` for each message its queue had no room for and writes
the others (``Messages.enqueue(..., bounded=True)``). ``write_bounded`` re-sends only the
refused ones, after a pause that doubles from 10 ms to half a second (a full queue drains
at the workers' pace: polling it faster buys nothing), until all are written or the
timeout passes. Re-sending is safe: a refused message was not written, and a message
written meanwhile by another attempt answers ``DUPLICATE``.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Sequence

from tickwork.scheduler.backends import Backend, Envelope, OnConflict, Outcome
from tickwork.scheduler.backends.outcomes import WRITES
from tickwork.scheduler.errors import QueueFull

FIRST_PAUSE_S = 0.01
LONGEST_PAUSE_S = 0.5


def write_bounded(
    backend: Backend,
    envelopes: Sequence[Envelope],
    on_conflict: OnConflict,
    *,
    block: bool = True,
    timeout_s: float = math.inf,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[list[Outcome], float]:
    """Store ``envelopes`` within their queues' bounds: (outcomes, seconds waited).

    Raises ``QueueFull`` (listing what was written) when a queue is still full after
    ``timeout_s``, or at once with ``block=False``; nothing beyond what fit is written."""
    outcomes = backend.messages.enqueue(envelopes, on_conflict, bounded=True)
    if Outcome.FULL not in outcomes:
        return outcomes, 0.0
    return write_refused(
        backend, envelopes, outcomes, on_conflict, block=block, timeout_s=timeout_s, sleep=sleep
    )


async def awrite_bounded(
    backend: Backend,
    envelopes: Sequence[Envelope],
    on_conflict: OnConflict,
    *,
    block: bool = True,
    timeout_s: float = math.inf,
) -> tuple[list[Outcome], float]:
    """``write_bounded`` from an event loop: the first write through ``Messages.aenqueue``
    (on Redis, from the loop itself); waiting for room, if a queue is full, in a thread."""
    outcomes = await backend.messages.aenqueue(envelopes, on_conflict, bounded=True)
    if Outcome.FULL not in outcomes:
        return outcomes, 0.0
    return await asyncio.to_thread(
        write_refused, backend, envelopes, outcomes, on_conflict, block=block, timeout_s=timeout_s
    )


def write_refused(
    backend: Backend,
    envelopes: Sequence[Envelope],
    outcomes: list[Outcome],
    on_conflict: OnConflict,
    *,
    block: bool,
    timeout_s: float,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[list[Outcome], float]:
    """Re-send the messages a first bounded write answered ``FULL`` (in ``outcomes``,
    completed in place) until all are written: (outcomes, seconds waited)."""
    refused = [i for i, outcome in enumerate(outcomes) if outcome is Outcome.FULL]
    started = time.monotonic()
    deadline = started + timeout_s
    pause = FIRST_PAUSE_S
    while refused:
        left = deadline - time.monotonic()
        if not block or left <= 0:
            raise full_error(backend, envelopes, outcomes, time.monotonic() - started)
        sleep(min(pause, left))
        pause = min(pause * 2, LONGEST_PAUSE_S)
        again = backend.messages.enqueue([envelopes[i] for i in refused], on_conflict, bounded=True)
        for i, outcome in zip(refused, again, strict=True):
            outcomes[i] = outcome
        refused = [i for i in refused if outcomes[i] is Outcome.FULL]
    return outcomes, time.monotonic() - started


def full_error(
    backend: Backend, envelopes: Sequence[Envelope], outcomes: Sequence[Outcome], waited_s: float
) -> QueueFull:
    """The ``QueueFull`` for a call whose refused messages stayed refused."""
    refused = [e for e, o in zip(envelopes, outcomes, strict=True) if o is Outcome.FULL]
    written = [e.id for e, o in zip(envelopes, outcomes, strict=True) if o in WRITES]
    queue = refused[0].queue
    return QueueFull(queue, backend.queues.bounds().get(queue), written, len(refused), waited_s)
