"""What a worker needs from its app, as a protocol: the wiring (``workers/worker.py``)
is the one worker module that sees ``App``; every component is given this narrower view
(through ``WorkerContext.app``), so what the worker reaches for is listed in one place."""

from __future__ import annotations

from typing import Any, Protocol

from tickwork.scheduler.backends import Backend
from tickwork.scheduler.events.service import Events
from tickwork.scheduler.hooks import Hooks
from tickwork.scheduler.model.registry import TaskRegistry
from tickwork.scheduler.model.tasks import TaskFunction
from tickwork.scheduler.producing.building import MessageBuilder
from tickwork.scheduler.schedules.service import Schedules
from tickwork.scheduler.settings import Settings
from tickwork.scheduler.workflows.service import Batches


class WorkerApp(Protocol):
    """The app as a worker sees it: its tasks and hooks, how it builds messages, and the
    services a run's end writes through (schedules, batches, events)."""

    @property
    def backend(self) -> Backend: ...

    @property
    def registry(self) -> TaskRegistry: ...

    @property
    def hooks(self) -> Hooks: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def builder(self) -> MessageBuilder: ...

    @property
    def schedules(self) -> Schedules: ...

    @property
    def batches(self) -> Batches: ...

    @property
    def events(self) -> Events: ...

    @property
    def tasks(self) -> dict[str, TaskFunction[..., Any]]:
        """The application's tasks (tickwork's own left out)."""
        ...

    def result_retention_ms(self, task: str) -> int | None:
        """How long ``task`` keeps its results, in ms (None: it keeps none)."""
        ...
