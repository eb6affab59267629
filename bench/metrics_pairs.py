"""What a worker's Prometheus metrics cost, or its activity log: end-to-end throughput of
no-op handlers with ``metrics_port`` set (counters, histograms and gauges updated per
message; nobody scrapes), or with the activity log written every half second (the same
counts, and a ledger append per queue per interval), against the same run with neither,
in pairs that alternate, quoting the median ratio pair by pair.

python -m bench.metrics_pairs [--feature metrics|activity] [--pairs 8] [--messages 30000]
                              [--only sqlite|redis] [--out FILE.json]
(starts a Redis server; SQLite in a scratch directory)
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from bench.common import alternate, on_sqlite_and_redis
from bench.engine import end_to_end

FEATURES: dict[str, dict[str, Any]] = {
    "metrics": {"metrics_port": 0},
    "activity": {"activity_interval_s": 0.5},
}
OFF = {"activity_interval_s": 0}


def pairs(url: str, count: int, rounds: int, feature: str) -> dict[str, Any]:
    def run(**options: Any) -> float:
        return float(end_to_end(url, count, 8, None, 100, **{**OFF, **options})["per_second"])

    return {
        "backend": url.split("://")[0],
        "messages": count,
        "feature": feature,
        **alternate(
            rounds,
            f"no_{feature}",
            run,
            feature,
            lambda: run(**FEATURES[feature]),
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--feature", choices=tuple(FEATURES), default="metrics")
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--messages", type=int, default=30_000)
    parser.add_argument("--only", choices=("sqlite", "redis"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    logging.getLogger("tickwork").setLevel(logging.WARNING)
    on_sqlite_and_redis(
        lambda url: pairs(url, args.messages, args.pairs, args.feature), {}, args.out, args.only
    )


if __name__ == "__main__":
    main()
