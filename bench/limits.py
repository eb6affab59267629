"""What concurrency limits cost: end-to-end throughput of no-op tasks with a limit of 10
per key over 1,000 keys against the same tasks without a limit (alternating, in one run),
a contended case (a limit of 1 over 8 keys, so most work waits and is woken), and the
latency of claiming a batch of 100 limited messages and taking their slots at 10,000
and 1,000,000 pending.

python -m bench.limits [--scale 1.0] [--rounds 2] [--only sqlite|redis] [--out FILE.json]
(starts a Redis server; SQLite in a scratch directory)
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from pathlib import Path
from typing import Any

from bench.common import on_sqlite_and_redis, summary_ms
from bench.engine import fresh_app
from tickwork.scheduler.backends import SlotRequest
from tickwork.workers import Worker, WorkerConfig

MODULE = "bench.limit_tasks"


def end_to_end(url: str, task_name: str, count: int, keys: int) -> dict[str, Any]:
    """One worker (8 threads, defaults) drains ``count`` pre-enqueued messages of
    ``task_name`` spread over ``keys`` keys."""
    app, tasks = fresh_app(url, MODULE)
    task = getattr(tasks, task_name)
    app.enqueue_many((task.call(i, f"k{i % keys}") for i in range(count)), batch_size=5000)
    config = WorkerConfig(
        queues=("bench",), concurrency=8, burst=True, install_periodic=False, poll_interval_s=0.01
    )
    worker = Worker(app, config)
    started = time.perf_counter()
    stats = worker.run()
    elapsed = time.perf_counter() - started
    assert stats.acked == count, stats
    app.close()
    return {
        "task": task_name,
        "messages": count,
        "keys": keys,
        "seconds": round(elapsed, 3),
        "per_second": round(count / elapsed),
        "sent_back_to_wait": stats.limited,
    }


def claim_latency(url: str, pending: int, samples: int = 100) -> dict[str, Any]:
    """One claim of 100 limited messages plus taking their slots (what a worker does
    before they start: in the claim on Redis, with one more call elsewhere), with
    ``pending`` waiting; then ack and give the slots back."""
    app, tasks = fresh_app(url, MODULE)
    app.enqueue_many(
        (tasks.limited.call(i, f"k{i % 1000}") for i in range(pending)), batch_size=10_000
    )
    backend = app.backend
    timings = []
    for _ in range(samples):
        started = time.perf_counter()
        claims = backend.leases.claim("bench", 100, slots={tasks.limited.name: 10}).claims
        requests = [  # the slots the claim did not take (all but on Redis): asked for apart
            SlotRequest(f"{tasks.limited.name}:{c.id}", 10, c.id, c.queue, c.key, c.timeout_ms)
            for c in claims
            if c.slot is None
        ]
        assert all(answer is None for answer in backend.limits.acquire(requests))
        timings.append(time.perf_counter() - started)
        backend.leases.ack([(c, None) for c in claims])
        held = [(c.slot, c.id) for c in claims if c.slot is not None]
        backend.limits.release(held + [(r.limit, r.message_id) for r in requests])
        backend.messages.enqueue([app.build(tasks.limited.call(0, "k0"))[1] for _ in claims])
    backend.queues.purge("bench")
    app.close()
    return {"pending": pending, "claim_batch": 100, **summary_ms(timings)}


def run_backend(url: str, scale: float, rounds: int) -> dict[str, Any]:
    count = int(50_000 * scale)
    pairs = []
    for _ in range(rounds):  # alternate, so drift in the machine hits both alike
        pairs.append(
            (end_to_end(url, "free", count, 1000), end_to_end(url, "limited", count, 1000))
        )
    free = statistics.median(p[0]["per_second"] for p in pairs)
    limited = statistics.median(p[1]["per_second"] for p in pairs)
    return {
        "backend": url.split("://")[0],
        "rounds": [{"no_limit": a, "limit_10_per_key": b} for a, b in pairs],
        "median_no_limit_per_second": free,
        "median_limit_10_per_key_per_second": limited,
        "limit_cost_percent": round(100 * (free - limited) / free, 1),
        "contended_limit_1_over_8_keys": end_to_end(url, "contended", int(5_000 * scale), 8),
        "claim_latency_10k": claim_latency(url, int(10_000 * scale)),
        "claim_latency_1m": claim_latency(url, int(1_000_000 * scale)),
    }


def main() -> None:

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--only", choices=("sqlite", "redis"), help="one backend only")
    args = parser.parse_args()
    logging.getLogger("tickwork").setLevel(logging.WARNING)
    on_sqlite_and_redis(
        lambda url: run_backend(url, args.scale, args.rounds),
        {"scale": args.scale},
        args.out,
        args.only,
    )


if __name__ == "__main__":
    main()
