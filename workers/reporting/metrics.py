"""Prometheus metrics of one worker process, served on ``/metrics`` (``--metrics-port``,
``endpoint.py``).

Counters per queue and task of what this process saw happen to the messages it claimed
(claimed, succeeded, retried, poisoned, redelivered, aborted); histograms of lateness
(due time to start), run time and the claim round trip; gauges of the work it holds and
runs now (read from ``Holdings`` at each scrape) and of the thread pool's threads taking
work. Everything is counted in the worker process, where claims are taken and runs are
settled, so it is correct with the process pool (its children only run handlers). Each
worker has a registry of its own, not the global one: several workers in one process
(tests) do not mix. The same counts feed the activity log (``workers/reporting/activity.py``);
with neither a port nor the log (nor OpenTelemetry's meter provider: ``otel_metrics.py``,
which reads these tallies) the worker uses ``NoMetrics``, whose methods do nothing.

The backend-wide numbers (depth per queue, poison, bounds, schedules) are the exporter's
(``tickwork/exporter.py``): every worker publishing them would multiply them.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Callable, Iterator
from itertools import accumulate
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from tickwork.scheduler.views.activity import COUNTS, LATENESS_BUCKETS, RUN_BUCKETS
from tickwork.workers.intake.holdings import Holdings, Work
from tickwork.workers.pools.pool import HandlerPool
from tickwork.workers.pools.thread_pool import ThreadPool

#: seconds; one claim call to the backend
CLAIM_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0)


class NoMetrics:
    """The worker's metrics when none are served: every call does nothing."""

    def claimed(self, work: Work) -> None:
        """A claim was accepted (decoded, its task known)."""

    def claim_took(self, queue: str, seconds: float) -> None:
        """One claim call to the backend for ``queue`` took ``seconds``."""

    def started(self, work: Work) -> None:
        """A handler was started (``work.started_ms`` is set)."""

    def settled(self, work: Work, outcome: str, run_s: float | None = None) -> None:
        """A run ended as ``outcome`` (one of ``OUTCOMES``), after ``run_s`` seconds."""

    def crashed(self, work: Work) -> None:
        """The process running ``work``'s handler died (a process pool)."""

    def watch_pool(self, pool: HandlerPool[Any]) -> None:
        """Read how many of ``pool``'s threads take work at each scrape (a thread pool)."""


class WorkerMetrics(NoMetrics):
    """The worker's metrics, in ``registry`` (served by ``endpoint.py``).

    Counted in plain Python, each thread in its own tally (no lock on the message path),
    and turned into Prometheus families only when scraped: ``prometheus_client``'s
    labelled counters and histograms, updated per message, cost a no-op worker about a
    quarter of its speed."""

    def __init__(self, holdings: Holdings) -> None:
        self._local = threading.local()
        self._tallies: list[_Tally] = []  # one per thread that reported; merged at a scrape
        self._lock = threading.Lock()  # guards the list, not the tallies
        self.registry = CollectorRegistry()
        self.registry.register(_WorkerCollector(self))
        self._held = _HeldCollector(holdings)
        self.registry.register(self._held)
        #: told of each run and claim too (OpenTelemetry's ``otel_metrics.py``, the live
        #: changes of ``live.py``): each one ``add``ed
        self.also: tuple[NoMetrics, ...] = ()

    def add(self, listener: NoMetrics) -> None:
        """Tell ``listener`` of each claim, start and end too."""
        self.also = (*self.also, listener)

    def remove(self, listener: NoMetrics) -> None:
        """Tell ``listener`` nothing more."""
        self.also = tuple(other for other in self.also if other is not listener)

    def watch_pool(self, pool: HandlerPool[Any]) -> None:
        if isinstance(pool, ThreadPool):
            self._held.taking_work = lambda: pool.taking_work

    def _tally(self) -> _Tally:
        """This thread's own counts: updated without a lock (one writer each)."""
        try:
            tally: _Tally = self._local.tally
        except AttributeError:
            tally = self._local.tally = _Tally()
            with self._lock:
                self._tallies.append(tally)
        return tally

    def claimed(self, work: Work) -> None:
        self._tally().of(work).counts["claimed"] += 1

    def claim_took(self, queue: str, seconds: float) -> None:
        claims = self._tally().claims
        buckets = claims.get(queue)
        if buckets is None:
            buckets = claims[queue] = _Buckets(CLAIM_BUCKETS)
        buckets.observe(seconds)
        for listener in self.also:
            listener.claim_took(queue, seconds)

    def started(self, work: Work) -> None:
        self._tally().of(work).lateness.observe(work.lateness_ms / 1000)
        for listener in self.also:
            listener.started(work)

    def settled(self, work: Work, outcome: str, run_s: float | None = None) -> None:
        series = self._tally().of(work)
        series.counts[outcome] += 1
        if run_s is not None:
            series.run.observe(run_s)
        for listener in self.also:
            listener.settled(work, outcome, run_s)

    def crashed(self, work: Work) -> None:
        self._tally().of(work).counts["crashed"] += 1

    def snapshot(self) -> tuple[dict[tuple[str, str], _Series], dict[str, _Buckets]]:
        """Everything the threads counted so far, added up (for a scrape). A count made
        while this reads may show at the next scrape."""
        with self._lock:
            tallies = list(self._tallies)
        series: dict[tuple[str, str], _Series] = {}
        claims: dict[str, _Buckets] = {}
        for tally in tallies:
            for key, one in list(tally.series.items()):
                series.setdefault(key, _Series()).add(one)
            for queue, buckets in list(tally.claims.items()):
                claims.setdefault(queue, _Buckets(CLAIM_BUCKETS)).add(buckets)
        return series, claims


class _Tally:
    """What one thread counted, per (queue, task), and its claim round trips per queue."""

    __slots__ = ("claims", "series")

    def __init__(self) -> None:
        self.series: dict[tuple[str, str], _Series] = {}
        self.claims: dict[str, _Buckets] = {}

    def of(self, work: Work) -> _Series:
        key = (work.claim.queue, work.message.task)
        found = self.series.get(key)
        if found is None:
            found = self.series[key] = _Series()
        return found


class _Buckets:
    """One histogram's counts per bucket (the last one is +Inf) and its sum."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1  # le: the first bound >= value
        self.total += value

    def add(self, other: _Buckets) -> None:
        for index, count in enumerate(list(other.counts)):
            self.counts[index] += count
        self.total += other.total

    def cumulative(self) -> list[tuple[str, float]]:
        """Prometheus' buckets: (upper bound, observations at or below it)."""
        bounds = [repr(float(b)) for b in self.bounds] + ["+Inf"]
        return list(zip(bounds, accumulate(self.counts), strict=True))


class _Series:
    """What one worker counted for one (queue, task)."""

    __slots__ = ("counts", "lateness", "run")

    def __init__(self) -> None:
        self.counts = dict.fromkeys(COUNTS, 0)
        self.lateness = _Buckets(LATENESS_BUCKETS)
        self.run = _Buckets(RUN_BUCKETS)

    def add(self, other: _Series) -> None:
        for name, count in list(other.counts.items()):
            self.counts[name] += count
        self.lateness.add(other.lateness)
        self.run.add(other.run)


class _WorkerCollector(Collector):
    """Turns a ``WorkerMetrics`` snapshot into Prometheus families at scrape time."""

    def __init__(self, metrics: WorkerMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        series, claims = self._metrics.snapshot()
        labels = ["queue", "task"]
        counters = {
            name: CounterMetricFamily(f"tickwork_{name}", f"Messages {name}", labels=labels)
            for name in COUNTS
        }
        lateness = HistogramMetricFamily(
            "tickwork_lateness_seconds",
            "From a message's due time to its handler's start",
            labels=labels,
        )
        run = HistogramMetricFamily("tickwork_run_seconds", "How long handlers ran", labels=labels)
        for (queue, task), one in sorted(series.items()):
            for name, count in one.counts.items():
                counters[name].add_metric([queue, task], count)
            lateness.add_metric([queue, task], one.lateness.cumulative(), one.lateness.total)
            run.add_metric([queue, task], one.run.cumulative(), one.run.total)
        yield from counters.values()
        yield lateness
        yield run
        claim = HistogramMetricFamily(
            "tickwork_claim_seconds",
            "Round trip of one claim call to the backend",
            labels=["queue"],
        )
        for queue, buckets in sorted(claims.items()):
            claim.add_metric([queue], buckets.cumulative(), buckets.total)
        yield claim


class _HeldCollector(Collector):
    """Gauges read at scrape time: the work this process holds, the part running, and
    (with a thread pool) how many of its threads take work."""

    def __init__(self, holdings: Holdings) -> None:
        self._holdings = holdings
        self.taking_work: Callable[[], int] | None = None

    def collect(self) -> Iterator[Metric]:
        works = self._holdings.all()
        yield GaugeMetricFamily(
            "tickwork_held", "Claims this worker holds (parked, waiting or running)", len(works)
        )
        yield GaugeMetricFamily(
            "tickwork_running",
            "Handlers running now",
            sum(1 for work in works if work.started_ms),
        )
        if self.taking_work is not None:
            yield GaugeMetricFamily(
                "tickwork_handler_threads",
                "Threads of the thread pool taking work now (fewer than its size while fast "
                "handlers keep the process's core busy)",
                self.taking_work(),
            )
