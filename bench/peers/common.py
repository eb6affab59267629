"""What every system's adapter shares: the Redis URL, the keys the tasks write, and the
task bodies' work (a no-op that does one ``INCR``, as a real handler does some I/O; a
delayed task that records how late it ran). Imports no task queue."""

from __future__ import annotations

import os
import time

import redis

URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6390/0")
QUEUE = "peers"
DONE = "bench:done"  # INCR per no-op run
LATENESS = "bench:lat"  # RPUSH of (start - target) seconds per delayed run

client = redis.Redis.from_url(URL)


def noop_body() -> None:
    """The no-op's work: one round trip."""
    client.incr(DONE)


def delayed_body(target: float) -> None:
    """The delayed task's work: how late it started, in seconds."""
    client.rpush(LATENESS, time.time() - target)
