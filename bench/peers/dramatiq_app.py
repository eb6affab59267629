"""Dramatiq's side: one process, 8 threads (``-p 1 -t 8``), the Redis broker with its
default middleware, no retries."""

from __future__ import annotations

import sys
import time

import dramatiq
from dramatiq.brokers.redis import RedisBroker

from bench.peers.common import QUEUE, URL, delayed_body, noop_body

dramatiq.set_broker(RedisBroker(url=URL))


@dramatiq.actor(queue_name=QUEUE, max_retries=0)
def noop() -> None:
    noop_body()


@dramatiq.actor(queue_name=QUEUE, max_retries=0)
def delayed(target: float) -> None:
    delayed_body(target)


def enqueue_one() -> None:
    noop.send()


def enqueue_many(count: int) -> None:
    """Dramatiq has no bulk enqueue: one ``send`` each."""
    for _ in range(count):
        noop.send()


def enqueue_delayed(target: float) -> None:
    delay_ms = max(0, int((target - time.time()) * 1000))
    delayed.send_with_options(args=(target,), delay=delay_ms)


def worker_command(delayed_jobs: bool) -> list[str]:
    return [sys.executable, "-m", "dramatiq", __name__, "-p", "1", "-t", "8"]
