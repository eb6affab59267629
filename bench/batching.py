"""Batching into one run (issue 51): ``--calls`` calls of a task with
``batch_size=--size`` (and ``batch_timeout=1 s``), enqueued before one worker (defaults)
starts; how many handler calls ran them, how large, and every call accounted for (acked
by the worker's count, none left in the queue), with the time from the worker's start
to the last ack beside the same calls of an unbatched task that does the same work.

python -m bench.batching [--calls 10000] [--size 100]
                         [--only sqlite|redis|postgres|cassandra] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import logging
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import on_backends
from tickwork import App, Worker, WorkerConfig
from tickwork.workflows import BatchedCall

QUEUE = "batching-bench"


def measure(url: str, args: argparse.Namespace) -> dict[str, Any]:
    app = App(url)
    app.backend.queues.purge(QUEUE)
    lock = threading.Lock()
    sizes: list[int] = []
    seen: set[int] = set()

    @app.task(batch_size=args.size, queue=QUEUE, name="bench.batched")
    def batched(calls: list[BatchedCall]) -> None:
        with lock:
            sizes.append(len(calls))
            seen.update(call.args[0] for call in calls)

    @app.task(queue=QUEUE, name="bench.single")
    def single(n: int) -> None:
        with lock:
            seen.add(n)

    results: dict[str, Any] = {"backend": url.split(":", 1)[0]}
    for name, task in (("batched", batched), ("one_call_a_run", single)):
        seen.clear()
        app.enqueue_many([task.call(n) for n in range(args.calls)])
        worker = Worker(app, WorkerConfig(queues=(QUEUE,), burst=True))
        started = time.perf_counter()
        stats = worker.run()
        took = time.perf_counter() - started
        left = sum(s.ready + s.scheduled + s.in_flight for s in app.backend.queues.stats(QUEUE))
        results[name] = {
            "acked": stats.acked,
            "every_call_ran": seen == set(range(args.calls)),
            "left_in_the_queue": left,
            "seconds": round(took, 2),
            "calls_per_s": round(args.calls / took),
        }
        if name == "batched":
            results[name] |= {
                "handler_calls": len(sizes),
                "smallest_batch": min(sizes),
                "largest_batch": max(sizes),
            }
    app.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--only", choices=("sqlite", "redis", "postgres", "cassandra"))
    parser.add_argument("--out")
    args = parser.parse_args()
    logging.getLogger("tickwork").setLevel(logging.WARNING)
    logging.getLogger("cassandra").setLevel(logging.ERROR)
    out = None if args.out is None else Path(args.out)
    on_backends(
        lambda url: measure(url, args), {"calls": args.calls, "size": args.size}, out, args.only
    )


if __name__ == "__main__":
    main()
