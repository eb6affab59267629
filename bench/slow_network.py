"""A worker over a slow network (issue 54): ``--jobs`` one-offs of a 10 ms handler
(``tests.support.loop_tasks.job``), run by one ``tickwork worker`` (4 threads) that
reaches the store through the fault proxy (``tests/support/fault_proxy.py``) with
``--latency-ms`` each way; messages a second from its first run to its last (its start,
a few round trips per connection, left out). Each job's run also appends a line to a
file; two chains (every 250 ms, every second) run beside them, as in the fault test.

python -m bench.slow_network [--jobs 2000] [--latency-ms 100]
                             [--only redis|postgres|cassandra] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import on_backends
from tests.faults.test_network_faults import proxied
from tests.faults.workload import MODULE, enqueue_workload, jobs_done, stop
from tests.support.helpers import wait_until

ROOT = Path(__file__).resolve().parents[1]


def measure(url: str, args: argparse.Namespace) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="tickwork-slow-"))
    runs = folder / "runs.txt"
    enqueue_workload(url, args.jobs, 0, 0, 1.0)
    with proxied(url) as (proxy, through):
        proxy.delay(args.latency_ms / 1000)
        env = {
            **os.environ,
            "TICKWORK_BACKEND": through,
            "TICKWORK_TEST_RUNS": str(runs),
            "PYTHONPATH": str(ROOT),
        }
        command = [sys.executable, "-m", "tickwork", "worker", "-A", MODULE]
        with (folder / "worker.log").open("ab") as log:
            worker = subprocess.Popen(
                [*command, "--concurrency", "4"],
                cwd=ROOT,  # this tree's tickwork, whatever the caller's folder
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        try:
            assert wait_until(lambda: jobs_done(runs) >= 1, 120), "nothing ran"
            started = time.monotonic()
            assert wait_until(lambda: jobs_done(runs) >= args.jobs, 1800), "stalled"
            took = time.monotonic() - started
        finally:
            stop(url, [worker])
    return {
        "jobs": args.jobs,
        "latency_ms_each_way": args.latency_ms,
        "seconds": round(took, 2),
        "messages_per_s": round((args.jobs - 1) / took, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--only", choices=("redis", "postgres", "cassandra"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    only = args.only or "redis"  # SQLite is a file: no network between it and a worker
    extra = {"jobs": args.jobs, "latency_ms_each_way": args.latency_ms}
    on_backends(lambda url: measure(url, args), extra, args.out, only)


if __name__ == "__main__":
    main()
