"""Workflows, time to completion: a batch of ``--members`` no-op members with an
``on_success`` callback that takes all their results, against draining the same number of
plain messages (what the fan-in costs), and a chain of ``--steps`` steps, each taking the
previous result. One in-process worker (``--concurrency`` threads) per run.

python -m bench.workflows [--members 10000] [--steps 1000] [--concurrency 8]
                          [--only sqlite|redis|cassandra] [--out FILE.json]
(starts a Redis server, or with --only cassandra a Cassandra node; SQLite in a scratch
directory)
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path
from typing import Any

from bench.common import on_backends
from bench.engine import fresh_app
from tickwork.scheduler import batch, chain, group
from tickwork.workers import Worker, WorkerConfig


def _worker(app: Any, concurrency: int) -> Worker:
    config = WorkerConfig(
        queues=("bench",),
        concurrency=concurrency,
        install_periodic=False,
        poll_interval_s=0.01,
    )
    worker = Worker(app, config)
    worker.start()
    return worker


def _until_finished(tasks: Any, worker: Worker, started: float, timeout_s: float) -> float:
    done = tasks.finished.wait(timeout_s)
    worker.stop()
    worker.join(60)
    if not done:
        raise RuntimeError(f"the workflow did not finish within {timeout_s} s")
    return float(tasks.finished_at[-1] - started)


def batch_run(url: str, members: int, concurrency: int) -> dict[str, Any]:
    """Enqueue the batch, then time a worker from its start to the callback's run."""
    app, tasks = fresh_app(url, "bench.workflow_tasks")
    started = time.perf_counter()
    handle = app.batches.enqueue(
        batch(group(tasks.member.call(n) for n in range(members)), on_success=tasks.gather.s())
    )
    enqueue_s = time.perf_counter() - started
    worker = _worker(app, concurrency)
    started = time.perf_counter()
    completion_s = _until_finished(tasks, worker, started, 1800)
    assert app.batches.get(handle).complete
    app.close()
    return {
        "enqueue_s": round(enqueue_s, 3),
        "completion_s": round(completion_s, 3),
        "per_second": round(members / completion_s),
    }


def plain_run(url: str, members: int, concurrency: int) -> dict[str, Any]:
    """The same members as plain messages (no batch): drained by a burst worker."""
    app, tasks = fresh_app(url, "bench.workflow_tasks")
    app.enqueue_many((tasks.member.call(n) for n in range(members)), batch_size=1000)
    config = WorkerConfig(
        queues=("bench",), concurrency=concurrency, burst=True, install_periodic=False
    )
    started = time.perf_counter()
    stats = Worker(app, config).run()
    elapsed = time.perf_counter() - started
    assert stats.acked == members
    app.close()
    return {"completion_s": round(elapsed, 3), "per_second": round(members / elapsed)}


def chain_run(url: str, steps: int, concurrency: int) -> dict[str, Any]:
    """A chain of ``steps`` steps (each takes the previous result), enqueue to last step."""
    app, tasks = fresh_app(url, "bench.workflow_tasks")
    calls = [tasks.increment.si(0), *(tasks.increment.s() for _ in range(steps - 2))]
    started = time.perf_counter()
    app.enqueue(chain(*calls, tasks.last.s()))
    worker = _worker(app, concurrency)
    completion_s = _until_finished(tasks, worker, started, 1800)
    app.close()
    return {
        "completion_s": round(completion_s, 3),
        "steps_per_second": round(steps / completion_s),
        "ms_per_step": round(1000 * completion_s / steps, 3),
    }


def measure(url: str, members: int, steps: int, concurrency: int) -> dict[str, Any]:
    plain = plain_run(url, members, concurrency)
    batched = batch_run(url, members, concurrency)
    return {
        "backend": url.split("://")[0],
        "batch": batched,
        "plain": plain,
        "batch_vs_plain_time": round(batched["completion_s"] / plain["completion_s"], 3),
        "chain": chain_run(url, steps, concurrency),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--members", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--only", choices=("sqlite", "redis", "cassandra"))
    parser.add_argument("--out")
    args = parser.parse_args()
    logging.getLogger("tickwork").setLevel(logging.WARNING)
    logging.getLogger("cassandra").setLevel(logging.ERROR)
    extra = {"members": args.members, "steps": args.steps, "concurrency": args.concurrency}
    out = None if args.out is None else Path(args.out)

    def run(url: str) -> dict[str, Any]:
        return measure(url, args.members, args.steps, args.concurrency)

    on_backends(run, extra, out, args.only)


if __name__ == "__main__":
    main()
