"""The autoscaling signal as the deploy examples read it: ``tickwork exporter`` run as
documented, scraped by a real Prometheus, and the examples' own queries (KEDA's
ScaledObject, the Prometheus Adapter's rule behind the HPA) evaluated by it against a
queue whose contents the test knows: messages ready plus running on the queue, not the
scheduled ones nor another queue's, and the replicas that asks for."""

from __future__ import annotations

import importlib
import math
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from tests.support.backends import backend_url
from tests.support.helpers import wait_for
from tests.support.prometheus_server import PrometheusServer
from tests.support.served import console_script
from tests.support.servers import free_port, wait_for_port

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "examples" / "deploy"

APP = """
import time
from pathlib import Path
from tickwork import App

app = App()
MARKS = Path({marks!r})


@app.task
def render(n: int) -> None:
    (MARKS / f"{{n}}.started").touch()
    while not (MARKS / "release").exists():
        time.sleep(0.02)


@app.task(queue="reports")
def report(n: int) -> None: ...
"""

READY, SCHEDULED, OTHER_QUEUE = 120, 7, 3


@pytest.fixture
def scaled(tmp_path: Path) -> Iterator[ModuleType]:
    """The test's app, imported here to enqueue (its worker imports the same file)."""
    app_dir, marks = tmp_path / "app", tmp_path / "marks"
    app_dir.mkdir()
    marks.mkdir()
    (app_dir / "scaled.py").write_text(textwrap.dedent(APP).format(marks=str(marks)))
    sys.path.insert(0, str(app_dir))
    try:
        module = importlib.import_module("scaled")
    finally:
        sys.path.remove(str(app_dir))
    yield module
    (marks / "release").touch()
    module.app.close()
    del sys.modules["scaled"]


def started(module: ModuleType) -> int:
    return len(list(module.MARKS.glob("*.started")))


def test_the_examples_autoscale_on_ready_and_running_messages(
    scaled: ModuleType, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    url = backend_url("redis", tmp_path)
    app = scaled.app
    app.use_backend(url)
    started_at = time.time()
    app.enqueue_many(scaled.render.call(n) for n in range(READY))
    app.enqueue_many(
        scaled.render.call(n).options(delay=timedelta(hours=1))
        for n in range(READY, READY + SCHEDULED)
    )
    app.enqueue_many(scaled.report.call(n) for n in range(OTHER_QUEUE))
    env = {**clean_env, "PYTHONPATH": f"{tmp_path / 'app'}:{ROOT}", "TICKWORK_BACKEND": url}
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    port = free_port()
    exporter = subprocess.Popen(
        [console_script(), "exporter", "--port", str(port)],
        cwd=cwd,
        env=env,
        stderr=subprocess.DEVNULL,
    )
    worker = subprocess.Popen(
        [console_script(), "worker", "-A", "scaled", "-c", "2", "--queue", "default"],
        cwd=cwd,
        env=env,
        stderr=subprocess.PIPE,
    )
    prometheus_dir = tmp_path / "prometheus"
    prometheus_dir.mkdir()
    prometheus = None
    try:
        wait_for_port(port, 60)
        prometheus = PrometheusServer(prometheus_dir, [f"127.0.0.1:{port}"])
        wait_for(lambda: started(scaled) == 2, 60)  # two running, the rest ready

        def scraped_running() -> bool:
            assert prometheus is not None
            running = prometheus.query('tickwork_queue_messages{queue="default",state="in_flight"}')
            return bool(running) and float(running[0]["value"][1]) >= 2

        wait_for(scraped_running, 60)
        at = time.time()  # every query below sees the same scrape

        keda = yaml.safe_load((DEPLOY / "keda-scaledobject.yaml").read_text())
        trigger, aged = keda["spec"]["triggers"]
        assert trigger["type"] == aged["type"] == "prometheus"
        (sample,) = prometheus.query(aged["metadata"]["query"], at)
        age = float(sample["value"][1])  # since the 120 were enqueued, before the worker
        assert 0 < age < time.time() - started_at
        assert math.ceil(age / float(aged["metadata"]["threshold"])) >= 1
        (sample,) = prometheus.query(trigger["metadata"]["query"], at)
        backlog = float(sample["value"][1])
        assert backlog == READY  # running ones count; scheduled and other queues do not
        threshold = float(trigger["metadata"]["threshold"])
        wanted = min(keda["spec"]["maxReplicaCount"], math.ceil(backlog / threshold))
        assert wanted == 3

        adapter, hpa = yaml.safe_load_all((DEPLOY / "hpa.yaml").read_text())
        (rule,) = yaml.safe_load(adapter["data"]["config.yaml"])["externalRules"]
        (metric,) = hpa["spec"]["metrics"]
        assert metric["external"]["metric"]["name"] == rule["name"]["as"]
        series = rule["seriesQuery"].split("{", 1)[0]
        matchers = ",".join(
            f'{label}="{value}"'
            for label, value in metric["external"]["metric"]["selector"]["matchLabels"].items()
        )
        promql = rule["metricsQuery"].replace("<<.Series>>", series)
        promql = promql.replace("<<.LabelMatchers>>", matchers)
        (sample,) = prometheus.query(promql, at)
        assert sample["metric"] == {"queue": "default"}
        assert float(sample["value"][1]) == READY
        per_pod = float(metric["external"]["target"]["averageValue"])
        assert math.ceil(READY / per_pod) == wanted  # the two ask for the same replicas
    finally:
        if prometheus is not None:
            prometheus.stop()
        exporter.send_signal(signal.SIGTERM)
        exporter.wait(30)
        (scaled.MARKS / "release").touch()
        worker.send_signal(signal.SIGTERM)
        _out, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err
