"""A graph's time to completion: a 1,000-step mesh (10 steps a level, 100 levels, each
step after two of the level before: fan-out and fan-in of two) and a sink after its last
level, against draining as many plain messages (what the fan-ins cost). One in-process
worker (``--concurrency`` threads) per run; SQLite, Redis and PostgreSQL side by side.

python -m bench.dag [--width 10] [--depth 100] [--concurrency 8] [--out FILE.json]
(starts a Redis server and a PostgreSQL server; SQLite in a scratch directory)
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import emit, machine
from bench.engine import fresh_app
from bench.workflows import _until_finished, _worker, plain_run
from tests.support.graphs import mesh, mesh_name
from tickwork.scheduler import after, graph


def dag_run(url: str, width: int, depth: int, concurrency: int) -> dict[str, Any]:
    """Enqueue the mesh and its sink, then time a worker from its start to the sink's run."""
    app, tasks = fresh_app(url, "bench.workflow_tasks")
    steps = mesh(width, depth, lambda level, place: tasks.node.si(level, place))
    last = [mesh_name(depth - 1, place) for place in range(width)]
    steps["sink"] = after(last, tasks.sink.si())
    started = time.perf_counter()
    handle = app.enqueue(graph(steps))
    enqueue_s = time.perf_counter() - started
    worker = _worker(app, concurrency)
    started = time.perf_counter()
    completion_s = _until_finished(tasks, worker, started, 1800)
    view = app.batches.workflow(handle)
    assert view.state == "succeeded", view.summary
    app.close()
    size = width * depth + 1
    return {
        "steps": size,
        "enqueue_s": round(enqueue_s, 3),
        "completion_s": round(completion_s, 3),
        "steps_per_second": round(size / completion_s),
    }


def measure(url: str, width: int, depth: int, concurrency: int) -> dict[str, Any]:
    dag = dag_run(url, width, depth, concurrency)
    plain = plain_run(url, width * depth + 1, concurrency)
    return {
        "backend": url.split("://")[0],
        "dag": dag,
        "plain": plain,
        "dag_vs_plain_time": round(dag["completion_s"] / plain["completion_s"], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--width", type=int, default=10)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--out")
    args = parser.parse_args()
    logging.getLogger("tickwork").setLevel(logging.WARNING)
    from tests.support.postgres_servers import PostgresServer
    from tests.support.servers import RedisServer

    redis, postgres = RedisServer(), PostgresServer()
    try:
        with tempfile.TemporaryDirectory() as scratch:
            urls = [f"sqlite:///{scratch}/bench.db", redis.url, f"{postgres.url}?schema=bench"]
            results = [measure(u, args.width, args.depth, args.concurrency) for u in urls]
    finally:
        redis.stop()
        postgres.stop()
    result = {
        "machine": machine(),
        "width": args.width,
        "depth": args.depth,
        "concurrency": args.concurrency,
        "results": results,
    }
    emit(result)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
