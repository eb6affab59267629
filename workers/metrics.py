"""Prometheus metrics of one worker process, served on ``/metrics`` (``--metrics-port``).

Counters per queue and task of what this process saw happen to the messages it claimed
(claimed, succeeded, retried, poisoned, redelivered, aborted); histograms of lateness
(due time to start), run time and the claim round trip; gauges of the work it holds and
runs now (read from ``Holdings`` at each scrape). Everything is counted in the worker
process, where claims are taken and runs are settled, so it is correct with the process
pool (its children only run handlers). Each worker has a registry of its own, not the
global one: several workers in one process (tests) do not mix. Without a port the
worker uses ``NoMetrics``, whose methods do nothing.

The backend-wide numbers (depth per queue, poison, bounds, schedules) are the exporter's
(``tickwork/exporter.py``): every worker publishing them would multiply them.
"""

from __future__ import annotations

from collections.abc import Iterator
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from workers.holdings import Holdings, Work

#: seconds; from "on time" to an hour late
LATENESS_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 60.0, 300.0, 3600.0)
#: seconds; from a no-op to a long job
RUN_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 60.0, 300.0, 1800.0)
#: seconds; one claim call to the backend
CLAIM_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0)

OUTCOMES = ("succeeded", "retried", "poisoned", "redelivered", "aborted")


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

    def stop(self) -> None:
        """Stop serving."""


class WorkerMetrics(NoMetrics):
    """The worker's metrics, served on ``host:port`` from ``start()`` to ``stop()``."""

    def __init__(self, holdings: Holdings) -> None:
        self.registry = CollectorRegistry()
        labels = ("queue", "task")
        self._claimed = Counter(
            "tickwork_claimed", "Messages claimed", labels, registry=self.registry
        )
        self._outcomes = {
            outcome: Counter(
                f"tickwork_{outcome}", f"Runs {outcome}", labels, registry=self.registry
            )
            for outcome in OUTCOMES
        }
        self._lateness = Histogram(
            "tickwork_lateness_seconds",
            "From a message's due time to its handler's start",
            labels,
            buckets=LATENESS_BUCKETS,
            registry=self.registry,
        )
        self._run = Histogram(
            "tickwork_run_seconds",
            "How long handlers ran",
            labels,
            buckets=RUN_BUCKETS,
            registry=self.registry,
        )
        self._claim = Histogram(
            "tickwork_claim_seconds",
            "Round trip of one claim call to the backend",
            ("queue",),
            buckets=CLAIM_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(_HeldCollector(holdings))
        self._server: WSGIServer | None = None

    def start(self, port: int, host: str = "127.0.0.1") -> int:
        """Serve ``/metrics`` on ``host:port`` (0: any free port); returns the port."""
        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        self._server = server
        return int(server.server_port)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def claimed(self, work: Work) -> None:
        self._claimed.labels(work.claim.queue, work.message.task).inc()

    def claim_took(self, queue: str, seconds: float) -> None:
        self._claim.labels(queue).observe(seconds)

    def started(self, work: Work) -> None:
        late_ms = max(0, work.started_ms - work.claim.due_ms)
        self._lateness.labels(work.claim.queue, work.message.task).observe(late_ms / 1000)

    def settled(self, work: Work, outcome: str, run_s: float | None = None) -> None:
        queue, task = work.claim.queue, work.message.task
        self._outcomes[outcome].labels(queue, task).inc()
        if run_s is not None:
            self._run.labels(queue, task).observe(run_s)


class _HeldCollector(Collector):
    """Gauges read at scrape time: the work this process holds, and the part running."""

    def __init__(self, holdings: Holdings) -> None:
        self._holdings = holdings

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
