"""The deployment's Prometheus exporter (``tickwork exporter --port P``): what the backend
holds, read at each scrape, served once per deployment (each worker serves only its own
counts, ``workers/reporting/metrics.py``).

Per queue: messages by state (ready, scheduled, in flight, poison), how long its
longest-waiting ready message has been due, whether it is paused, its bound and fill, and
the counters every worker adds to (enqueued, claimed, acked, ...).
Per keyed recurring schedule: the next fire time, the scheduled time of the last run that
succeeded (what "no success since T" alerts need), its misfires, and how its last
recorded run ended (from the occurrence ledger: ``tickwork_schedule_last_outcome``, 1 on
the series of that outcome). A scrape costs one ``stats`` and one ``schedules`` read of
the backend (the latter reads each schedule's newest ledger records).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tickwork.scheduler import App, BackendError
from tickwork.scheduler.backends import QueueStats

log = logging.getLogger("tickwork.exporter")


class BackendCollector(Collector):
    """Reads the backend of ``app`` at every scrape."""

    def __init__(self, app: App) -> None:
        self._app = app

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("tickwork_backend_up", "1 if the last scrape read the backend")
        try:
            stats = self._app.backend.queues.stats()
            schedules = self._app.schedules.list()
        except BackendError as err:
            log.warning("scrape failed: %s", err)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        depth = GaugeMetricFamily(
            "tickwork_queue_messages", "Messages per queue and state", labels=["queue", "state"]
        )
        paused = GaugeMetricFamily(
            "tickwork_queue_paused", "1 while the queue is paused", labels=["queue"]
        )
        bound = GaugeMetricFamily(
            "tickwork_queue_max_pending",
            "The queue's bound (bounded queues only)",
            labels=["queue"],
        )
        pending = GaugeMetricFamily(
            "tickwork_queue_pending",
            "Messages waiting or leased (what a bound counts)",
            labels=["queue"],
        )
        events = CounterMetricFamily(
            "tickwork_queue_events", "Counters kept by the backend", labels=["queue", "event"]
        )
        oldest = GaugeMetricFamily(
            "tickwork_queue_oldest_ready_seconds",
            "How long the queue's longest-waiting ready message has been due (0: none ready)",
            labels=["queue"],
        )
        now_ms = self._app.backend_clock.now_ms()
        for s in stats:
            oldest.add_metric([s.queue], oldest_ready_s(s, now_ms))
            for state, value in (
                ("ready", s.ready),
                ("scheduled", s.scheduled),
                ("in_flight", s.in_flight),
                ("poison", s.poison),
            ):
                depth.add_metric([s.queue, state], value)
            paused.add_metric([s.queue], 1 if s.paused else 0)
            pending.add_metric([s.queue], s.pending)
            if s.max_pending is not None:
                bound.add_metric([s.queue], s.max_pending)
            for name, value in sorted(s.counters.items()):
                events.add_metric([s.queue, name], value)
        yield from (depth, paused, bound, pending, events, oldest)
        labels = ["queue", "key", "task"]
        next_fire = GaugeMetricFamily(
            "tickwork_schedule_next_fire_timestamp_seconds",
            "When a schedule fires next",
            labels=labels,
        )
        last_success = GaugeMetricFamily(
            "tickwork_schedule_last_success_timestamp_seconds",
            "Scheduled time of the schedule's last run that succeeded",
            labels=labels,
        )
        misfires = CounterMetricFamily(
            "tickwork_schedule_misfires", "Occurrences a schedule missed", labels=labels
        )
        last_outcome = GaugeMetricFamily(
            "tickwork_schedule_last_outcome",
            "1 on the outcome of the schedule's last recorded run (succeeded, retried, "
            "poisoned, aborted)",
            labels=[*labels, "outcome"],
        )
        for info in schedules:
            names = [info.queue, info.key, info.task]
            next_fire.add_metric(names, info.next_run.timestamp())
            if info.last_success is not None:
                last_success.add_metric(names, info.last_success.timestamp())
            misfires.add_metric(names, info.misfires)
            if info.last_outcome is not None:
                last_outcome.add_metric([*names, info.last_outcome], 1)
        yield from (next_fire, last_success, misfires, last_outcome)


def oldest_ready_s(stats: QueueStats, now_ms: int) -> float:
    """How long ``stats``' queue's longest-waiting ready message has been due, in
    seconds (0 with none ready). A fair-share message on Redis counts as due now: its
    place in the ready line is its turn, not its due time."""
    if not stats.ready or stats.next_due_ms is None:
        return 0.0
    return max(0, now_ms - stats.next_due_ms) / 1000


def serve(app: App, port: int, host: str = "127.0.0.1") -> WSGIServer:
    """Serve ``/metrics`` for the backend of ``app`` on ``host:port`` (0: any free port),
    in a background thread; returns the server (``server.server_port``, ``shutdown()``)."""
    registry = CollectorRegistry()
    registry.register(BackendCollector(app))
    server, _thread = start_http_server(port, addr=host, registry=registry)
    return server
