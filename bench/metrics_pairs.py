"""What a worker's Prometheus metrics cost: end-to-end throughput of no-op handlers with
``metrics_port`` set (counters, histograms and gauges updated per message; nobody
scrapes) against the same run without, in pairs that alternate, quoting the median ratio
pair by pair.

python -m bench.metrics_pairs [--pairs 8] [--messages 30000] [--only sqlite|redis]
                              [--out FILE.json]
(starts a Redis server; SQLite in a scratch directory)
"""

from __future__ import annotations

import argparse
import logging
import statistics
from pathlib import Path
from typing import Any

from bench.common import on_sqlite_and_redis
from bench.engine import end_to_end


def pairs(url: str, count: int, rounds: int) -> dict[str, Any]:
    runs = []
    for _ in range(rounds):
        plain = end_to_end(url, count, 8, None, 100)["per_second"]
        measured = end_to_end(url, count, 8, None, 100, metrics_port=0)["per_second"]
        runs.append({"no_metrics": plain, "metrics": measured})
    ratios = [r["metrics"] / r["no_metrics"] for r in runs]
    return {
        "backend": url.split("://")[0],
        "messages": count,
        "pairs": runs,
        "median_ratio": round(statistics.median(ratios), 3),
        "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)],
        "median_cost_percent": round(100 * (1 - statistics.median(ratios)), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--messages", type=int, default=30_000)
    parser.add_argument("--only", choices=("sqlite", "redis"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    logging.getLogger("tickwork").setLevel(logging.WARNING)
    on_sqlite_and_redis(lambda url: pairs(url, args.messages, args.pairs), {}, args.out, args.only)


if __name__ == "__main__":
    main()
