"""The benchmark scenarios on a local Cassandra node started here (as the tests do).

    python -m bench.cassandra_bench [--out FILE]

Sizes are smaller than for SQLite and Redis where a run would otherwise take long: the
single node shares the 2 cores with the benchmark. The tombstone check is its own script,
``bench.cassandra_tombstones``.
"""

from __future__ import annotations

import argparse
import logging
import uuid
from pathlib import Path

from bench.common import report
from bench.engine import bulk_enqueue, claim_latency, end_to_end, lateness
from tests.support.cassandra_servers import CassandraNode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    logging.getLogger("tickwork").setLevel(logging.WARNING)
    logging.getLogger("cassandra").setLevel(logging.ERROR)
    node = CassandraNode()
    try:
        url = f"cassandra://{node.hosts}/bench{uuid.uuid4().hex[:6]}?consistency=ONE"
        bulk_enqueue(url, 50_000, 5000)  # warms the fresh node's JVM up; not reported
        results = {
            "bulk_enqueue": bulk_enqueue(url, 100_000, 5000),
            "end_to_end_defaults": end_to_end(url, 20_000, 8, None, 100),
            "end_to_end_batch_500": end_to_end(url, 20_000, 8, 500, 500),
            "lateness": lateness(url, 5_000, 10.0, 2.0),
            "claim_latency_10k": claim_latency(url, 10_000, 200),
            "claim_latency_1m": claim_latency(url, 1_000_000, 200),
        }
    finally:
        node.stop()
    report("cassandra", results, args.out)


if __name__ == "__main__":
    main()
