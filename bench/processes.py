"""One worker process against two (``tickwork worker --processes 2``): messages per second
of ``--messages`` no-ops and of CPU-bound runs (about 1 ms of pure Python each), each
worker started from the CLI with ``--burst``, alternating 1 and 2 processes in one run.

The figure is counted from the backend, from the first ack to the last (the interpreters'
start is left out): acked messages over that time.

python -m bench.processes [--messages 20000] [--crunch 3000] [--rounds 3]
                          [--only sqlite|redis] [--out FILE.json]
(starts a Redis server; SQLite in a scratch directory)
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import alternate, on_backends
from bench.engine import fresh_app

ROOT = Path(__file__).resolve().parent.parent


def _acked(app: Any) -> int:
    (stats,) = app.backend.queues.stats("procs")
    return int(stats.counters.get("acked", 0))


def rate(url: str, task: str, count: int, processes: int) -> float:
    """Messages per second of ``count`` runs of ``task`` by a ``--processes`` worker."""
    app, tasks = fresh_app(url, "bench.process_tasks")
    app.backend.queues.purge("procs")
    app.enqueue_many([getattr(tasks, task).call(i) for i in range(count)])
    base = _acked(app)
    command = [sys.executable, "-m", "tickwork", "worker", "-A", "bench.process_tasks"]
    command += ["--processes", str(processes), "--burst", "--log-level", "warning"]
    env = {**os.environ, "TICKWORK_BACKEND": url}
    worker = subprocess.Popen(command, cwd=ROOT, env=env)
    first: tuple[float, int] | None = None
    while (done := _acked(app) - base) < count:
        if first is None and done > 0:
            first = (time.perf_counter(), done)
        if worker.poll() is not None and _acked(app) - base < count:  # it failed early
            raise RuntimeError(f"the worker exited ({worker.returncode}) at {done} of {count}")
        time.sleep(0.005)
    last = time.perf_counter()
    worker.wait(120)
    app.backend.queues.purge("procs")
    app.close()
    assert first is not None
    return round((count - first[1]) / (last - first[0]))


def measure(url: str, messages: int, crunch: int, rounds: int) -> dict[str, Any]:
    return {
        "backend": url.split("://")[0],
        "noop_per_second": alternate(
            rounds,
            "one_process",
            lambda: rate(url, "noop", messages, 1),
            "two_processes",
            lambda: rate(url, "noop", messages, 2),
        ),
        "crunch_per_second": alternate(
            rounds,
            "one_process",
            lambda: rate(url, "crunch", crunch, 1),
            "two_processes",
            lambda: rate(url, "crunch", crunch, 2),
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--crunch", type=int, default=3_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=("sqlite", "redis"))
    parser.add_argument("--out")
    args = parser.parse_args()
    logging.getLogger("tickwork").setLevel(logging.WARNING)
    extra = {"messages": args.messages, "crunch": args.crunch, "rounds": args.rounds}
    out = None if args.out is None else Path(args.out)

    def run(url: str) -> dict[str, Any]:
        return measure(url, args.messages, args.crunch, args.rounds)

    on_backends(run, extra, out, args.only)


if __name__ == "__main__":
    main()
