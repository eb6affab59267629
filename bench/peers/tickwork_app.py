"""tickwork's side: the two tasks, enqueue one, many, delayed; the worker command."""

from __future__ import annotations

import sys
from datetime import UTC, datetime

from bench.peers.common import QUEUE, URL, delayed_body, noop_body
from tickwork.scheduler import App

app = App(URL)


@app.task(queue=QUEUE)
def noop() -> None:
    noop_body()


@app.task(queue=QUEUE)
def delayed(target: float) -> None:
    delayed_body(target)


def enqueue_one() -> None:
    noop.delay()


async def aenqueue_one() -> None:
    await noop.adelay()


def enqueue_many(count: int) -> None:
    app.enqueue_many([noop.call() for _ in range(count)], batch_size=1000)


def enqueue_delayed(target: float) -> None:
    delayed.schedule(args=(target,), at=datetime.fromtimestamp(target, tz=UTC))


def worker_command(delayed_jobs: bool) -> list[str]:
    """One worker process, default settings."""
    return [sys.executable, "-m", "tickwork", "worker", "-A", __name__, "-Q", QUEUE]
