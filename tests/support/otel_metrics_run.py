"""Run by ``tests/integration/test_otel_metrics.py`` in a process of its own (a process
has one meter provider): an app on the SQLite file argv[1] whose worker runs 4 calls
that succeed and 2 that fail for good, with OpenTelemetry's SDK and an in-memory reader
set before the worker is made; prints what the reader collected, as JSON."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from opentelemetry import metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from tickwork import App, RetryPolicy, Worker, WorkerConfig

reader = InMemoryMetricReader()
metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
app = App(f"sqlite:///{sys.argv[1]}")


@app.task(queue="mail")
def send(n: int) -> None:
    time.sleep(0.01)


@app.task(queue="mail", retry=RetryPolicy(retries=0))
def bounce() -> None:
    raise ValueError("no such mailbox")


def collected() -> dict[str, list[dict[str, Any]]]:
    """Each metric's points: attributes, and value (a sum, a gauge) or count and sum."""
    found: dict[str, list[dict[str, Any]]] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                points = found.setdefault(metric.name, [])
                for point in metric.data.data_points:
                    one: dict[str, Any] = {"attributes": dict(point.attributes or {})}
                    for field in ("value", "count", "sum", "explicit_bounds"):
                        if hasattr(point, field):
                            value = getattr(point, field)
                            one[field] = list(value) if field == "explicit_bounds" else value
                    points.append(one)
    return found


def main() -> None:
    for n in range(4):
        send.delay(n)
    bounce.delay()
    bounce.delay()
    worker = Worker(app, WorkerConfig(queues=("mail",), poll_interval_s=0.05))
    worker.start()
    try:
        deadline = time.monotonic() + 30
        while worker.stats.acked + worker.stats.poisoned < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
        print(json.dumps(collected()))
    finally:
        worker.stop()
        worker.join(30)


if __name__ == "__main__":
    main()
