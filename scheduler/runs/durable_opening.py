"""Opening a durable run: what the worker's pools give each run's ``current_run()`` so
that a durable task's handler finds its journal (``scheduler/runs/durable.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from tickwork.scheduler.backends import Backend
from tickwork.scheduler.errors import TickworkError
from tickwork.scheduler.model.registry import TaskRegistry
from tickwork.scheduler.runs.durable import DurableRun, DurableSupport, EventWaits
from tickwork.scheduler.runs.journal import JournalStore


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


class DurableApp(Protocol):
    """What a durable run needs of the app (an ``App``, or a worker's view of one)."""

    @property
    def backend(self) -> Backend: ...

    @property
    def registry(self) -> TaskRegistry: ...

    @property
    def settings(self) -> DurableSettings: ...

    @property
    def events(self) -> DurableEvents: ...


def open_durable(
    app: DurableApp, now_ms: Callable[[], int], run_id: str, task_name: str, queue: str
) -> DurableRun:
    """The durable side of run ``run_id`` of ``task_name`` in ``queue`` (its journal read
    on first use); a task not registered ``durable=True`` is refused with one clear
    error. Each entry is kept the setting ``durable_retention_s`` (7 days) after it is
    written, and after the wake-up of a sleep or wait."""
    task = app.registry.tasks.get(task_name)
    if task is None or not task.options.durable:
        raise TickworkError(
            f"task {task_name!r} is not durable: steps, sleeps and recorded values need "
            "@app.task(durable=True)"
        )
    retention = int(app.settings.durable_retention_s * 1000)
    support = DurableSupport(
        JournalStore(app.backend.results), app.events.waits, now_ms, app.settings.max_payload_bytes
    )
    return DurableRun(run_id, queue, task.options.retry, retention, support)
