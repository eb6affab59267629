"""One measurement of one system, run in that system's environment, on a fresh database
(``BENCH_PG_URL``); prints one JSON object.
``python -m bench.peers_pg.measure SYSTEM SCENARIO --count N``; the scenarios:

- ``single``: ``--count`` enqueues one call at a time (no worker running), after 10 to
  warm up: enqueues per second.
- ``bulk``: ``--count`` enqueues by the system's bulk API.
- ``process``: ``--count`` jobs of the task doing one ``UPDATE`` enqueued in bulk, then
  one worker process started; jobs per second from the first completion to the last.
- ``process_noop``: the same with a task that does nothing (completions counted in the
  system's own tables, every 50 ms).
- ``lateness``: a worker started and seen to run one job, then ``--count`` delayed jobs
  due evenly over 10 s from 3 s from now: start minus due time, p50, p99 and max in ms.
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.peers.shared import bulk, single, start_worker, stop_worker
from bench.peers_pg.common import URL, lateness_s, prepare, updates_done

ROOT = Path(__file__).resolve().parents[2]


def _drain(adapter: Any, count: int, done: Callable[[], int], every_s: float) -> dict[str, Any]:
    worker = start_worker(adapter.worker_command(), {"BENCH_PG_URL": URL})
    first: tuple[float, int] | None = None
    deadline = time.monotonic() + 600
    try:
        while (finished := done()) < count:
            if first is None and finished > 0:
                first = (time.perf_counter(), finished)
            if time.monotonic() > deadline or worker.poll() is not None:
                raise RuntimeError(f"{finished} of {count} ran before the worker stopped or 600 s")
            time.sleep(every_s)
        last = time.perf_counter()
    finally:
        stop_worker(worker)
    assert first is not None
    return {"per_second": round((count - first[1]) / (last - first[0]))}


def process(adapter: Any, count: int) -> dict[str, Any]:
    adapter.enqueue_many(count, "update")
    return _drain(adapter, count, updates_done, 0.005)


def process_noop(adapter: Any, count: int) -> dict[str, Any]:
    adapter.enqueue_many(count, "noop")
    return _drain(adapter, count, adapter.completed, 0.05)


def lateness(adapter: Any, count: int) -> dict[str, Any]:
    worker = start_worker(adapter.worker_command(), {"BENCH_PG_URL": URL})
    try:
        adapter.enqueue_one()
        deadline = time.monotonic() + 120
        while updates_done() < 1:
            if time.monotonic() > deadline:
                raise RuntimeError("the worker ran nothing in 120 s")
            time.sleep(0.01)
        start = time.time() + 3.0
        for i in range(count):
            adapter.enqueue_delayed(start + 10.0 * i / count)
        deadline = time.monotonic() + 120
        while len(late := lateness_s()) < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(late)} of {count} delayed jobs ran")
            time.sleep(0.1)
    finally:
        stop_worker(worker)
    late_ms = sorted(v * 1000 for v in lateness_s())
    return {
        "p50_ms": round(statistics.median(late_ms), 2),
        "p99_ms": round(late_ms[int(0.99 * (len(late_ms) - 1))], 2),
        "max_ms": round(late_ms[-1], 2),
        "min_ms": round(late_ms[0], 2),
    }


SCENARIOS = {
    "single": single,
    "bulk": bulk,
    "process": process,
    "process_noop": process_noop,
    "lateness": lateness,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("system")
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--count", type=int, required=True)
    args = parser.parse_args()
    prepare()
    adapter = importlib.import_module(f"bench.peers_pg.{args.system}_app")
    adapter.install()
    result = SCENARIOS[args.scenario](adapter, args.count)
    getattr(adapter, "close", lambda: None)()
    print(json.dumps({"system": args.system, "scenario": args.scenario, **result}))


if __name__ == "__main__":
    main()
