"""What the components of one worker process share, built once by ``workers/worker.py``.

A component takes the context and the one or two peers it works with, never the app
itself: ``WorkerContext.app`` is the narrow ``WorkerApp`` view."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from tickwork.scheduler.backends import Backend
from tickwork.scheduler.hooks import Hooks
from tickwork.workers.app_needs import WorkerApp
from tickwork.workers.config import WorkerConfig
from tickwork.workers.intake.flow import Counters, Pace, Permits
from tickwork.workers.intake.holdings import Holdings
from tickwork.workers.reporting.metrics import NoMetrics, WorkerMetrics


@dataclass(frozen=True, eq=False)
class WorkerContext:
    """One worker's shared parts: its app, settings, clock, the work it holds and the
    signals between its threads."""

    app: WorkerApp
    config: WorkerConfig
    backend: Backend
    #: the backend's clock, read locally (``CorrectedClock``): every component agrees
    #: with what the backend compares due times against
    now_ms: Callable[[], int]
    holdings: Holdings
    permits: Permits
    counters: Counters
    #: a ``NoMetrics`` when nothing counts (no metrics port, no activity log)
    metrics: NoMetrics
    #: set when the worker starts to stop; ``forced`` when running handlers are abandoned
    stopping: threading.Event
    forced: threading.Event
    #: set when something was made due here (a chain's next step, a woken waiter): the
    #: consumer claims at once instead of finishing its idle wait
    wake: threading.Event
    #: the prefetch that follows the handlers' pace and the claims' round trips (None when
    #: the worker was given a ``prefetch``)
    pace: Pace | None = None

    @property
    def hooks(self) -> Hooks:
        return self.app.hooks

    @property
    def counting(self) -> WorkerMetrics | None:
        """The metrics to count into, or None when nothing counts (no call per run)."""
        return self.metrics if isinstance(self.metrics, WorkerMetrics) else None

    def nudge(self) -> None:
        """Cut the consumer's idle wait short. Any thread."""
        self.wake.set()
