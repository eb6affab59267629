"""RQ's side: one ``SimpleWorker`` (jobs in the worker process; the default worker forks
once per job, about 50 jobs/s here); ``--with-scheduler`` for delayed jobs."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

from rq import Queue

from bench.peers.common import QUEUE, URL, client, delayed_body, noop_body

queue = Queue(QUEUE, connection=client)


def noop() -> None:
    noop_body()


def delayed(target: float) -> None:
    delayed_body(target)


def enqueue_one() -> None:
    queue.enqueue(noop)


def enqueue_many(count: int) -> None:
    for start in range(0, count, 1000):
        queue.enqueue_many([Queue.prepare_data(noop) for _ in range(min(1000, count - start))])


def enqueue_delayed(target: float) -> None:
    queue.enqueue_at(datetime.fromtimestamp(target, tz=UTC), delayed, target)


def worker_command(delayed_jobs: bool) -> list[str]:
    command = [str(Path(sys.executable).with_name("rq")), "worker", "-w", "rq.SimpleWorker"]
    command += ["--url", URL, "--logging_level", "WARNING", QUEUE]
    return [*command, "--with-scheduler"] if delayed_jobs else command
