"""The worker's metrics through OpenTelemetry's metrics API, when the application set a
meter provider (an SDK's) before the worker was made; Prometheus (``metrics.py``,
``--metrics-port``) serves them as before either way.

The same numbers under the same names, so a dashboard works from either exporter (an
OpenTelemetry-to-Prometheus pipeline names ``tickwork.claimed`` ``tickwork_claimed_total``
and ``tickwork.run`` in seconds ``tickwork_run_seconds``): counters ``tickwork.claimed``,
``tickwork.succeeded``, ... (each of ``COUNTS``) per ``queue`` and ``task``, observed
from ``WorkerMetrics``' tallies when the SDK collects (nothing per message); gauges
``tickwork.held`` and ``tickwork.running``; histograms ``tickwork.lateness`` and
``tickwork.run`` per queue and task and ``tickwork.claim`` per queue, in seconds with
the Prometheus buckets as advice, recorded per run and per claim call (an OpenTelemetry
histogram has no asynchronous form): the cost of a run is measured in ``bench/NOTES.md``.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial

from tickwork.scheduler.views.activity import COUNTS, LATENESS_BUCKETS, RUN_BUCKETS
from tickwork.workers.intake.holdings import Holdings, Work
from tickwork.workers.reporting.metrics import CLAIM_BUCKETS, NoMetrics, WorkerMetrics

try:
    from opentelemetry import metrics as otel
    from opentelemetry.metrics import CallbackOptions, Observation

    ENABLED = True
except ImportError:  # pragma: no cover - depends on the environment
    ENABLED = False


def configured() -> bool:
    """Whether the application set a meter provider (OpenTelemetry installed)."""
    if not ENABLED:
        return False
    provider = otel.get_meter_provider()
    return not isinstance(provider, otel.NoOpMeterProvider) and (
        type(provider).__name__ != "_ProxyMeterProvider"  # the API's stand-in until set
    )


class OtelMetrics(NoMetrics):
    """Reports ``metrics`` (the worker's tallies) and each run's and claim's times to the
    application's meter provider; ``WorkerMetrics`` hands it what it records per run."""

    def __init__(self, metrics: WorkerMetrics, holdings: Holdings) -> None:
        self._metrics = metrics
        self._holdings = holdings
        meter = otel.get_meter("tickwork")
        for name in COUNTS:
            meter.create_observable_counter(
                f"tickwork.{name}",
                callbacks=[partial(self._count, name)],
                unit="{message}",
                description=f"Messages {name}",
            )
        meter.create_observable_gauge(
            "tickwork.held",
            callbacks=[self._held],
            unit="{message}",
            description="Claims this worker holds (parked, waiting or running)",
        )
        meter.create_observable_gauge(
            "tickwork.running",
            callbacks=[self._running],
            unit="{message}",
            description="Handlers running now",
        )
        self._lateness = meter.create_histogram(
            "tickwork.lateness",
            unit="s",
            description="From a message's due time to its handler's start",
            explicit_bucket_boundaries_advisory=LATENESS_BUCKETS,
        )
        self._run = meter.create_histogram(
            "tickwork.run",
            unit="s",
            description="How long handlers ran",
            explicit_bucket_boundaries_advisory=RUN_BUCKETS,
        )
        self._claim = meter.create_histogram(
            "tickwork.claim",
            unit="s",
            description="Round trip of one claim call to the backend",
            explicit_bucket_boundaries_advisory=CLAIM_BUCKETS,
        )

    def started(self, work: Work) -> None:
        attributes = {"queue": work.claim.queue, "task": work.message.task}
        self._lateness.record(work.lateness_ms / 1000, attributes)

    def settled(self, work: Work, outcome: str, run_s: float | None = None) -> None:
        if run_s is not None:
            self._run.record(run_s, {"queue": work.claim.queue, "task": work.message.task})

    def claim_took(self, queue: str, seconds: float) -> None:
        self._claim.record(seconds, {"queue": queue})

    def _count(self, name: str, options: CallbackOptions) -> Iterable[Observation]:
        series, _ = self._metrics.snapshot()
        return [
            Observation(one.counts[name], {"queue": queue, "task": task})
            for (queue, task), one in series.items()
        ]

    def _held(self, options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(len(self._holdings.all()))]

    def _running(self, options: CallbackOptions) -> Iterable[Observation]:
        works = self._holdings.all()
        return [Observation(sum(1 for work in works if work.started_ms))]
