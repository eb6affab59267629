"""The worker's metrics through OpenTelemetry's metrics API (issue 52, item 4), the way
the guide tells users: the ``-A`` module of ``tickwork worker`` sets the SDK's meter
provider (here with a periodic reader whose exporter writes JSON lines to a file), and
the worker reports the same counters, gauges and histograms Prometheus serves, under the
same names. The module and the worker run in a folder of their own."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

from tests.support.helpers import wait_until
from tests.support.served import run_tickwork, worker
from tickwork.scheduler.views.activity import RUN_BUCKETS
from tickwork.workers.reporting import otel_metrics

ROOT = Path(__file__).resolve().parents[2]

APP = """
import os
import time

from opentelemetry import metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    ConsoleMetricExporter,
    PeriodicExportingMetricReader,
)

from tickwork import App, RetryPolicy

if "METRICS_OUT" in os.environ:  # the worker's process only
    exporter = ConsoleMetricExporter(
        out=open(os.environ["METRICS_OUT"], "a", buffering=1),
        formatter=lambda data: data.to_json(indent=None) + "\\n",
    )
    reader = PeriodicExportingMetricReader(exporter, export_interval_millis=200)
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))

app = App()


@app.task(queue="mail")
def send(n: int) -> None:
    time.sleep(0.01)


@app.task(queue="mail", retry=RetryPolicy(retries=0))
def bounce() -> None:
    raise ValueError("no such mailbox")


@app.task(queue="mail")
def post_round() -> None:
    for n in range(4):
        send.delay(n)
    bounce.delay()
    bounce.delay()
"""


def _points(export: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Each metric's data points in one export of ``ConsoleMetricExporter``."""
    found: dict[str, list[dict[str, Any]]] = {}
    for resource in export["resource_metrics"]:
        for scope in resource["scope_metrics"]:
            for metric in scope["metrics"]:
                found.setdefault(metric["name"], []).extend(metric["data"]["data_points"])
    return found


def _of(points: dict[str, list[dict[str, Any]]], name: str, task: str) -> list[Any]:
    return [p for p in points.get(name, []) if p["attributes"].get("task", "").endswith(task)]


def _latest(out: Path) -> dict[str, list[dict[str, Any]]]:
    lines = out.read_text().splitlines() if out.exists() else []
    return _points(json.loads(lines[-1])) if lines else {}


def _settled(points: dict[str, list[dict[str, Any]]]) -> bool:
    succeeded = _of(points, "tickwork.succeeded", ".send")
    poisoned = _of(points, "tickwork.poisoned", ".bounce")
    return bool(succeeded and poisoned) and (
        succeeded[0]["value"] == 4 and poisoned[0]["value"] == 2
    )


def test_the_worker_reports_through_the_meter_provider(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    app_dir, cwd = tmp_path / "app", tmp_path / "cwd"
    app_dir.mkdir()
    cwd.mkdir()
    (app_dir / "mailer.py").write_text(textwrap.dedent(APP))
    env = {
        **clean_env,
        "PYTHONPATH": f"{app_dir}:{ROOT}",
        "TICKWORK_BACKEND": f"sqlite:///{tmp_path / 't.db'}",
    }
    sent = run_tickwork(cwd, env, "-A", "mailer", "enqueue", "mailer.post_round")
    assert sent.returncode == 0, sent.stderr
    out = tmp_path / "metrics.jsonl"
    with worker("mailer", cwd, {**env, "METRICS_OUT": str(out)}, "-Q", "mail"):
        settled = wait_until(lambda: _settled(_latest(out)), timeout_s=60)
    assert settled, "the exports never counted 4 sent and 2 bounced"
    metrics = _latest(out)
    (claimed,) = _of(metrics, "tickwork.claimed", ".send")
    assert claimed["value"] == 4 and claimed["attributes"]["queue"] == "mail"
    (run,) = _of(metrics, "tickwork.run", ".send")
    assert run["count"] == 4 and run["sum"] >= 4 * 0.01
    assert run["explicit_bounds"] == list(RUN_BUCKETS), "the Prometheus buckets, as advice"
    (lateness,) = _of(metrics, "tickwork.lateness", ".send")
    assert lateness["count"] == 4
    assert any(p["count"] >= 1 for p in metrics["tickwork.claim"])
    (held,) = metrics["tickwork.held"]
    (running,) = metrics["tickwork.running"]
    assert 0 <= running["value"] <= held["value"]


def test_without_a_meter_provider_nothing_is_reported_through_it() -> None:
    assert not otel_metrics.configured()  # this process set none
