"""What this machine allows a Python process before tickwork does anything: the peers'
job alone (a redis-py ``INCR`` in a loop, on 1 to 8 threads sharing one process, as a
worker's handler threads do) and one loopback round trip (``PING`` on a raw connection).
These bound issue 15's targets for one process: no worker can run more one-``INCR`` jobs
a second than the bare ``INCR`` loop, nor make more one-at-a-time enqueue calls that wait
for their answer than round trips.

python -m bench.ceilings [--calls 20000] [--out FILE.json]   (starts its own Redis)
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from pathlib import Path
from typing import Any

import redis

from bench.common import machine


def incr_rate(url: str, threads: int, calls: int) -> float:
    """``INCR`` calls a second from ``threads`` threads of this process, each with its own
    connection, ``calls`` in all."""
    clients = [redis.Redis.from_url(url) for _ in range(threads)]
    for client in clients:
        client.ping()

    def loop(client: redis.Redis) -> None:
        for _ in range(calls // threads):
            client.incr("ceiling")

    workers = [threading.Thread(target=loop, args=(c,)) for c in clients]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - started
    for client in clients:
        client.close()
    return calls // threads * threads / elapsed


def ping_us(url: str, calls: int) -> float:
    """Microseconds a ``PING`` takes on a raw connection (no redis-py command machinery)."""
    client = redis.Redis.from_url(url)
    connection = client.connection_pool.get_connection()
    started = time.perf_counter()
    for _ in range(calls):
        connection.send_command("PING")
        connection.read_response()
    elapsed = time.perf_counter() - started
    client.connection_pool.release(connection)
    client.close()
    return elapsed / calls * 1e6


def measure(url: str, calls: int) -> dict[str, Any]:
    incr_rate(url, 1, calls // 10)  # warm up
    return {
        "incr_per_second": {str(n): round(incr_rate(url, n, calls)) for n in (1, 2, 4, 8)},
        "ping_round_trip_us": round(ping_us(url, calls), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    from tests.support.servers import RedisServer

    server = RedisServer()
    try:
        report = {"machine": machine(), "calls": args.calls, **measure(server.url, args.calls)}
    finally:
        server.stop()
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
