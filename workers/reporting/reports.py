"""What a worker reports beside its work, each reporter a module of ``reporting/``
registered here: OpenTelemetry's metrics (when the application set a meter provider),
the activity log of the dashboard's charts, and the live changes of the streams. Each
hears the runs through the worker's metrics (``WorkerMetrics.add``), the live changes
also their progress reports (``services``); those that write to the backend do it from
a thread of their own (``roles``)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable

from tickwork.scheduler.runs.context import RunInfo
from tickwork.workers.app_needs import WorkerApp
from tickwork.workers.config import WorkerConfig
from tickwork.workers.context import WorkerContext
from tickwork.workers.pools.services import RunServices
from tickwork.workers.reporting import otel_metrics
from tickwork.workers.reporting.activity import ActivityLog
from tickwork.workers.reporting.live import LiveChanges


def counted(config: WorkerConfig) -> bool:
    """Whether the worker counts its runs at all (something reads the counts)."""
    return (
        otel_metrics.configured()
        or config.metrics_port is not None
        or config.activity_interval_s > 0
        or config.live_changes_s > 0
    )


class Reports:
    """The reporters of one worker, built from its config; ``roles`` runs their writers."""

    def __init__(self, context: WorkerContext, worker_id: str) -> None:
        self._writers: list[tuple[str, Callable[[threading.Event], None]]] = []
        self._live: LiveChanges | None = None
        counting = context.counting
        if counting is None:
            return
        config = context.config
        if otel_metrics.configured():
            counting.add(otel_metrics.OtelMetrics(counting, context.holdings))
        if config.activity_interval_s > 0:
            activity = ActivityLog(
                context.backend,
                counting,
                worker_id,
                config.activity_interval_s,
                context.now_ms,
            )
            self._writers.append(("activity", activity.run))
        if config.live_changes_s > 0:
            live = LiveChanges(
                context.backend, counting, worker_id, context.now_ms, config.live_changes_s
            )
            self._writers.append(("live", live.run))  # told of runs while someone listens
            self._live = live

    def services(self, app: WorkerApp) -> RunServices:
        """The services of the worker's runs: progress reports are also live changes."""
        plain = RunServices.of(app)
        live = self._live
        if live is None:
            return plain
        write = plain.report

        def report(info: RunInfo, fraction: float, note: str | None) -> None:
            write(info, fraction, note)  # raises if the task keeps no results
            live.progressed(info, fraction, note)

        return RunServices(report, plain.durable, plain.charge)

    def roles(self, until: threading.Event) -> list[tuple[str, Callable[[], None]]]:
        """Each writer's thread body, writing until ``until`` is set, then its last."""
        return [(name, functools.partial(run, until)) for name, run in self._writers]
