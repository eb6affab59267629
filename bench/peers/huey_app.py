"""Huey's side: ``RedisHuey`` without results, one consumer with 8 threads."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

from huey import RedisHuey

from bench.peers.common import QUEUE, URL, delayed_body, noop_body

huey = RedisHuey(QUEUE, url=URL, results=False, utc=True)


@huey.task()
def noop() -> None:
    noop_body()


@huey.task()
def delayed(target: float) -> None:
    delayed_body(target)


def enqueue_one() -> None:
    noop()


def enqueue_many(count: int) -> None:
    """Huey has no bulk enqueue (``map`` is a loop of ``enqueue``)."""
    for _ in range(count):
        noop()


def enqueue_delayed(target: float) -> None:
    delayed.schedule((target,), eta=datetime.fromtimestamp(target, tz=UTC).replace(tzinfo=None))


def worker_command(delayed_jobs: bool) -> list[str]:
    consumer = str(Path(sys.executable).with_name("huey_consumer"))
    return [consumer, f"{__name__}.huey", "-k", "thread", "-w", "8", "-q"]
