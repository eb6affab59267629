"""This worker's part of the activity log (``scheduler/views/activity.py``): every
``activity_interval_s`` it appends, for each queue where it claimed or settled anything
since the last write, what it did there (counts, lateness and run time histograms), read
from the counts its metrics keep per thread. A write that fails is carried into the next
one (nothing is counted twice or lost while the backend comes back); the last interval
is written when the worker stops.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from tickwork.scheduler import BackendError
from tickwork.scheduler.backends import Backend
from tickwork.scheduler.views.activity import (
    COUNTS,
    LATENESS_BUCKETS,
    RUN_BUCKETS,
    Interval,
    activity_entry,
)
from tickwork.workers.reporting.metrics import WorkerMetrics

log = logging.getLogger("tickwork.worker")


class _Totals:
    """One queue's counts since the worker started, as of one snapshot."""

    __slots__ = ("counts", "lateness", "lateness_sum", "run", "run_sum")

    def __init__(self) -> None:
        self.counts = dict.fromkeys(COUNTS, 0)
        self.lateness = [0] * (len(LATENESS_BUCKETS) + 1)
        self.lateness_sum = 0.0
        self.run = [0] * (len(RUN_BUCKETS) + 1)
        self.run_sum = 0.0


class ActivityLog:
    """Writes this worker's intervals until ``until`` is set, then the last one."""

    def __init__(
        self,
        backend: Backend,
        metrics: WorkerMetrics,
        worker_id: str,
        interval_s: float,
        now_ms: Callable[[], int],
    ) -> None:
        self._backend = backend
        self._metrics = metrics
        self._worker_id = worker_id
        self._interval_s = interval_s
        self._now_ms = now_ms
        self._written: dict[str, _Totals] = {}  # per queue: the totals written so far
        self._since_ms = now_ms()

    def run(self, until: threading.Event) -> None:
        try:
            while not until.wait(self._interval_s):
                self.write()
        finally:
            self.write()

    def write(self) -> None:
        """Append what happened since the last successful write (nothing if nothing)."""
        now = self._now_ms()
        totals = self._totals()
        entries = []
        for queue, seen in sorted(totals.items()):
            before = self._written.get(queue) or _Totals()
            counts = {name: seen.counts[name] - before.counts[name] for name in COUNTS}
            if not any(counts.values()):
                continue
            interval = Interval(
                self._worker_id,
                self._since_ms,
                now,
                counts,
                [a - b for a, b in zip(seen.lateness, before.lateness, strict=True)],
                seen.lateness_sum - before.lateness_sum,
                [a - b for a, b in zip(seen.run, before.run, strict=True)],
                seen.run_sum - before.run_sum,
            )
            entries.append(activity_entry(queue, [interval]))
        if not entries:
            self._since_ms = now
            return
        try:
            self._backend.ledger.append(entries)
        except BackendError as err:
            log.warning("cannot write this worker's activity (kept for the next try): %s", err)
            return
        self._written = totals
        self._since_ms = now

    def _totals(self) -> dict[str, _Totals]:
        series, _claims = self._metrics.snapshot()
        totals: dict[str, _Totals] = {}
        for (queue, _task), one in series.items():
            into = totals.get(queue)
            if into is None:
                into = totals[queue] = _Totals()
            for name, count in one.counts.items():
                into.counts[name] += count
            into.lateness = [a + b for a, b in zip(into.lateness, one.lateness.counts, strict=True)]
            into.lateness_sum += one.lateness.total
            into.run = [a + b for a, b in zip(into.run, one.run.counts, strict=True)]
            into.run_sum += one.run.total
        return totals
