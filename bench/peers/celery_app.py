"""Celery's side: one ``solo`` worker process (no prefork children), no result backend,
gossip, mingle and heartbeats off (their documented fast settings)."""

from __future__ import annotations

import sys
from datetime import UTC, datetime

from celery import Celery

from bench.peers.common import QUEUE, URL, delayed_body, noop_body

app = Celery("peers", broker=URL)
app.conf.task_ignore_result = True
app.conf.task_default_queue = QUEUE
app.conf.broker_connection_retry_on_startup = True


@app.task(name="noop")
def noop() -> None:
    noop_body()


@app.task(name="delayed")
def delayed(target: float) -> None:
    delayed_body(target)


def enqueue_one() -> None:
    noop.delay()


def enqueue_many(count: int) -> None:
    """Celery has no bulk send; one producer reused is its fastest way."""
    with app.producer_or_acquire() as producer:
        for _ in range(count):
            noop.apply_async(producer=producer)


def enqueue_delayed(target: float) -> None:
    delayed.apply_async((target,), eta=datetime.fromtimestamp(target, tz=UTC))


def worker_command(delayed_jobs: bool) -> list[str]:
    return [
        *(sys.executable, "-m", "celery", "-A", __name__, "worker", "-P", "solo"),
        *("--without-gossip", "--without-mingle", "--without-heartbeat"),
        *("--loglevel", "WARNING", "-Q", QUEUE),
    ]
