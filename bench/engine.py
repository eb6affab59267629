"""Backend-agnostic benchmark scenarios: bulk enqueue, end-to-end processing, lateness.

Run one backend: ``python -m bench.engine --backend sqlite:///bench.db`` (JSON on stdout).
"""

from __future__ import annotations

import argparse
import logging
import random
import time
from datetime import UTC, datetime
from typing import Any

from bench.common import emit, machine, summary_ms
from tickwork.scheduler import App
from tickwork.workers import Worker, WorkerConfig


def fresh_app(url: str, module: str = "bench.tasks") -> tuple[App, Any]:
    """The benchmark app of ``module`` (reloaded: a fresh ``App``) on ``url``, its queues
    empty."""
    import importlib

    tasks = importlib.reload(importlib.import_module(module))
    tasks.app.use_backend(url)
    for queue in ("bench", "timed"):
        tasks.app.backend.queues.purge(queue)
    return tasks.app, tasks


def bulk_enqueue(url: str, count: int, batch: int) -> dict[str, Any]:
    app, tasks = fresh_app(url)
    calls = [tasks.noop.call(i) for i in range(count)]
    started = time.perf_counter()
    report = app.enqueue_many(calls, batch_size=batch)
    elapsed = time.perf_counter() - started
    assert report.enqueued == count
    app.backend.queues.purge("bench")
    app.close()
    return {
        "messages": count,
        "batch_size": batch,
        "seconds": round(elapsed, 3),
        "per_second": round(count / elapsed),
    }


def end_to_end(
    url: str,
    count: int,
    concurrency: int,
    prefetch: int | None,
    batch: int,
    module: str = "bench.tasks",
    metrics_port: int | None = None,
    activity_interval_s: float | None = None,
    live_changes_s: float | None = None,
) -> dict[str, Any]:
    """One worker (this process) drains ``count`` pre-enqueued no-op messages (sync ones
    from ``bench.tasks``, ``async def`` ones from ``bench.async_tasks``), serving its
    Prometheus metrics if ``metrics_port`` is given (0: any free port), writing its
    activity log every ``activity_interval_s`` and gathering live changes for
    ``live_changes_s`` (each None: the worker's default; 0: never)."""
    app, tasks = fresh_app(url, module)
    app.enqueue_many((tasks.noop.call(i) for i in range(count)), batch_size=5000)
    config = WorkerConfig(
        queues=("bench",),
        concurrency=concurrency,
        prefetch=prefetch,
        batch_size=batch,
        burst=True,
        install_periodic=False,
        poll_interval_s=0.01,
        metrics_port=metrics_port,
    )
    if activity_interval_s is not None:
        config = config.model_copy(update={"activity_interval_s": activity_interval_s})
    if live_changes_s is not None:
        config = config.model_copy(update={"live_changes_s": live_changes_s})
    worker = Worker(app, config)
    started = time.perf_counter()
    stats = worker.run()
    elapsed = time.perf_counter() - started
    assert stats.acked == count, stats
    app.close()
    return {
        "messages": count,
        "concurrency": concurrency,
        "prefetch": prefetch,
        "batch_size": batch,
        "seconds": round(elapsed, 3),
        "per_second": round(count / elapsed),
    }


def lateness(url: str, count: int, spread_s: float, lead_s: float) -> dict[str, Any]:
    app, tasks = fresh_app(url)
    tasks.lateness.clear()
    start = time.time() + lead_s
    dues = sorted(start + random.uniform(0, spread_s) for _ in range(count))
    app.enqueue_many(
        (tasks.timed.call(due).options(at=datetime.fromtimestamp(due, UTC)) for due in dues),
        batch_size=1000,
    )
    worker = Worker(app, WorkerConfig(queues=("timed",), concurrency=8, install_periodic=False))
    worker.start()
    deadline = time.time() + lead_s + spread_s + 30
    while len(tasks.lateness) < count and time.time() < deadline:
        time.sleep(0.05)
    worker.stop()
    worker.join(30)
    app.close()
    late = list(tasks.lateness)
    assert len(late) == count, f"{len(late)} of {count} ran"
    early = sum(1 for v in late if v < 0)
    return {"messages": count, "spread_s": spread_s, **summary_ms(late), "early": early}


def claim_latency(url: str, pending: int, samples: int = 200) -> dict[str, Any]:
    """Time one claim of 100 plus its ack with ``pending`` messages waiting."""
    app, tasks = fresh_app(url)
    app.enqueue_many((tasks.noop.call(i) for i in range(pending)), batch_size=10_000)
    backend = app.backend
    timings = []
    for _ in range(samples):
        started = time.perf_counter()
        claims = backend.leases.claim("bench", 100).claims
        timings.append(time.perf_counter() - started)
        backend.leases.ack([(c, None) for c in claims])
        backend.messages.enqueue([app.build(tasks.noop.call(0))[1] for _ in claims])
    backend.queues.purge("bench")
    app.close()
    return {"pending": pending, "claim_batch": 100, **summary_ms(timings)}


def redis_memory(url: str, count: int) -> dict[str, Any]:
    """Server memory per pending message with a 100-byte payload (INFO memory delta / N)."""
    import redis

    app, tasks = fresh_app(url)
    app.backend.queues.purge("memory")
    client = redis.Redis.from_url(url.split("?")[0])
    before = int(client.info("memory")["used_memory"])
    data = "x" * 100
    app.enqueue_many((tasks.payload.call(data) for _ in range(count)), batch_size=5000)
    after = int(client.info("memory")["used_memory"])
    _, sample = app.build(tasks.payload.call(data))
    app.backend.queues.purge("memory")
    client.close()
    app.close()
    return {
        "messages": count,
        "payload_bytes": 100,
        "encoded_message_bytes": len(sample.body),
        "bytes_per_message": round((after - before) / count, 1),
    }


def run_all(url: str, scale: float) -> dict[str, Any]:
    logging.getLogger("tickwork").setLevel(logging.WARNING)
    return {
        "backend": url.split("://")[0],
        "bulk_enqueue": bulk_enqueue(url, int(100_000 * scale), 5000),
        "end_to_end_defaults": end_to_end(url, int(50_000 * scale), 8, None, 100),
        "end_to_end_batch_500": end_to_end(url, int(50_000 * scale), 8, 500, 500),
        # async def no-ops with the same defaults (async_concurrency 100 on the event loop)
        "end_to_end_async_defaults": end_to_end(
            url, int(50_000 * scale), 8, None, 100, "bench.async_tasks"
        ),
        "lateness": lateness(
            url, int((5_000 if url.startswith("sqlite") else 10_000) * scale), 10.0, 2.0
        ),
        "claim_latency_10k": claim_latency(url, int(10_000 * scale)),
        "claim_latency_1m": claim_latency(url, int(1_000_000 * scale)),
        **(
            {"memory": redis_memory(url, int(1_000_000 * scale))}
            if url.startswith("redis://")
            else {}
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backend", required=True)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply message counts")
    args = parser.parse_args()
    emit({"machine": machine(), "results": run_all(args.backend, args.scale)})


if __name__ == "__main__":
    main()
