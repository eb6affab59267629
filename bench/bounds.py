"""What a queue bound costs producers: enqueue throughput into a queue bounded far from
full (max_pending 10,000,000) against the same queue unbounded, in pairs that alternate,
quoting the median ratio pair by pair; one ``.delay()`` at a time and ``enqueue_many`` in
batches of 1,000, into a queue already holding ``--prefill`` messages (Cassandra counts
them before every bounded call; SQLite and Redis keep the count). (An unbounded queue pays
the check too: its cost against the code before bounds is in bench/NOTES.md.)

python -m bench.bounds [--pairs 6] [--single 5000] [--bulk 50000] [--prefill 0]
                       [--only sqlite|redis|cassandra] [--out FILE.json]
(starts a Redis server, or with --only cassandra a Cassandra node; SQLite in a scratch
directory)
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from pathlib import Path
from typing import Any

from bench.common import on_backends
from bench.engine import fresh_app

FAR_FROM_FULL = 10_000_000


def one_run(url: str, bounded: bool, single: int, bulk: int, prefill: int) -> dict[str, float]:
    """Messages per second: ``single`` ``.delay()`` calls, then ``bulk`` in batches."""
    app, tasks = fresh_app(url)
    if prefill:
        app.enqueue_many((tasks.noop.call(-i) for i in range(1, prefill + 1)), batch_size=5000)
    app.queues.configure("bench", max_pending=FAR_FROM_FULL if bounded else None)
    started = time.perf_counter()
    for i in range(single):
        tasks.noop.delay(i)
    single_s = time.perf_counter() - started
    calls = [tasks.noop.call(i) for i in range(bulk)]
    started = time.perf_counter()
    report = app.enqueue_many(calls, batch_size=1000)
    bulk_s = time.perf_counter() - started
    assert report.enqueued == bulk and report.waited_s == 0
    app.backend.queues.purge("bench")
    app.queues.configure("bench", max_pending=None)
    app.close()
    return {"delay_per_second": round(single / single_s), "bulk_per_second": round(bulk / bulk_s)}


def pairs(url: str, rounds: int, single: int, bulk: int, prefill: int = 0) -> dict[str, Any]:
    runs = []
    for _ in range(rounds):
        runs.append(
            {
                "unbounded": one_run(url, False, single, bulk, prefill),
                "bounded": one_run(url, True, single, bulk, prefill),
            }
        )
    result: dict[str, Any] = {"backend": url.split("://")[0], "prefill": prefill, "pairs": runs}
    for measure in ("delay_per_second", "bulk_per_second"):
        ratios = [r["bounded"][measure] / r["unbounded"][measure] for r in runs]
        result[measure.replace("_per_second", "")] = {
            "median_ratio": round(statistics.median(ratios), 3),
            "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)],
            "median_cost_percent": round(100 * (1 - statistics.median(ratios)), 1),
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--single", type=int, default=5000)
    parser.add_argument("--bulk", type=int, default=50_000)
    parser.add_argument("--prefill", type=int, default=0)
    parser.add_argument("--only", choices=("sqlite", "redis", "cassandra"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    logging.getLogger("tickwork").setLevel(logging.WARNING)
    logging.getLogger("cassandra").setLevel(logging.ERROR)
    extra = {"max_pending": FAR_FROM_FULL, "single": args.single, "bulk": args.bulk}

    def measure(url: str) -> dict[str, Any]:
        return pairs(url, args.pairs, args.single, args.bulk, args.prefill)

    on_backends(measure, extra, args.out, args.only)


if __name__ == "__main__":
    main()
