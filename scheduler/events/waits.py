"""A workflow step that waits for an event: ``wait_for(name, key=..., timeout=...)``.

The step is a message of the built-in task ``WAIT_TASK``. No thread waits: its first run
records when it times out and adds it to the waiters of ``(name, key)``, then snoozes
until that time (``Snooze``: the message is stored, due then). An event of that name
and key emitted meanwhile is written as the wait's outcome and wakes the message (due
now); its next run returns the event (as a dict, what a ``.s()`` step after it takes).
The timeout is that same stored message coming due: its run finds no event and fails
with ``WaitTimedOut`` (or returns None with ``on_timeout="continue"``).

Which of the event and the timeout wins is decided once, in the backend: both write the
wait's outcome as member 0 of a record of its own (``Batches.settle``: the first
outcome stays), and the run reads back whichever came first. Waiters are kept in the
ledger under ``(EVENTS_QUEUE, waiters_subject(name, key))``, at most ``WAITERS_MOST``
per name and key; ``key=None`` waits for the name whatever the event's key.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, ValidationError

from tickwork.scheduler.backends import Backend, LedgerEntry, MemberOutcome
from tickwork.scheduler.errors import InvalidMessage, TickworkError
from tickwork.scheduler.model.event_names import WAIT_MOST_S, check_name
from tickwork.scheduler.model.tasks import Call
from tickwork.scheduler.runs.snooze import Snooze

#: the built-in task of a wait step
WAIT_TASK = "tickwork.wait"

#: the queue under which the events' ledgers are kept (waiters, recent events)
EVENTS_QUEUE = "tickwork.events"

#: the most waiters kept per event name and key (the newest)
WAITERS_MOST = 1000

#: how long after its timeout a wait's own record is kept
_KEPT_AFTER_MS = 86_400_000

OnTimeout = Literal["fail", "continue"]


class WaitTimedOut(TickworkError):
    """A ``wait_for`` step saw no matching event before its timeout."""


class WaitingStep(BaseModel):
    """One waiting step, as the waiters' ledger lists it."""

    model_config = ConfigDict(frozen=True)

    id: str  # the wait step's message id (the message an event wakes)
    queue: str
    deadline_ms: int
    #: the record of the wait's outcome, when not the step's own (a durable run's wait)
    record: str | None = None

    def encode(self) -> bytes:
        return self.model_dump_json(exclude_none=True).encode()

    @property
    def record_id(self) -> str:
        """The record the event is written to as this wait's outcome."""
        return self.record or wait_record_id(self.id)


def wait_for(
    name: str,
    *,
    key: str | None = None,
    timeout: float | timedelta,
    on_timeout: OnTimeout = "fail",
    queue: str | None = None,
) -> Call:
    """A step that waits for an event named ``name`` (and, when given, with ``key``),
    emitted after the step starts, for at most ``timeout`` (seconds or a ``timedelta``,
    up to 30 days). It returns the event (a dict: ``id``, ``name``, ``key``, ``payload``,
    ``emitted_at``), which a ``.s()`` step after it takes first. After ``timeout`` it fails
    with ``WaitTimedOut`` (the workflow's failure rules apply), or with
    ``on_timeout="continue"`` returns None."""
    check_name(name)
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
    if not 0 < seconds <= WAIT_MOST_S:
        raise InvalidMessage(f"a wait's timeout is more than 0 and at most 30 days, not {timeout}")
    if on_timeout not in ("fail", "continue"):
        raise InvalidMessage(f"on_timeout is 'fail' or 'continue', not {on_timeout!r}")
    return Call(WAIT_TASK, args=(name, key, seconds, on_timeout), queue=queue)


def waiters_subject(name: str, key: str | None) -> str:
    """The ledger subject listing the waiters of ``name`` and ``key``."""
    return f"w:{name}#{'*' if key is None else 'k:' + key}"


def wait_record_id(message_id: str) -> str:
    """The id of the record holding wait ``message_id``'s deadline and outcome."""
    return f"wait:{message_id}"


def timeout_marker(now_ms: int) -> bytes:
    return json.dumps({"timeout": now_ms}).encode()


class Waits:
    """Runs wait steps (the handler of ``WAIT_TASK``) over a backend."""

    def __init__(self, backend: Callable[[], Backend], now_ms: Callable[[], int]) -> None:
        self._backend = backend
        self._now_ms = now_ms

    def run(
        self,
        message_id: str,
        queue: str,
        name: str,
        key: str | None,
        timeout_s: float,
        on_timeout: OnTimeout,
    ) -> Any:
        """One run of a wait step: the event if one came, else a snooze until the timeout,
        else (timed out) ``WaitTimedOut`` or None."""
        got = self.wait(wait_record_id(message_id), message_id, queue, (name, key), timeout_s)
        if got.state == "waiting":
            return Snooze(got.delay_s)
        return _ended(got.outcome, name, on_timeout)

    def wait(
        self,
        record_id: str,
        message_id: str,
        queue: str,
        event: tuple[str, str | None],
        timeout_s: float,
    ) -> EventWait:
        """One look at a wait for ``event`` (its name and key) kept in record
        ``record_id``, on behalf of message ``message_id`` of ``queue`` (the one an
        event wakes): the event's outcome if it came, the timeout's if it passed (the
        first of the two stays), else how long until the timeout (the message is listed
        among the event's waiters, to be woken)."""
        name, key = event
        backend = self._backend()
        now = self._now_ms()
        record = backend.batches.read(record_id, outcomes=True)
        if record is None or record.description is None:
            deadline = now + int(timeout_s * 1000)
            description = json.dumps({"deadline_ms": deadline, "name": name, "key": key})
            backend.batches.open(record_id, description.encode(), deadline + _KEPT_AFTER_MS)
        else:
            deadline = int(json.loads(record.description)["deadline_ms"])
            if 0 in record.outcomes:
                return EventWait("ended", record.outcomes[0])
        if now >= deadline:
            marker = MemberOutcome(
                record_id, 0, True, timeout_marker(now), deadline + _KEPT_AFTER_MS
            )
            backend.batches.settle([marker])
            settled = backend.batches.read(record_id, outcomes=True)
            outcome = settled.outcomes.get(0) if settled is not None else None
            return EventWait("ended", outcome or marker.outcome)
        own = record_id == wait_record_id(message_id)  # a wait step's: stored as before
        waiter = WaitingStep(
            id=message_id, queue=queue, deadline_ms=deadline, record=None if own else record_id
        )
        entry = LedgerEntry(
            EVENTS_QUEUE,
            waiters_subject(name, key),
            (waiter.encode(),),
            WAITERS_MOST,
            int(WAIT_MOST_S * 1000) + _KEPT_AFTER_MS,
        )
        backend.ledger.append([entry])
        return EventWait("waiting", b"", max(deadline - now, 1) / 1000)


class EventWait(NamedTuple):
    """Where a wait stands: ``ended`` (``outcome``: the event's JSON, or the timeout's
    marker, ``timed_out`` tells) or ``waiting`` (``delay_s`` until its timeout)."""

    state: Literal["ended", "waiting"]
    outcome: bytes
    delay_s: float = 0.0

    @property
    def timed_out(self) -> bool:
        value = json.loads(self.outcome)
        return isinstance(value, dict) and "timeout" in value and "name" not in value


def _ended(outcome: bytes, name: str, on_timeout: OnTimeout) -> Any:
    """What the wait step returns (or raises) given its outcome record."""
    value = json.loads(outcome)
    if isinstance(value, dict) and "timeout" in value and "name" not in value:
        if on_timeout == "continue":
            return None
        raise WaitTimedOut(f"no event {name!r} came before the wait's timeout")
    return value


def read_waiters(backend: Backend, name: str, key: str | None, now_ms: int) -> list[WaitingStep]:
    """The waiters an event named ``name`` with ``key`` reaches (those waiting for its
    key, and those waiting for any key), not yet past their deadline, each once."""
    subjects = [(EVENTS_QUEUE, waiters_subject(name, None))]
    if key is not None:
        subjects.append((EVENTS_QUEUE, waiters_subject(name, key)))
    found: dict[str, WaitingStep] = {}
    for records in backend.ledger.read_many(subjects, WAITERS_MOST):
        for record in records:
            try:
                waiter = WaitingStep.model_validate_json(record)
            except ValidationError:
                continue
            if waiter.deadline_ms > now_ms:
                found.setdefault(waiter.record_id, waiter)
    return list(found.values())
