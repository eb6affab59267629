"""Where the time and the memory go, part by part, for the hot-path targets that a whole
measurement alone cannot explain: bulk enqueue, Redis memory per pending message and the
rows ``enqueue_dataframe`` writes (its per-row work, without Spark around it).

    python -m bench.hot_path_parts [--messages 100000] [--out FILE.json]

Starts its own Redis (as the tests do) and uses a scratch SQLite file. Every figure is
microseconds (or bytes) per message, each part timed alone in this process; the server's
own time is read from ``INFO commandstats``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from bench.common import machine
from bench.engine import fresh_app


def _per(count: int, action: Callable[[], object]) -> float:
    """Microseconds per item of ``action`` (which handles ``count`` items), best of 3."""
    best = min(timeit.repeat(action, number=1, repeat=3))
    return round(best / count * 1e6, 2)


def _server_us(client: redis.Redis, action: Callable[[], object], count: int) -> float:
    """Microseconds of script time on the server per item while ``action`` runs."""
    client.config_resetstat()
    action()
    stats = client.info("commandstats")
    usec = sum(v["usec"] for k, v in stats.items() if k in ("cmdstat_evalsha", "cmdstat_eval"))
    return round(usec / count, 2)


def bulk(sqlite_url: str, redis_url: str, count: int) -> dict[str, Any]:
    """One message of ``enqueue_many`` (batches of 5,000), in parts, on SQLite and Redis."""
    return {"sqlite": _bulk_parts(sqlite_url, count), "redis": _bulk_parts(redis_url, count)}


def _bulk_parts(url: str, count: int) -> dict[str, float]:
    """Building a message (and the parts of that: its arguments checked, its id, its
    body's bytes), writing it, the two together, and the server's script time (Redis)."""
    from tickwork.scheduler.clock import to_datetime
    from tickwork.scheduler.ids import new_chain_id
    from tickwork.scheduler.producing.plain import encoded_time

    app, tasks = fresh_app(url)
    now_ms = app.backend_clock.now_ms()
    now = to_datetime(now_ms)
    calls = [tasks.noop.call(i) for i in range(count)]
    builder = app.builder
    task = builder.registry.lookup(calls[0].task)
    args, kwargs = task.arguments.to_json(calls[0].args, calls[0].kwargs)
    envelopes = [builder.build(c, now_ms, now)[1] for c in calls]

    def body_all() -> None:
        for _ in calls:
            builder._plain.body(
                "1a21c6a3ec37bb61e1afcd493d1",
                "bench",
                task.name,
                args,
                kwargs,
                None,
                0,
                encoded_time(now, now_ms),
                None,
                1,
                300.0,
                None,
            )

    def write() -> None:
        app.backend.queues.purge("bench")
        for start in range(0, len(envelopes), 5000):
            app.backend.messages.enqueue(envelopes[start : start + 5000])

    def whole() -> None:
        app.backend.queues.purge("bench")
        app.enqueue_many(calls, batch_size=5000)

    parts = {
        "build": _per(count, lambda: [builder.build(c, now_ms, now) for c in calls]),
        "build.arguments": _per(
            count, lambda: [task.arguments.to_json(c.args, c.kwargs) for c in calls]
        ),
        "build.id": _per(count, lambda: [new_chain_id(now_ms) for _ in calls]),
        "build.body": _per(count, body_all),
        "write": _per(count, write),
        "enqueue_many": _per(count, whole),
    }
    if url.startswith("redis"):
        client = redis.Redis.from_url(url.split("?")[0])
        parts["write.server_script"] = _server_us(client, write, count)
        client.close()
    app.backend.queues.purge("bench")
    app.close()
    return parts


def memory(url: str, count: int) -> dict[str, Any]:
    """Bytes per pending message with a 100-byte payload, by structure: the record's hash
    entry, the ready set's entry, and what the same records and ids take in small
    (listpack-encoded) hashes and sorted sets of 128 entries each, as a layout in buckets
    would store them (with ``hash-max-listpack-value`` raised to 512 for it)."""
    app, tasks = fresh_app(url)
    app.backend.queues.purge("memory")
    client = redis.Redis.from_url(url.split("?")[0])
    before = int(client.info("memory")["used_memory"])
    app.enqueue_many((tasks.payload.call("x" * 100) for _ in range(count)), batch_size=5000)
    after = int(client.info("memory")["used_memory"])
    keys = {k.decode().rsplit(":", 1)[-1]: k for k in client.keys("{tw:memory:*}:*")}
    usage = {name: client.memory_usage(key, samples=0) or 0 for name, key in keys.items()}
    message_id, record = next(iter(client.hscan_iter(keys["m"], count=10)))
    result: dict[str, Any] = {
        "messages": count,
        "bytes_per_message": round((after - before) / count, 1),
        "id_bytes": len(message_id),
        "record_bytes": len(record),
        "records_hash_per_message": round(usage["m"] / count, 1),
        "records_hash_encoding": client.object("encoding", keys["m"]).decode(),
        "ready_set_per_message": round(usage["r"] / count, 1),
        "ready_set_encoding": client.object("encoding", keys["r"]).decode(),
    }
    result["hash_entry_overhead"] = round(
        result["records_hash_per_message"] - len(record) - len(message_id), 1
    )
    ids_and_records = list(client.hscan_iter(keys["m"], count=1000))
    app.backend.queues.purge("memory")
    app.close()
    saved = client.config_get("hash-max-listpack-value")
    client.config_set("hash-max-listpack-value", 512)
    try:
        before = int(client.info("memory")["used_memory"])
        pipe = client.pipeline(transaction=False)
        for start in range(0, len(ids_and_records), 128):
            bucket = dict(ids_and_records[start : start + 128])
            pipe.hset(f"bucket:m:{start}", mapping=bucket)
            pipe.zadd(f"bucket:r:{start}", dict.fromkeys(bucket, 4500997353914051.0))
            if len(pipe) >= 2000:
                pipe.execute()
        pipe.execute()
        after = int(client.info("memory")["used_memory"])
        result["bucketed_listpack_per_message"] = round((after - before) / count, 1)
        result["bucketed_encoding"] = client.object("encoding", "bucket:m:0").decode()
    finally:
        for key in client.scan_iter("bucket:*", count=1000):
            client.delete(key)
        client.config_set("hash-max-listpack-value", saved["hash-max-listpack-value"])
        client.close()
    return result


def spark_rows(redis_url: str, count: int) -> dict[str, Any]:
    """One row of ``enqueue_dataframe``'s per-partition core (``write_rows``), without
    Spark: the bench's rows (a long, a double and a string key) from an Arrow batch to
    Python, to a call, to a message, and written to Redis in writes of 1,000 keyed rows."""
    import pyarrow as pa

    from tickwork.scheduler import App
    from tickwork.scheduler.clock import to_datetime
    from tickwork.scheduler.spark.rows import build_mapping, resolve_task, row_call, write_rows

    table = pa.RecordBatch.from_pydict(
        {
            "customer_id": list(range(count)),
            "amount_due": [i * 1.5 for i in range(count)],
            "invoice_key": [f"inv-{i}" for i in range(count)],
        }
    )
    mapping = build_mapping(
        redis_url,
        "tests.support.spark_tasks.send_invoice",
        args=["customer_id"],
        kwargs={"amount": "amount_due"},
        key="invoice_key",
        queue="billing",
    )
    app = App(redis_url)
    resolve_task(app, mapping)
    rows = table.to_pylist()
    calls = [row_call(mapping, row) for row in rows]
    now = to_datetime(mapping.now_ms)
    client = redis.Redis.from_url(redis_url.split("?")[0])

    def write_all() -> None:
        app.backend.queues.purge("billing")
        write_rows(mapping, iter(table.to_pylist()))

    parts = {
        "arrow_to_rows": _per(count, table.to_pylist),
        "row_to_call": _per(count, lambda: [row_call(mapping, row) for row in rows]),
        "build": _per(count, lambda: [app.build(c, mapping.now_ms, now) for c in calls]),
        "write_rows": _per(count, write_all),
        "write_rows.server_script": _server_us(client, write_all, count),
    }
    app.backend.queues.purge("billing")
    app.close()
    client.close()
    return parts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    from tests.support.servers import RedisServer

    server = RedisServer()
    started = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory() as scratch:
            report = {
                "machine": machine(),
                "messages": args.messages,
                "bulk_us": bulk(f"sqlite:///{scratch}/parts.db", server.url, args.messages),
                "memory": memory(server.url, args.messages),
                "spark_row_us": spark_rows(server.url, args.messages),
            }
    finally:
        server.stop()
    report["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
