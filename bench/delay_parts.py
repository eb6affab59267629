"""Where one ``.delay()`` on Redis spends its time (issue 15): the whole call, the same
call with the round trip taken out (the Python around it), the enqueue script through
redis-py's ``Script`` (what the backend does), through ``client.evalsha`` and through a
raw connection, and ``PING`` through redis-py and through a raw connection (the
machine's loopback round trip); the server's own time per script call from ``INFO
commandstats``. Microseconds per call, ``--rounds`` rounds of ``--calls`` calls.

python -m bench.delay_parts [--calls 8000] [--rounds 3] [--out FILE.json]
(starts a Redis server)
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import on_sqlite_and_redis
from bench.engine import fresh_app
from tickwork.scheduler.backends.redis.scripts import encode_record
from tickwork.scheduler.model.tasks import Call


def _per_call_us(calls: int, step: Callable[[int], object]) -> float:
    started = time.perf_counter()
    for i in range(calls):
        step(i)
    return (time.perf_counter() - started) / calls * 1e6


def measure(url: str, calls: int, rounds: int) -> dict[str, Any]:
    import redis

    app, tasks = fresh_app(url)
    backend: Any = app.backend
    client = backend.store.client
    pool = client.connection_pool
    script = backend.store.scripts["enqueue"]
    keys = backend.store.shard_keys("bench", 0)

    def script_args(i: int) -> list[Any]:
        _, envelope = app.build(Call(tasks.noop.name, (i,), {}))
        return ["error", "1", 1, envelope.id, "", 0, envelope.due_ms, encode_record(envelope)]

    def raw(*command: Any) -> object:
        connection = pool.get_connection()
        try:
            connection.send_packed_command(connection.pack_command(*command), check_health=False)
            return connection.read_response()
        finally:
            pool.release(connection)

    def no_round_trip(i: int) -> object:
        real = backend.store.run_many
        backend.store.run_many = lambda name, batch: [[b"enqueued"] for _ in batch]
        try:
            return tasks.noop.delay(i)
        finally:
            backend.store.run_many = real

    steps: dict[str, Callable[[int], object]] = {
        "delay": lambda i: tasks.noop.delay(i),
        "delay_without_the_round_trip": no_round_trip,
        "enqueue_script_via_Script": lambda i: script(keys=keys, args=script_args(i)),
        "enqueue_script_via_evalsha": lambda i: client.evalsha(
            script.sha, len(keys), *keys, *script_args(i)
        ),
        "enqueue_script_via_raw_connection": lambda i: raw(
            "EVALSHA", script.sha, len(keys), *keys, *script_args(i)
        ),
        "ping_via_redis_py": lambda i: client.ping(),
        "ping_via_raw_connection": lambda i: raw("PING"),
    }
    figures: dict[str, list[float]] = {name: [] for name in steps}
    server = redis.Redis.from_url(url)
    server.config_resetstat()
    for _ in range(rounds):
        for name, step in steps.items():
            figures[name].append(round(_per_call_us(calls, step), 1))
            backend.queues.purge("bench")
    evalsha = server.info("commandstats").get("cmdstat_evalsha", {})
    app.close()
    return {
        "backend": "redis",
        "microseconds_per_call": {
            name: {"median": statistics.median(values), "runs": values}
            for name, values in figures.items()
        },
        "server_us_per_evalsha": evalsha.get("usec_per_call"),
        "delays_per_second": round(1e6 / statistics.median(figures["delay"])),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=8000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out")
    args = parser.parse_args()
    out = None if args.out is None else Path(args.out)

    def run(url: str) -> dict[str, Any]:
        return measure(url, args.calls, args.rounds)

    on_sqlite_and_redis(run, {"calls": args.calls, "rounds": args.rounds}, out, "redis")


if __name__ == "__main__":
    main()
