"""How many commands the Redis server runs for each ``.delay()`` and for each job a
worker processes, the peers' task (one ``INCR`` a job, counted too) through one
in-process worker with its defaults: ``INFO commandstats`` read before and after, each
command counted where it runs (a script's ``EVALSHA`` and every command inside it).

python -m bench.commands [--jobs 5000] [--out FILE.json]   (starts its own Redis)
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import redis

from bench.common import on_sqlite_and_redis


def _calls(client: redis.Redis) -> dict[str, int]:
    stats: dict[str, Any] = client.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(s["calls"]) for name, s in stats.items()}


def _per(before: dict[str, int], after: dict[str, int], count: int) -> dict[str, Any]:
    """Commands per unit between two readings (``info`` itself left out)."""
    each = {
        name: round((calls - before.get(name, 0)) / count, 2)
        for name, calls in after.items()
        if name != "info" and calls > before.get(name, 0)
    }
    each = {name: value for name, value in each.items() if value >= 0.01}
    ordered = dict(sorted(each.items(), key=lambda item: -item[1]))
    return {"total": round(sum(ordered.values()), 2), "by_command": ordered}


def measure(url: str, jobs: int) -> dict[str, Any]:
    """Commands per ``.delay()`` (``jobs`` calls, after 100 to warm up), then per job
    processed (those calls and the warm-up's, by one worker in burst mode)."""
    os.environ["BENCH_REDIS_URL"] = url
    client = redis.Redis.from_url(url)
    client.flushall()
    import bench.peers.tickwork_app as side  # reads BENCH_REDIS_URL
    from bench.peers.common import QUEUE
    from tickwork.workers import Worker, WorkerConfig

    for _ in range(100):
        side.enqueue_one()
    before = _calls(client)
    for _ in range(jobs):
        side.enqueue_one()
    delay = _per(before, _calls(client), jobs)
    before = _calls(client)
    config = WorkerConfig(queues=(QUEUE,), burst=True, install_periodic=False)
    Worker(side.app, config).run()
    process = _per(before, _calls(client), jobs + 100)
    return {"jobs": jobs, "per_delay": delay, "per_processed_job": process}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    on_sqlite_and_redis(lambda url: measure(url, args.jobs), {}, args.out, only="redis")


if __name__ == "__main__":
    main()
