"""Weighted fair share over a minute (issue 51): two tenants with a backlog each, one of
weight 3 and one of weight 1, run by one worker for ``--seconds``; the runs each got,
and their ratio (the goal: within 10% of 3). The handler sleeps ``--handler-ms`` so the
backlog outlasts the minute. SQLite and Redis side by side, or PostgreSQL alone
(``--only postgres``); Cassandra does not offer fair share.

python -m bench.fair_weights [--seconds 60] [--backlog 20000] [--handler-ms 10]
                             [--concurrency 4] [--only sqlite|redis|postgres] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import logging
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.common import on_backends
from tickwork import App, Worker, WorkerConfig

QUEUE = "fair-bench"


def measure(
    url: str, seconds: float, backlog: int, handler_ms: float, concurrency: int
) -> dict[str, Any]:
    """Runs per tenant in ``seconds`` of one worker, weights 3 (``paying``) and 1."""
    app = App(url)
    app.backend.queues.purge(QUEUE)
    lock = threading.Lock()
    runs: Counter[str] = Counter()

    @app.task(fair_key="tenant", queue=QUEUE, name="bench.fair_report")
    def report(tenant: str, n: int) -> None:
        time.sleep(handler_ms / 1000)
        with lock:
            runs[tenant] += 1

    app.queues.weigh(QUEUE, "paying", 3)
    app.enqueue_many(
        report.call(tenant, n) for n in range(backlog) for tenant in ("paying", "free")
    )
    worker = Worker(app, WorkerConfig(queues=(QUEUE,), concurrency=concurrency))
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    time.sleep(seconds)
    with lock:
        counted = dict(runs)
    worker.stop()
    thread.join(60)
    app.queues.weigh(QUEUE, "paying", None)
    app.backend.queues.purge(QUEUE)
    app.close()
    paying, free = counted.get("paying", 0), counted.get("free", 0)
    assert paying < backlog and free < backlog, "the backlog ran out: make it longer"
    return {
        "backend": url.split("://")[0],
        "seconds": seconds,
        "runs": {"paying (weight 3)": paying, "free (weight 1)": free},
        "ratio": round(paying / free, 3) if free else None,
        "within_10_percent_of_3": free > 0 and abs(paying / free - 3) <= 0.3,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--backlog", type=int, default=20_000)
    parser.add_argument("--handler-ms", type=float, default=10)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--only", choices=("sqlite", "redis", "postgres"))
    parser.add_argument("--out")
    args = parser.parse_args()
    logging.getLogger("tickwork").setLevel(logging.WARNING)
    extra = {
        "backlog_each": args.backlog,
        "handler_ms": args.handler_ms,
        "concurrency": args.concurrency,
    }
    out = None if args.out is None else Path(args.out)

    def run(url: str) -> dict[str, Any]:
        return measure(url, args.seconds, args.backlog, args.handler_ms, args.concurrency)

    on_backends(run, extra, out, args.only)


if __name__ == "__main__":
    main()
