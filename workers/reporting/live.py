"""This worker's live changes (``scheduler.runs.changes``): each run's start and end,
published through ``backend.changes`` for the streams that listen (``GET
/api/v1/stream``, the dashboard). The handlers' threads only append to a list; a thread
of its own publishes what gathered, at most every ``every_s`` (20 ms), so a busy worker
sends one publish for many runs and an idle one sends each change at once. A publish
that fails is dropped (a live change is not kept for later) and said in the log once
until one succeeds again."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from itertools import count

from tickwork.scheduler import BackendError
from tickwork.scheduler.backends import Backend
from tickwork.scheduler.runs.changes import STARTED, RunChange
from tickwork.workers.intake.holdings import Work
from tickwork.workers.reporting.metrics import NoMetrics

log = logging.getLogger("tickwork.worker")


class LiveChanges(NoMetrics):
    """Gathers runs' changes as the worker's metrics hear them; ``run`` publishes them."""

    def __init__(
        self, backend: Backend, worker_id: str, now_ms: Callable[[], int], every_s: float
    ) -> None:
        self._backend = backend
        self._worker = worker_id
        self._now_ms = now_ms
        self._every_s = every_s
        self._gathered: list[bytes] = []
        self._lock = threading.Lock()
        self._waiting = threading.Event()
        self._seq = count()
        self._failing = False

    def started(self, work: Work) -> None:
        self._add(work, STARTED, None)

    def settled(self, work: Work, outcome: str, run_s: float | None = None) -> None:
        self._add(work, outcome, run_s)

    def _add(self, work: Work, event: str, run_s: float | None) -> None:
        message = work.message
        change = RunChange(
            event,
            message.id,
            message.task,
            message.queue,
            message.key,
            work.claim.attempt,
            self._now_ms(),
            self._worker,
            next(self._seq),
            run_s,
        )
        with self._lock:
            self._gathered.append(change.encode())
        self._waiting.set()

    def run(self, until: threading.Event) -> None:
        """Publish what gathered until ``until`` is set, then the rest."""
        while not until.is_set():
            if self._waiting.wait(0.5):
                self._publish()
                until.wait(self._every_s)  # what comes meanwhile goes out together
        self._publish()

    def _publish(self) -> None:
        with self._lock:
            changes, self._gathered = self._gathered, []
            self._waiting.clear()
        if not changes:
            return
        try:
            self._backend.changes.publish(changes)
        except BackendError as err:
            if not self._failing:
                log.warning("live changes not published (%s); dropped until it answers", err)
            self._failing = True
        else:
            self._failing = False
