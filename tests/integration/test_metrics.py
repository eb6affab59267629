"""Prometheus metrics, scraped over HTTP: a running worker's own counts and timings (also
with the process pool, started from the CLI), and the exporter's view of the backend on
every backend."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.support.helpers import running, wait_for
from tickwork.exporter import serve
from tickwork.scheduler import App, RetryPolicy
from tickwork.triggers import Cron

ROOT = Path(__file__).resolve().parents[2]


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(port: int) -> Samples:
    """Every sample served on ``port``: (name, sorted labels) -> value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str
) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_worker_serves_its_counts_timings_and_holdings(sqlite_app: App) -> None:
    app = sqlite_app
    release = threading.Event()
    tries: list[int] = []

    @app.task
    def ok(n: int) -> None:
        time.sleep(0.02)

    @app.task(retry=RetryPolicy(retries=1, base_s=0.01, jitter=False))
    def flaky() -> None:
        tries.append(1)
        if len(tries) == 1:
            raise RuntimeError("first time")

    @app.task(retry=RetryPolicy(retries=0))
    def bad() -> None:
        raise ValueError("never")

    @app.task
    def held() -> None:
        release.wait(30)

    for n in range(3):
        ok.delay(n)
    flaky.delay()
    bad.delay()
    with running(app, metrics_port=0) as worker:
        assert worker.metrics_port
        wait_for(lambda: worker.stats.acked == 4 and worker.stats.poisoned == 1)
        held.delay()
        wait_for(lambda: value(scrape(worker.metrics_port or 0), "tickwork_running") == 1)
        during = scrape(worker.metrics_port)
        release.set()
        wait_for(lambda: worker.stats.acked == 5)
        after = scrape(worker.metrics_port)
    assert value(during, "tickwork_held") == 1
    # nothing waits for a thread here: every one of the pool's threads takes work
    assert value(during, "tickwork_handler_threads") == worker.config.concurrency
    q = {"queue": "default"}
    assert value(after, "tickwork_claimed_total", **q, task=ok.name) == 3
    assert value(after, "tickwork_succeeded_total", **q, task=ok.name) == 3
    assert value(after, "tickwork_retried_total", **q, task=flaky.name) == 1
    assert value(after, "tickwork_succeeded_total", **q, task=flaky.name) == 1
    assert value(after, "tickwork_poisoned_total", **q, task=bad.name) == 1
    assert value(after, "tickwork_lateness_seconds_count", **q, task=ok.name) == 3
    assert value(after, "tickwork_run_seconds_count", **q, task=ok.name) == 3
    assert value(after, "tickwork_run_seconds_sum", **q, task=ok.name) >= 0.06
    assert value(after, "tickwork_claim_seconds_count", **q) >= 1
    assert value(after, "tickwork_held") == 0 and value(after, "tickwork_running") == 0


def test_a_process_pool_worker_started_from_the_cli_counts_in_its_parent(
    sqlite_url: str, clean_env: dict[str, str], tmp_path: Path
) -> None:
    from tests.support import process_tasks

    process_tasks.app.use_backend(sqlite_url)
    for n in range(6):
        process_tasks.square.delay(n)
    process_tasks.app.close()
    port = free_port()
    log = (tmp_path / "worker.log").open("wb")
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tickwork",
            "worker",
            "-A",
            "tests.support.process_tasks",
            "--pool",
            "process",
            "-c",
            "2",
            "--metrics-port",
            str(port),
            "--duration",
            "60",
            "--log-level",
            "warning",
            "--backend",
            sqlite_url,
        ],
        cwd=ROOT,
        env=clean_env,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    try:

        def done() -> bool:
            try:
                return (
                    value(
                        scrape(port),
                        "tickwork_succeeded_total",
                        queue="default",
                        task=process_tasks.square.name,
                    )
                    == 6
                )
            except OSError:
                return False

        wait_for(done, 60)
        samples = scrape(port)
        assert (
            value(
                samples,
                "tickwork_run_seconds_count",
                queue="default",
                task=process_tasks.square.name,
            )
            == 6
        )
        assert ("tickwork_handler_threads", ()) not in samples  # no thread pool here
    finally:
        worker.terminate()
        worker.wait(30)
        log.close()


def test_the_exporter_serves_what_the_backend_holds(app: App) -> None:
    @app.task(queue="billing", retry=RetryPolicy(retries=0))
    def charge(n: int) -> None:
        if n == 0:
            raise ValueError("declined")

    @app.task(queue="reports")
    def report() -> None: ...

    @app.task(queue="late")
    def overdue() -> None: ...

    overdue.schedule(at=datetime.now(UTC) - timedelta(seconds=30))  # no worker takes "late"
    app.queues.configure("billing", max_pending=50)
    charge.delay(0)
    with running(app, queues=("billing",)) as worker:
        wait_for(lambda: worker.stats.poisoned == 1)
    for n in range(1, 4):
        charge.schedule(args=(n,), delay=timedelta(hours=1))
    report.schedule(trigger=Cron("0 6 * * *"), key="daily")
    app.schedules.trigger_now("daily", queue="reports")  # its run is recorded in the ledger
    with running(app, queues=("reports",)):
        wait_for(lambda: app.schedules.history("daily", queue="reports") != [])
    (info,) = app.schedules.list("reports")
    server = serve(app, 0)
    try:
        samples = scrape(int(server.server_port))
    finally:
        server.shutdown()
        server.server_close()
    assert value(samples, "tickwork_backend_up") == 1
    billing = {"queue": "billing"}
    assert value(samples, "tickwork_queue_messages", **billing, state="scheduled") == 3
    assert value(samples, "tickwork_queue_messages", **billing, state="poison") == 1
    assert value(samples, "tickwork_queue_max_pending", **billing) == 50
    assert value(samples, "tickwork_queue_pending", **billing) == 3
    assert value(samples, "tickwork_queue_paused", **billing) == 0
    assert value(samples, "tickwork_queue_events_total", **billing, event="enqueued") == 4
    assert value(samples, "tickwork_queue_oldest_ready_seconds", **billing) == 0  # none ready
    assert 30 <= value(samples, "tickwork_queue_oldest_ready_seconds", queue="late") < 300
    names = {"queue": "reports", "key": "daily", "task": report.name}
    fire = value(samples, "tickwork_schedule_next_fire_timestamp_seconds", **names)
    assert fire == info.next_run.timestamp() and fire > datetime.now(UTC).timestamp()
    assert value(samples, "tickwork_schedule_misfires_total", **names) == 0
    assert value(samples, "tickwork_schedule_last_outcome", **names, outcome="succeeded") == 1


def test_the_exporter_command_serves_until_its_duration_ends(
    sqlite_url: str, clean_env: dict[str, str]
) -> None:
    app = App(sqlite_url)
    app.queues.pause("default")
    app.close()
    exporter = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tickwork",
            "exporter",
            "--port",
            "0",
            "--duration",
            "20",
            "--backend",
            sqlite_url,
        ],
        cwd=ROOT,
        env=clean_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert exporter.stderr is not None
        line = exporter.stderr.readline()
        assert line.startswith("serving http://127.0.0.1:"), line
        port = int(line.rsplit(":", 1)[1].split("/")[0])
        samples = scrape(port)
        assert value(samples, "tickwork_queue_paused", queue="default") == 1
        exporter.send_signal(subprocess.signal.SIGTERM)  # type: ignore[attr-defined]
        assert exporter.wait(20) == 0
    finally:
        if exporter.poll() is None:
            exporter.kill()
            exporter.wait(10)
        if exporter.stderr is not None:
            exporter.stderr.close()
