"""What the occurrence ledger costs: end-to-end throughput of a keyed recurring workload
with the ledger (``history_keep=100``, the default) and without it (``history_keep=0``),
alternating in one run, the CPU an ack took in each (the worker's process, and Redis's
own), and on Redis the memory a schedule's full ledger takes.

The workload: ``--schedules`` keyed schedules of a no-op task, each due every
millisecond and set to catch up (so each chain runs back to back, and every ack writes
the next occurrence and, with the ledger, one record; none is coalesced). One in-process
worker (8 threads) runs them for ``--seconds`` after a second of warm-up; the figure is
acks per second, counted by the backend.

python -m bench.ledger [--schedules 200] [--seconds 8] [--rounds 3]
                       [--only sqlite|redis|cassandra] [--out FILE.json]
(starts a Redis server, or with --only cassandra a Cassandra node; SQLite in a scratch
directory)
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.common import alternate, on_backends
from bench.engine import fresh_app
from tickwork.scheduler import App
from tickwork.triggers import Misfire, Repeating
from tickwork.workers import Worker, WorkerConfig

_WARM_UP_S = 1.0


def _acked(app: App) -> int:
    (stats,) = app.backend.queues.stats("bench")
    return stats.counters.get("acked", 0)


@dataclass(frozen=True)
class Counted:
    """One run of the workload: its rate, and the CPU an ack took (less noisy than the
    rate on this machine: single pairs of rates spread by +-15%)."""

    acks_per_second: float
    worker_cpu_us_per_ack: float  # this process: the worker, and SQLite's work in it
    server_cpu_us_per_ack: float | None  # Redis's own (``INFO cpu``); None elsewhere


def _server_cpu_s(url: str) -> float | None:
    if not url.startswith("redis"):
        return None
    import redis

    with redis.Redis.from_url(url) as client:
        info = client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def counted_run(url: str, schedules: int, seconds: float, keep: int) -> tuple[Counted, App]:
    """The workload with ``history_keep=keep``, counted; returns the app too (its backend
    still holds the ledgers), with its schedules cancelled."""
    app, tasks = fresh_app(url)
    app.settings = app.settings.model_copy(update={"history_keep": keep})
    every = Repeating(
        interval=timedelta(milliseconds=1), misfire=Misfire.CATCH_UP, max_catch_up=10**9
    )
    for i in range(schedules):
        tasks.noop.schedule(args=(i,), trigger=every, key=f"s{i}")
    config = WorkerConfig(
        queues=("bench",), concurrency=8, install_periodic=False, poll_interval_s=0.01
    )
    worker = Worker(app, config)
    worker.start()
    time.sleep(_WARM_UP_S)
    server_before, cpu_before = _server_cpu_s(url), time.process_time()
    before, started = _acked(app), time.perf_counter()
    time.sleep(seconds)
    after, elapsed = _acked(app), time.perf_counter() - started
    server_after, cpu_after = _server_cpu_s(url), time.process_time()
    worker.stop()
    worker.join(60)
    app.backend.queues.purge("bench")
    acks = max(1, after - before)
    server = None
    if server_before is not None and server_after is not None:
        server = (server_after - server_before) / acks * 1e6
    return Counted((after - before) / elapsed, (cpu_after - cpu_before) / acks * 1e6, server), app


def throughput(url: str, schedules: int, seconds: float, keep: int) -> tuple[float, App]:
    """Acks per second of the workload with ``history_keep=keep`` (``counted_run``)."""
    counted, app = counted_run(url, schedules, seconds, keep)
    return counted.acks_per_second, app


def redis_memory(url: str, schedules: int) -> dict[str, Any]:
    """Bytes Redis uses for the ledgers left by a run with the ledger (``MEMORY USAGE``
    of every ledger list), per schedule, and for one pending message for comparison."""
    import redis

    rate, app = throughput(url, schedules, 8.0, 100)
    client = redis.Redis.from_url(url)
    ledger_keys = list(client.scan_iter(match="*:h:k:s*", count=1000))
    ledger_bytes = sum(client.memory_usage(key, samples=0) or 0 for key in ledger_keys)
    lengths = [client.llen(key) for key in ledger_keys]
    app.close()
    return {
        "schedules_with_a_ledger": len(ledger_keys),
        "records_per_ledger_min": min(lengths) if lengths else 0,
        "ledger_bytes_per_schedule": round(ledger_bytes / max(1, len(ledger_keys))),
        "bytes_per_record": round(ledger_bytes / max(1, sum(lengths))),
        "acks_per_second_during_fill": round(rate),
    }


def measure(url: str, schedules: int, seconds: float, rounds: int) -> dict[str, Any]:
    runs: dict[int, list[Counted]] = {0: [], 100: []}

    def rate(keep: int) -> float:
        counted, app = counted_run(url, schedules, seconds, keep)
        app.close()
        runs[keep].append(counted)
        return round(counted.acks_per_second)

    result: dict[str, Any] = {
        "backend": url.split("://")[0],
        "acks_per_second": alternate(
            rounds, "without_ledger", lambda: rate(0), "with_ledger", lambda: rate(100)
        ),
        "cpu_us_per_ack": {
            name: _cpu_medians(runs[keep])
            for name, keep in (("without_ledger", 0), ("with_ledger", 100))
        },
    }
    if url.startswith("redis"):
        result["redis_memory"] = redis_memory(url, schedules)
    return result


def _cpu_medians(runs: list[Counted]) -> dict[str, float | None]:
    servers = [r.server_cpu_us_per_ack for r in runs if r.server_cpu_us_per_ack is not None]
    return {
        "worker_median": round(statistics.median(r.worker_cpu_us_per_ack for r in runs), 1),
        "server_median": round(statistics.median(servers), 1) if servers else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--schedules", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=("sqlite", "redis", "cassandra"))
    parser.add_argument("--out")
    args = parser.parse_args()
    logging.getLogger("tickwork").setLevel(logging.WARNING)
    logging.getLogger("cassandra").setLevel(logging.ERROR)
    extra = {"schedules": args.schedules, "seconds": args.seconds, "rounds": args.rounds}
    out = None if args.out is None else Path(args.out)

    def run(url: str) -> dict[str, Any]:
        return measure(url, args.schedules, args.seconds, args.rounds)

    on_backends(run, extra, out, args.only)


if __name__ == "__main__":
    main()
