"""From one emitted event to a message per subscriber and a wake per waiter.

``app.emit`` stores the event as one message (of the built-in task ``EVENT_TASK``): one
atomic write on every backend, inside the caller's transaction on PostgreSQL. A worker
runs it like any message; its run (``FanOut.run``) delivers it:

1. It claims the event in the event's own record (``event:{id}``, member 0: the first
   writer stays): a second emit of the same event id, whenever it comes within the
   record's life (``batch_retention_s``), finds another message's claim and delivers
   nothing. A redelivery of the same message (its worker was killed) goes on.
2. It writes one message per matching subscription (``stored_subscriptions``), each
   with an id derived from the event and the subscriber, then marks each subscriber done
   in the event's record. A run killed between the two writes again: a delivery still
   stored is a duplicate that is not written twice; one that already ran runs again,
   the only duplicate there is (from a killed worker).
3. It writes the event as the outcome of each waiter of its name and key
   (``scheduler.events.waits``) and wakes it.
4. It appends the event to the recent events (``RECENT_SUBJECT``, read by the dashboard
   and ``app.events.recent``).
"""

from __future__ import annotations

import logging
import time
import zlib
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from tickwork.scheduler.backends import (
    Backend,
    Envelope,
    LedgerEntry,
    MemberOutcome,
    OnConflict,
    Waiter,
)
from tickwork.scheduler.events.subscriptions import Subscription, stored_subscriptions
from tickwork.scheduler.events.waits import EVENTS_QUEUE, read_waiters
from tickwork.scheduler.events.workflows import WORKFLOW_TASK
from tickwork.scheduler.ids import identity_chain_id
from tickwork.scheduler.model.event_names import Event
from tickwork.scheduler.model.message import Message
from tickwork.scheduler.model.tasks import Call
from tickwork.scheduler.producing.building import MessageBuilder

log = logging.getLogger("tickwork.events")

#: the built-in task of an emitted event's message
EVENT_TASK = "tickwork.event"

#: the ledger subject of the recent events
RECENT_SUBJECT = "recent"

#: how many recent events are kept, and for how long
RECENT_KEEP = 1000
RECENT_TTL_MS = 7 * 86_400_000

#: how long a wake goes on trying a wait step that is running (it snoozes in a moment)
_WAKE_TRIES_S = 5.0


class Delivered(BaseModel):
    """A recent event: what was emitted and whom it reached."""

    model_config = ConfigDict(frozen=True)

    event: Event
    subscribers: list[str]  # the tasks it was delivered to (in this run)
    waiters: int  # the waiting steps it woke
    duplicate: bool = False  # the same event id was emitted before: delivered nothing

    def encode(self) -> bytes:
        return self.model_dump_json(exclude_defaults=True).encode()


def event_record_id(event_id: str) -> str:
    return f"event:{event_id}"


def subscriber_member(task: str) -> int:
    """The member of the event's record that marks ``task`` as delivered (never 0)."""
    return 1 + zlib.crc32(task.encode()) % 0x3FFF_FFFF


def delivery_identity(event_id: str, task: str) -> str:
    """The identity (hence the message id) of ``event_id``'s delivery to ``task``."""
    return f"event:{event_id}:{task}"


class FanOut:
    """Runs event messages (the handler of ``EVENT_TASK``)."""

    def __init__(
        self,
        backend: Callable[[], Backend],
        builder: Callable[[], MessageBuilder],
        now_ms: Callable[[], int],
        retention: timedelta,
    ) -> None:
        """``backend``, ``builder`` and ``now_ms`` are read at each use: the app's may be
        replaced (``use_backend``, a test's clock)."""
        self._backend = backend
        self._builder = builder
        self._now_ms = now_ms
        self._retention_ms = retention // timedelta(milliseconds=1)

    def run(self, message_id: str, event: Event) -> dict[str, Any]:
        """Deliver ``event`` (carried by message ``message_id``); what it did."""
        backend = self._backend()
        record_id = event_record_id(event.id)
        expires = self._now_ms() + self._retention_ms
        # the message and the event's time: a redelivery of this message claims the same,
        # a second emit of the event id (the same message id, a later time) does not
        mine = f"{message_id} {event.emitted_at.timestamp():.3f}".encode()
        backend.batches.settle([MemberOutcome(record_id, 0, False, mine, expires)])
        record = backend.batches.read(record_id, outcomes=True)
        done = dict(record.outcomes) if record is not None else {}
        if done.get(0, mine) != mine:
            log.info("event %s (%s) was emitted before: not delivered again", event.id, event.name)
            self._remember(
                backend, Delivered(event=event, subscribers=[], waiters=0, duplicate=True)
            )
            return {"duplicate": True}
        wanted = [s for s in stored_subscriptions(backend) if s.wants(event.name)]
        fresh = [s for s in wanted if subscriber_member(s.task) not in done]
        if fresh:
            backend.messages.enqueue([self._delivery(event, s) for s in fresh], OnConflict.IGNORE)
            marks = [
                MemberOutcome(record_id, subscriber_member(s.task), False, s.task.encode(), expires)
                for s in fresh
            ]
            backend.batches.settle(marks)
        woken = self._wake_waiters(backend, event)
        delivered = Delivered(event=event, subscribers=[s.task for s in fresh], waiters=woken)
        self._remember(backend, delivered)
        return {"subscribers": delivered.subscribers, "waiters": woken}

    def _delivery(self, event: Event, subscription: Subscription) -> Envelope:
        """The message that hands ``event`` to ``subscription``'s task: built as the task
        declares it when this app knows the task, else from the subscription's options.
        Stamped with the event's time, so a second fan-out builds the same message."""
        identity = delivery_identity(event.id, subscription.task)
        argument = event.model_dump(mode="json")
        emitted = event.emitted_at
        emitted_ms = int(emitted.timestamp() * 1000)
        if subscription.workflow is not None:  # its run starts the workflow's
            args = (subscription.task, argument)
            start = Call(WORKFLOW_TASK, args=args, identity=identity, queue=subscription.queue)
            return self._builder().build(start, emitted_ms, emitted)[1]
        if subscription.task in self._builder().registry.tasks:
            call = Call(subscription.task, args=(argument,), identity=identity)
            return self._builder().build(call, emitted_ms, emitted)[1]
        message = Message(
            id=identity_chain_id(subscription.queue, identity),
            queue=subscription.queue,
            task=subscription.task,
            args=[argument],
            priority=subscription.priority,
            max_attempts=subscription.max_attempts,
            timeout_s=subscription.timeout_s,
            scheduled_at=emitted,
            enqueued_at=emitted,
        )
        return message.envelope(emitted_ms)

    def _wake_waiters(self, backend: Backend, event: Event) -> int:
        """Write ``event`` as the outcome of each of its waiters and wake them; how many
        it reached first (a waiter that timed out before keeps its timeout)."""
        now = self._now_ms()
        waiters = read_waiters(backend, event.name, event.key, now)
        if not waiters:
            return 0
        body = event.model_dump_json().encode()
        outcomes = [
            MemberOutcome(w.record_id, 0, False, body, w.deadline_ms + 86_400_000) for w in waiters
        ]
        backend.batches.settle(outcomes)
        pending = [Waiter("", w.queue, None, w.id) for w in waiters]
        give_up = time.monotonic() + _WAKE_TRIES_S
        while pending:
            woken = backend.limits.wake(pending)
            # False: gone (it ran, or timed out) or running: a running wait step is about
            # to snooze, so it is woken again once it has
            running = [
                w
                for w, ok in zip(pending, woken, strict=True)
                if not ok and backend.messages.get(w.message_id, w.queue) is not None
            ]
            if not running or time.monotonic() > give_up:
                break
            pending = running
            time.sleep(0.05)
        return len(waiters)

    def _remember(self, backend: Backend, delivered: Delivered) -> None:
        entry = LedgerEntry(
            EVENTS_QUEUE, RECENT_SUBJECT, (delivered.encode(),), RECENT_KEEP, RECENT_TTL_MS
        )
        backend.ledger.append([entry])


def read_recent(backend: Backend, limit: int) -> list[Delivered]:
    """The newest ``limit`` events delivered, newest first."""
    found = []
    for record in backend.ledger.read(EVENTS_QUEUE, RECENT_SUBJECT, limit):
        try:
            found.append(Delivered.model_validate_json(record))
        except ValidationError:
            continue
    return found


def event_argument(value: Any) -> Event:
    """The event a fan-out run was given (its message's one argument)."""
    if isinstance(value, Event):
        return value
    if isinstance(value, str | bytes):
        return Event.model_validate_json(value)
    return Event.model_validate(value)
