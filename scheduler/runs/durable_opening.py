"""Opening a durable run: what the worker's pools give each run's ``current_run()`` so
that a durable task's handler finds its journal (``scheduler/runs/durable.py``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Protocol

from tickwork.scheduler.backends import Backend, Envelope, OnConflict
from tickwork.scheduler.errors import TickworkError
from tickwork.scheduler.model.calls import Call
from tickwork.scheduler.model.handles import RunStatus, TaskInfo
from tickwork.scheduler.model.registry import TaskRegistry
from tickwork.scheduler.runs.durable import DurableRun
from tickwork.scheduler.runs.durable_support import DurableSupport, EventWaits
from tickwork.scheduler.runs.journal import JournalStore
from tickwork.scheduler.runs.results import read
from tickwork.scheduler.runs.tracing import producer_span


class DurableSettings(Protocol):
    """The settings a durable run reads (the app's ``Settings``)."""

    @property
    def durable_retention_s(self) -> float: ...

    @property
    def max_payload_bytes(self) -> int: ...


class DurableEvents(Protocol):
    """The part of ``app.events`` a durable run waits through."""

    @property
    def waits(self) -> EventWaits: ...


class CallBuilder(Protocol):
    """Builds a call's first message (the app's ``MessageBuilder``)."""

    def build(self, call: Call) -> tuple[str, Envelope]: ...


class DurableTasks(Protocol):
    """What opening a durable run reads of the app: its tasks and settings."""

    @property
    def registry(self) -> TaskRegistry: ...

    @property
    def settings(self) -> DurableSettings: ...


class DurableApp(DurableTasks, Protocol):
    """What a durable run needs of the app (an ``App``, or a worker's view of one)."""

    @property
    def builder(self) -> CallBuilder: ...

    @property
    def backend(self) -> Backend: ...

    @property
    def events(self) -> DurableEvents: ...


def open_durable(
    app: DurableApp, now_ms: Callable[[], int], run_id: str, task_name: str, queue: str
) -> DurableRun:
    """The durable side of run ``run_id`` of ``task_name`` in ``queue`` (its journal read
    on first use), over the app's own storage (``local_support``)."""
    return open_with(app, run_id, task_name, queue, local_support(app, now_ms))


def local_support(app: DurableApp, now_ms: Callable[[], int]) -> DurableSupport:
    """What a durable run works with, reached through ``app``'s backend and services."""
    return DurableSupport(
        JournalStore(app.backend.results),
        app.events.waits,
        AppChildren(app),
        now_ms,
        app.settings.max_payload_bytes,
    )


def open_with(
    app: DurableTasks, run_id: str, task_name: str, queue: str, support: DurableSupport
) -> DurableRun:
    """The durable side of a run over ``support``; a task not registered
    ``durable=True`` is refused with one clear error. Each entry is kept the setting
    ``durable_retention_s`` (7 days) after it is written, and after the wake-up of a
    sleep or wait."""
    task = app.registry.tasks.get(task_name)
    if task is None or not task.options.durable:
        raise TickworkError(
            f"task {task_name!r} is not durable: steps, sleeps and recorded values need "
            "@app.task(durable=True)"
        )
    retention = int(app.settings.durable_retention_s * 1000)
    return DurableRun(run_id, queue, task.options.retry, retention, support)


#: a child in one of these has not finished
_UNFINISHED = frozenset({RunStatus.SCHEDULED, RunStatus.READY, RunStatus.RUNNING})


class AppChildren:
    """A durable run's children, started and read through the app."""

    def __init__(self, app: DurableApp) -> None:
        self._app = app

    def start(self, call: Call, identity: str) -> str:
        """Enqueue ``call`` under ``identity`` unless the message it names is stored or
        has a result (a replay after a crash between the enqueue and its journal write);
        its id."""
        with producer_span(f"enqueue {call.task}") as sent:
            child_id, envelope = self._app.builder.build(replace(call, identity=identity))
            backend = self._app.backend
            if backend.messages.get(child_id) is None and not backend.results.get([child_id]):
                backend.messages.enqueue([envelope], OnConflict.IGNORE)
            sent(child_id, envelope.queue)
        return child_id

    def ended(self, child_ids: Sequence[str]) -> list[TaskInfo | None]:
        """Each child's final record (a child whose task keeps no results: failed when
        its message is in the poison store, else gone), None while it has not
        finished."""
        backend = self._app.backend
        ended: list[TaskInfo | None] = []
        for child in child_ids:
            info = read(backend, child)
            if info.status is RunStatus.UNKNOWN and (poisoned := backend.poison.get(child)):
                failure = poisoned.failure
                info = TaskInfo(
                    id=child,
                    status=RunStatus.FAILED,
                    error_type=failure.error_type,
                    error=failure.message,
                )
            ended.append(None if info.status in _UNFINISHED else info)
        return ended
