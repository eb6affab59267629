"""One measurement of one system, run in that system's environment; prints one JSON
object. ``python -m bench.peers.measure SYSTEM SCENARIO [--count N]`` with
``BENCH_REDIS_URL`` set; the scenarios:

- ``single``: ``--count`` enqueues one call at a time (no worker running), after 10 to
  warm up: enqueues per second.
- ``asingle``: the same awaited one at a time in one coroutine on one event loop, for
  the systems with an asyncio producer (tickwork's ``adelay``, arq's ``enqueue_job``).
- ``bulk``: ``--count`` enqueues by the system's bulk API (or its fastest loop).
- ``process``: ``--count`` no-ops enqueued in bulk, then one worker process started;
  jobs per second from the first completion to the last (the worker's start left out).
- ``lateness``: a worker started and seen to run one job, then ``--count`` delayed jobs
  due evenly over 3 s to 13 s from now: start minus due time, p50, p99 and max in ms.
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import time
from pathlib import Path
from typing import Any

from bench.peers.common import DONE, LATENESS, URL, client
from bench.peers.shared import asingle, bulk, single, start_worker, stop_worker

ROOT = Path(__file__).resolve().parents[2]


def _done() -> int:
    return int(client.get(DONE) or 0)


def process(adapter: Any, count: int) -> dict[str, Any]:
    adapter.enqueue_many(count)
    worker = start_worker(adapter.worker_command(False), {"BENCH_REDIS_URL": URL})
    first: tuple[float, int] | None = None
    deadline = time.monotonic() + 600
    try:
        while (done := _done()) < count:
            if first is None and done > 0:
                first = (time.perf_counter(), done)
            if time.monotonic() > deadline or worker.poll() is not None:
                raise RuntimeError(f"{done} of {count} ran before the worker stopped or 600 s")
            time.sleep(0.002)
        last = time.perf_counter()
    finally:
        stop_worker(worker)
    assert first is not None
    return {"per_second": round((count - first[1]) / (last - first[0]))}


def lateness(adapter: Any, count: int) -> dict[str, Any]:
    worker = start_worker(adapter.worker_command(True), {"BENCH_REDIS_URL": URL})
    try:
        adapter.enqueue_one()
        deadline = time.monotonic() + 120
        while _done() < 1:
            if time.monotonic() > deadline:
                raise RuntimeError("the worker ran nothing in 120 s")
            time.sleep(0.01)
        start = time.time() + 3.0
        for i in range(count):
            adapter.enqueue_delayed(start + 10.0 * i / count)
        deadline = time.monotonic() + 120
        while client.llen(LATENESS) < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{client.llen(LATENESS)} of {count} delayed jobs ran")
            time.sleep(0.05)
    finally:
        stop_worker(worker)
    late_ms = sorted(float(v) * 1000 for v in client.lrange(LATENESS, 0, -1))
    return {
        "p50_ms": round(statistics.median(late_ms), 2),
        "p99_ms": round(late_ms[int(0.99 * (len(late_ms) - 1))], 2),
        "max_ms": round(late_ms[-1], 2),
        "min_ms": round(late_ms[0], 2),
    }


SCENARIOS = {
    "single": single,
    "asingle": asingle,
    "bulk": bulk,
    "process": process,
    "lateness": lateness,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("system")
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--count", type=int, required=True)
    args = parser.parse_args()
    client.flushdb()
    adapter = importlib.import_module(f"bench.peers.{args.system}_app")
    result = SCENARIOS[args.scenario](adapter, args.count)
    client.flushdb()
    print(json.dumps({"system": args.system, "scenario": args.scenario, **result}))


if __name__ == "__main__":
    main()
