"""PostgreSQL beside SQLite in one run, and PostgreSQL's table health under churn.

    python -m bench.postgres --out bench/results/postgres.json [--scale 1.0]
    python -m bench.postgres --churn 1000000 --out bench/results/postgres-churn.json

The first runs the engine's scenarios (bulk enqueue, end-to-end no-ops with the worker's
defaults, lateness of messages due over 10 s) on a scratch SQLite file and on a
PostgreSQL server started here (as the test harness does), and gives PostgreSQL's figure
over SQLite's for each. The second pushes ``--churn`` messages through one queue (bulk
enqueue of 1,000, claims of 100 and their acks, as workers do) and reads, every tenth of
the way, the claim's latency, the messages table's dead tuples and its size with its
indexes, and how often autovacuum ran.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from bench.common import emit, machine, summary_ms
from bench.engine import bulk_enqueue, end_to_end, fresh_app, lateness
from tests.support.postgres_servers import PostgresServer


def side_by_side(server: PostgresServer, scale: float) -> dict[str, Any]:
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for name, url in (
            ("sqlite", f"sqlite:///{scratch}/bench.db"),
            ("postgres", f"{server.url}?schema=bench"),
        ):
            results[name] = {
                "bulk_enqueue": bulk_enqueue(url, int(100_000 * scale), 5000),
                "end_to_end_defaults": end_to_end(url, int(50_000 * scale), 8, None, 100),
                "lateness": lateness(url, int(5_000 * scale), 10.0, 2.0),
            }
    ratios = {
        scenario: round(
            results["postgres"][scenario]["per_second"] / results["sqlite"][scenario]["per_second"],
            2,
        )
        for scenario in ("bulk_enqueue", "end_to_end_defaults")
    }
    return {"results": results, "postgres_over_sqlite": ratios}


def _health(admin: psycopg.Connection[Any], schema: str) -> dict[str, Any]:
    row = admin.execute(
        "SELECT n_live_tup, n_dead_tup, autovacuum_count, autoanalyze_count, "
        "pg_relation_size(relid), pg_total_relation_size(relid) "
        "FROM pg_stat_user_tables WHERE schemaname = %s AND relname = 'messages'",
        (schema,),
    ).fetchone()
    assert row is not None
    return {
        "live_tuples": row[0],
        "dead_tuples": row[1],
        "autovacuums": row[2],
        "autoanalyzes": row[3],
        "table_kib": row[4] // 1024,
        "with_indexes_kib": row[5] // 1024,
    }


def churn(server: PostgresServer, total: int, waiting: int = 10_000) -> dict[str, Any]:
    """``total`` messages through one queue that always holds about ``waiting``."""
    schema = "churn"
    app, tasks = fresh_app(f"{server.url}?schema={schema}")
    backend = app.backend
    app.enqueue_many((tasks.noop.call(i) for i in range(waiting)), batch_size=1000)
    body = app.build(tasks.noop.call(0))[1]
    points = []
    passed, step = 0, max(total // 10, 1000)
    started = time.perf_counter()
    with psycopg.connect(server.url, autocommit=True) as admin:
        points.append({"passed": 0, **_health(admin, schema)})
        while passed < total:
            timings = []
            segment_end = min(total, passed + step)
            while passed < segment_end:
                before = time.perf_counter()
                claims = backend.leases.claim("bench", 100).claims
                timings.append(time.perf_counter() - before)
                backend.leases.ack([(c, None) for c in claims])
                fresh = [app.build(tasks.noop.call(0))[1] for _ in claims]
                backend.messages.enqueue(fresh or [body])
                passed += len(claims)
            admin.execute("SELECT pg_stat_force_next_flush()")
            points.append(
                {
                    "passed": passed,
                    "seconds": round(time.perf_counter() - started, 1),
                    "claim_100": summary_ms(timings),
                    **_health(admin, schema),
                }
            )
    app.close()
    return {"waiting": waiting, "total": total, "points": points}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--churn", type=int, default=0, help="messages through one queue")
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--setting", action="append", default=[], help="a server setting, name=value"
    )
    args = parser.parse_args()
    logging.getLogger("tickwork").setLevel(logging.WARNING)
    server = PostgresServer(*args.setting)
    try:
        measured = churn(server, args.churn) if args.churn else side_by_side(server, args.scale)
    finally:
        server.stop()
    result = {"machine": machine(), "scale": args.scale, "settings": args.setting, **measured}
    emit(result)
    if args.out:
        args.out.write_text(__import__("json").dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
