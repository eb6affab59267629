"""How soon a run's change reaches a client of ``GET /api/v1/stream``, on the servers the
docs start: ``tickwork dashboard -A`` (the API) and ``tickwork worker -A``, each a process
of its own, and a Server-Sent Events client here, on SQLite, PostgreSQL and Redis.

- ``feed``: a change published (``backend.changes.publish``, stamped with the time) to
  its arrival at the client: what the backend's feed and the server add.
- ``run``: a no-op run's start and end, stamped by the worker as they happen, to their
  arrival: the feed plus the worker's gathering of changes (``live_changes_s``, 20 ms).

Latencies in milliseconds (p50, p99, max); the clocks are this machine's (the worker
stamps with the backend's clock, read locally: the same clock here).

    python -m bench.stream_latency [--changes 300] [--only sqlite|postgres|redis] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from tests.support.postgres_servers import PostgresServer
from tests.support.served import EventStream, call_api, dashboard, worker
from tests.support.servers import RedisServer
from tickwork.scheduler.backends import open_backend
from tickwork.scheduler.runs.changes import RunChange

ROOT = Path(__file__).resolve().parents[1]

APP = """
from tickwork import App

app = App()


@app.task
def tick(n: int) -> None:
    pass
"""


def _figures(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    return {
        "count": len(ordered),
        "p50_ms": round(statistics.median(ordered), 1),
        "p99_ms": round(ordered[max(0, int(len(ordered) * 0.99) - 1)], 1),
        "max_ms": round(ordered[-1], 1),
    }


def _heard(stream: EventStream, count: int) -> list[float]:
    """Milliseconds from each of ``count`` changes' stamps to their arrival."""
    latencies = []
    for _ in range(count):
        taken = stream.take(1, timeout_s=30)
        if not taken:
            break
        latencies.append(time.time() * 1000 - taken[0][1]["at_ms"])
    return latencies


def _feed(url: str, base: str, changes: int) -> list[float]:
    backend = open_backend(url)
    latencies: list[float] = []
    try:
        with EventStream(base, "task=bench.feed") as stream:
            for n in range(changes):
                stamp = int(time.time() * 1000)
                change = RunChange("started", f"m{n}", "bench.feed", "q", None, 1, stamp, "b", n)
                backend.changes.publish([change.encode()])
                latencies += _heard(stream, 1)
                time.sleep(0.01)
    finally:
        backend.close()
    return latencies


def _runs(base: str, changes: int) -> list[float]:
    latencies: list[float] = []
    with EventStream(base, "task=streamed.tick") as stream:
        for n in range(changes // 2):
            status, answer = call_api(
                base, "POST", "/messages", {"task": "streamed.tick", "args": [n]}
            )
            assert status == 200, answer
            latencies += _heard(stream, 2)  # started, succeeded
            time.sleep(0.02)
    return latencies


def measure(url: str, changes: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        (folder / "streamed.py").write_text(textwrap.dedent(APP))
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{folder}:{ROOT}", "TICKWORK_BACKEND": url}
        with worker("streamed", folder, env), dashboard("streamed", folder, env) as base:
            return {
                "feed": _figures(_feed(url, base, changes)),
                "run": _figures(_runs(base, changes)),
            }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--changes", type=int, default=300)
    parser.add_argument("--only", choices=("sqlite", "postgres", "redis"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    result: dict[str, Any] = {"changes": args.changes}
    kinds = [k for k in ("sqlite", "postgres", "redis") if args.only in (None, k)]
    for kind in kinds:
        with tempfile.TemporaryDirectory() as scratch:
            if kind == "sqlite":
                result[kind] = measure(f"sqlite:///{scratch}/bench.db", args.changes)
            elif kind == "postgres":
                postgres = PostgresServer()
                try:
                    result[kind] = measure(f"{postgres.url}?schema=bench", args.changes)
                finally:
                    postgres.stop()
            else:
                redis = RedisServer()
                try:
                    result[kind] = measure(redis.url, args.changes)
                finally:
                    redis.stop()
        print(kind, json.dumps(result[kind]), flush=True)
    print(json.dumps(result, indent=2))
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
