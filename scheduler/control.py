"""Steering stored messages: listing schedules and aborting runs (the logic behind
``App.schedules`` and ``App.abort``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from scheduler.backends import AbortRequest, Backend, State, StoredMessage
from scheduler.clock import to_datetime
from scheduler.message import Message
from triggers import Trigger

#: an abort request outlives the run it targets by this much past twice its timeout, so a
#: redelivery after a worker crash is stopped too
ABORT_MARGIN_MS = 60_000


class AbortResult(StrEnum):
    """What ``App.abort`` did."""

    REQUESTED = "requested"  # the message is running: the worker holding it stops it
    CANCELLED = "cancelled"  # the message was pending: it was cancelled and never runs
    NOT_FOUND = "not_found"  # nothing is stored under that id or key


def abort(
    backend: Backend, stored: StoredMessage | None, continue_chain: bool, now_ms: int
) -> AbortResult:
    """Abort ``stored``: request a stop if it runs, cancel it if it waits.

    A message claimed between the read and the cancel runs, but its ack is refused (the
    same fence as ``cancel``): its chain ends there."""
    if stored is None:
        return AbortResult.NOT_FOUND
    envelope = stored.envelope
    if stored.state is not State.RUNNING:
        deleted = backend.delete(envelope.id, envelope.queue)
        return AbortResult.CANCELLED if deleted else AbortResult.NOT_FOUND
    expires_ms = now_ms + 2 * envelope.timeout_ms + ABORT_MARGIN_MS
    backend.request_abort(
        AbortRequest(envelope.id, envelope.queue, continue_chain, now_ms, expires_ms)
    )
    return AbortResult.REQUESTED


@dataclass(frozen=True)
class ScheduleInfo:
    """A keyed recurring message as ``tickwork schedules`` shows it."""

    queue: str
    key: str
    task: str
    trigger: Trigger
    next_run: datetime
    last_run: datetime | None
    misfires: int
    state: State


def schedules(backend: Backend, queue: str | None = None) -> list[ScheduleInfo]:
    """Keyed recurring messages (of ``queue``, or all) with next run, last run, misfires."""
    result = []
    for stored in backend.keyed(queue):
        message = Message.decode(stored.envelope.body)
        if message.trigger is None or message.key is None:
            continue
        result.append(
            ScheduleInfo(
                message.queue,
                message.key,
                message.task,
                message.trigger,
                to_datetime(stored.envelope.due_ms),
                message.last_run_at,
                message.misfires,
                stored.state,
            )
        )
    return result


def same_schedule(a: Trigger, b: Trigger) -> bool:
    """Equal apart from the anchor that enqueue fills in."""
    ignore = {"start", "delay", "at"}
    return type(a) is type(b) and a.model_dump(exclude=ignore) == b.model_dump(exclude=ignore)
