"""What a durable run (``scheduler/runs/durable.py``) works with, as protocols the app's
services meet: its journal's store, the waits for events (``app.events.waits``), how it
starts children (``child_of``: each names its parent) and reads how they ended, the
clock."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from tickwork.scheduler.model.calls import Call
from tickwork.scheduler.model.handles import TaskInfo
from tickwork.scheduler.model.headers import PARENT
from tickwork.scheduler.runs.journal import JournalEntry


class Journals(Protocol):
    """Where runs' journals are read and written (``scheduler.runs.journal.JournalStore``)."""

    def read(self, run_id: str) -> list[JournalEntry]: ...

    def write(
        self, run_id: str, entries: Sequence[tuple[int, JournalEntry]], ttl_ms: int
    ) -> None: ...


class WaitLook(Protocol):
    """Where a wait for an event stands (``scheduler.events.waits.EventWait``)."""

    @property
    def state(self) -> str: ...  # "ended" or "waiting"

    @property
    def outcome(self) -> bytes: ...

    @property
    def delay_s(self) -> float: ...

    @property
    def timed_out(self) -> bool: ...


class EventWaits(Protocol):
    """The waits for events (``app.events.waits``): one look at a wait kept in a record
    of its own, its message listed among the event's waiters to be woken."""

    def wait(
        self,
        record_id: str,
        message_id: str,
        queue: str,
        event: tuple[str, str | None],
        timeout_s: float,
    ) -> WaitLook: ...


class Children(Protocol):
    """How a durable run starts other tasks and reads how they ended."""

    def start(self, call: Call, identity: str) -> str:
        """Enqueue ``call`` under ``identity`` (the same identity names the same
        message), unless the message it names is stored or has a result already; its
        id."""
        ...

    def ended(self, child_ids: Sequence[str]) -> list[TaskInfo | None]:
        """Each child's final record, or None while it has not finished."""
        ...


@dataclass(frozen=True, slots=True)
class DurableSupport:
    """What a durable run works with: its journal's store, the waits for events, how it
    starts children, the clock (ms, the backend's), the most bytes a step's value may
    take."""

    store: Journals
    waits: EventWaits
    children: Children
    now_ms: Callable[[], int]
    max_bytes: int


def child_of(call: Call, queue: str, run_id: str) -> Call:
    """``call`` as a child of the durable run ``run_id`` of ``queue``: its ``PARENT``
    header names the run, which the child's worker wakes once the child ended
    (``workers/settling/parent_wake.py``)."""
    parent = json.dumps([queue, run_id])
    return replace(call, headers={**(call.headers or {}), PARENT: parent})
