"""This worker's live changes (``scheduler.runs.changes``): each run's start, progress
reports and end, published through ``backend.changes`` for the streams that listen (``GET
/api/v1/stream``, the dashboard).

Workers publish only while some stream listens (``backend.changes.listened``, which a
thread of its own reads every half second): only then is this told of runs (added to
the listeners of the worker's metrics), so while none does a run costs nothing here.
While one does, the handler's thread appends a tuple of plain values (no reference to
the run's objects, which would then live on); that thread turns them into changes and
publishes what gathered every ``every_s`` (20 ms) at most, so a busy worker sends one
publish for many runs. A publish that fails is dropped (a live change is a notice, not
a record) and said in the log once until one succeeds again."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from itertools import count

from tickwork.scheduler import BackendError
from tickwork.scheduler.backends import Backend
from tickwork.scheduler.runs.changes import PROGRESS, STARTED, encoded
from tickwork.scheduler.runs.context import RunInfo
from tickwork.workers.intake.holdings import Work
from tickwork.workers.reporting.metrics import NoMetrics, WorkerMetrics

log = logging.getLogger("tickwork.worker")

#: seconds between two looks whether someone listens (a stream's server waits
#: ``READY_AFTER_S`` before it says it hears: ``tickwork/api/stream.py``)
PRESENCE_EVERY_S = 0.5

#: what a handler's thread appends: (event, id, task, queue, key, attempt, at_ms, run_s,
#: progress, note)
_Seen = tuple[str, str, str, str, str | None, int, int, float | None, float | None, str | None]


class LiveChanges(NoMetrics):
    """Gathers runs' changes as the worker's metrics hear them; ``run`` publishes them."""

    def __init__(
        self,
        backend: Backend,
        counting: WorkerMetrics,
        worker_id: str,
        now_ms: Callable[[], int],
        every_s: float,
    ) -> None:
        self._backend = backend
        self._counting = counting
        self._worker = worker_id
        self._now_ms = now_ms
        self._every_s = max(every_s, backend.changes.gather_s)
        self._seen: deque[_Seen] = deque()
        self._seq = count()
        self._failing = False
        #: someone listens (set by ``run``'s thread): this is told of runs
        self.listened = False

    def started(self, work: Work) -> None:
        m = work.message
        at_ms = work.started_ms or self._now_ms()
        attempt = work.claim.attempt
        self._seen.append((STARTED, m.id, m.task, m.queue, m.key, attempt, at_ms, None, None, None))

    def settled(self, work: Work, outcome: str, run_s: float | None = None) -> None:
        m = work.message
        at_ms = self._now_ms()
        attempt = work.claim.attempt
        self._seen.append(
            (outcome, m.id, m.task, m.queue, m.key, attempt, at_ms, run_s, None, None)
        )

    def progressed(self, info: RunInfo, fraction: float, note: str | None) -> None:
        """A run reported its progress (``current_run().progress``), while someone listens."""
        if self.listened:
            at_ms = self._now_ms()
            i = info
            self._seen.append(
                (
                    PROGRESS,
                    i.message_id,
                    i.task,
                    i.queue,
                    i.key,
                    i.attempt,
                    at_ms,
                    None,
                    fraction,
                    note,
                )
            )

    def run(self, until: threading.Event) -> None:
        """Publish while someone listens until ``until`` is set, then what is left."""
        looked = 0.0
        while not until.is_set():
            if time.monotonic() - looked >= PRESENCE_EVERY_S:
                self._hear(self._someone_listens())
                looked = time.monotonic()
            self._publish()
            until.wait(self._every_s if self.listened else PRESENCE_EVERY_S)
        self._hear(False)
        self._publish()

    def _hear(self, listened: bool) -> None:
        """Be told of runs (by the worker's metrics) only while someone listens: a worker
        nobody watches makes no call here."""
        if listened and not self.listened:
            self._counting.add(self)
        elif self.listened and not listened:
            self._counting.remove(self)
        self.listened = listened

    def _someone_listens(self) -> bool:
        try:
            return self._backend.changes.listened()
        except BackendError:
            return self.listened  # unknown: as it was

    def _publish(self) -> None:
        seen = self._seen
        changes = []
        while seen:
            event, message_id, task, queue, key, attempt, at_ms, run_s, done, note = seen.popleft()
            seq = next(self._seq)
            change = encoded(
                event, message_id, task, queue, key, attempt, at_ms, self._worker, seq, run_s,
                done, note,
            )  # fmt: skip
            changes.append(change)
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
