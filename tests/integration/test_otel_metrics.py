"""The worker's metrics through OpenTelemetry's metrics API (issue 52, item 4): with a
meter provider set before the worker is made, the SDK's reader collects the same
counters, gauges and histograms Prometheus serves, under the same names. In a process
of its own (``tests/support/otel_metrics_run.py``): OpenTelemetry sets its meter
provider once a process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import ROOT
from tickwork.scheduler.views.activity import RUN_BUCKETS
from tickwork.workers.reporting import otel_metrics


def _points(metrics: dict[str, list[dict[str, Any]]], name: str, task: str) -> list[Any]:
    return [p for p in metrics.get(name, []) if p["attributes"].get("task", "").endswith(task)]


def test_the_worker_reports_through_the_meter_provider(
    tmp_path: Path, clean_env: dict[str, str]
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.otel_metrics_run", str(tmp_path / "t.db")],
        cwd=ROOT,
        env=clean_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    metrics = json.loads(done.stdout)
    (claimed,) = _points(metrics, "tickwork.claimed", ".send")
    assert claimed["value"] == 4 and claimed["attributes"]["queue"] == "mail"
    (succeeded,) = _points(metrics, "tickwork.succeeded", ".send")
    assert succeeded["value"] == 4
    (poisoned,) = _points(metrics, "tickwork.poisoned", ".bounce")
    assert poisoned["value"] == 2
    (run,) = _points(metrics, "tickwork.run", ".send")
    assert run["count"] == 4 and run["sum"] >= 4 * 0.01
    assert run["explicit_bounds"] == list(RUN_BUCKETS), "the Prometheus buckets, as advice"
    (lateness,) = _points(metrics, "tickwork.lateness", ".send")
    assert lateness["count"] == 4
    assert any(p["count"] >= 1 for p in metrics["tickwork.claim"])
    (held,) = metrics["tickwork.held"]
    (running,) = metrics["tickwork.running"]
    assert 0 <= running["value"] <= held["value"] <= 6


def test_without_a_meter_provider_nothing_is_reported_through_it() -> None:
    assert not otel_metrics.configured()  # this process set none
