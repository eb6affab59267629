"""What ``wait_replicas=1`` costs: one Redis with one replica (and a Redis Cluster of three
masters with a replica each), on loopback, measured with and without the option in
pairs that alternate, quoting the median ratio pair by pair: single ``.delay()`` calls
(one round trip each, now with its ``WAIT``), a bulk enqueue, and a worker draining
no-op messages (every batch of acks waits).

python -m bench.replica_wait [--pairs 5] [--delays 3000] [--messages 30000]
                             [--only redis|redis-cluster] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import alternate, emit, machine
from bench.engine import bulk_enqueue, end_to_end, fresh_app

WAIT = "wait_replicas=1"


def delays(url: str, count: int) -> float:
    """Single ``.delay()`` calls per second."""
    app, tasks = fresh_app(url)
    started = time.perf_counter()
    for n in range(count):
        tasks.noop.delay(n)
    elapsed = time.perf_counter() - started
    app.backend.queues.purge("bench")
    app.close()
    return count / elapsed


def _with(url: str, query: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}{query}"


def measure(url: str, args: argparse.Namespace) -> dict[str, Any]:
    figures: dict[str, Callable[[str], float]] = {
        "delay_per_second": lambda u: delays(u, args.delays),
        "bulk_enqueue_per_second": lambda u: float(
            bulk_enqueue(u, args.messages, 1000)["per_second"]
        ),
        "end_to_end_per_second": lambda u: float(
            end_to_end(u, args.messages, 8, None, 100, activity_interval_s=0)["per_second"]
        ),
    }
    waited = _with(url, WAIT)
    return {name: _paired(args.pairs, f, url, waited) for name, f in figures.items()}


def _paired(pairs: int, figure: Callable[[str], float], url: str, waited: str) -> dict[str, Any]:
    return alternate(pairs, "no_wait", lambda: figure(url), "wait", lambda: figure(waited))


def deployment(name: str) -> tuple[str, Callable[[], None]]:
    """(url, stop) of a deployment with one replica per master, replicas in sync."""
    from tests.support.servers import (
        RedisClusterServers,
        redis_with_replica,
        wait_for_replicas,
    )

    if name == "redis":
        servers = redis_with_replica()
        url = servers[0].url
    else:
        cluster = RedisClusterServers(replicas=1)
        servers, url = cluster.nodes, cluster.url
        wait_for_replicas(servers, 3)

    def stop() -> None:
        for server in servers:
            server.stop()

    return url, stop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--delays", type=int, default=3000)
    parser.add_argument("--messages", type=int, default=30_000)
    parser.add_argument("--only", choices=("redis", "redis-cluster"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    logging.getLogger("tickwork").setLevel(logging.WARNING)
    results = []
    for name in ("redis", "redis-cluster"):
        if args.only not in (None, name):
            continue
        url, stop = deployment(name)
        try:
            results.append({"deployment": name, "replicas_per_master": 1, **measure(url, args)})
        finally:
            stop()
    result = {"machine": machine(), "option": WAIT, "results": results}
    emit(result)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
