"""tickwork's side: the tasks, enqueue one, many, delayed; the worker command."""

from __future__ import annotations

import sys
from datetime import UTC, datetime

from bench.peers_pg.common import CONCURRENCY, QUEUE, URL, delayed_body, update_body
from tickwork.scheduler import App

app = App(URL)


@app.task(queue=QUEUE)
def noop() -> None:
    pass


@app.task(queue=QUEUE)
def update() -> None:
    update_body()


@app.task(queue=QUEUE)
def delayed(target: float) -> None:
    delayed_body(target)


def install() -> None:
    app.backend  # noqa: B018  (connecting creates the schema)


def enqueue_one(kind: str = "update") -> None:
    (update if kind == "update" else noop).delay()


def enqueue_many(count: int, kind: str = "update") -> None:
    task = update if kind == "update" else noop
    app.enqueue_many([task.call() for _ in range(count)], batch_size=1000)


def enqueue_delayed(target: float) -> None:
    delayed.schedule(args=(target,), at=datetime.fromtimestamp(target, tz=UTC))


def completed() -> int:
    stats = app.queues.stats(QUEUE)[0]
    return stats.counters.get("acked", 0)


def worker_command() -> list[str]:
    return [
        *(sys.executable, "-m", "tickwork", "worker", "-A", __name__, "-Q", QUEUE),
        *("--concurrency", str(CONCURRENCY), "--log-level", "warning"),
    ]
