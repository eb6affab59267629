"""procrastinate's side: the tasks, ``defer``, ``batch_defer``, a scheduled job; the
worker is ``procrastinate worker`` on one queue with ``CONCURRENCY``."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import procrastinate

from bench.peers_pg.common import CONCURRENCY, QUEUE, URL, connection, delayed_body, update_body

app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=URL))
_opened = False


def _open() -> None:
    global _opened
    if not _opened:
        app.open()
        _opened = True


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
    _open()
    app.schema_manager.apply_schema()


def enqueue_one(kind: str = "update") -> None:
    _open()
    (update if kind == "update" else noop).defer()


def enqueue_many(count: int, kind: str = "update") -> None:
    _open()
    task = update if kind == "update" else noop
    for start in range(0, count, 1000):
        task.batch_defer(*({} for _ in range(min(1000, count - start))))


def enqueue_delayed(target: float) -> None:
    _open()
    at = datetime.fromtimestamp(target, tz=UTC)
    delayed.configure(schedule_at=at).defer(target=target)


def completed() -> int:
    row = (
        connection()
        .execute("SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'")
        .fetchone()
    )
    return 0 if row is None else int(row[0])  # type: ignore[call-overload]


def worker_command() -> list[str]:
    binary = str(Path(sys.executable).with_name("procrastinate"))
    return [
        *(binary, "--app", f"{__name__}.app", "worker", "--queues", QUEUE),
        *("--concurrency", str(CONCURRENCY)),
    ]
