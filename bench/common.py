"""Shared benchmark helpers: timing, percentiles, JSON output."""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def machine() -> dict[str, Any]:
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def summary_ms(values_s: list[float]) -> dict[str, float]:
    ms = [v * 1000 for v in values_s]
    return {
        "p50_ms": round(percentile(ms, 50), 3),
        "p90_ms": round(percentile(ms, 90), 3),
        "p99_ms": round(percentile(ms, 99), 3),
        "max_ms": round(max(ms), 3),
        "mean_ms": round(statistics.fmean(ms), 3),
        "min_ms": round(min(ms), 3),
    }


def emit(result: dict[str, Any]) -> None:
    print(json.dumps(result, indent=2))


def report(backend: str, results: dict[str, Any], out: Path | None) -> None:
    """Print one run's results with the machine's facts, and write them to ``out``."""
    result = {"machine": machine(), "backend": backend, "results": results}
    emit(result)
    if out:
        out.write_text(json.dumps(result, indent=2) + "\n")


def on_sqlite_and_redis(
    measure: Callable[[str], Any],
    extra: dict[str, Any],
    out: Path | None,
    only: str | None = None,
) -> None:
    """Run ``measure(url)`` on a scratch SQLite file and on a Redis server started here
    (as the test harness does; ``only`` keeps one of them), then print the result and
    write it to ``out``."""
    from tests.support.servers import RedisServer

    server = RedisServer()
    try:
        with tempfile.TemporaryDirectory() as scratch:
            urls = [f"sqlite:///{scratch}/bench.db", server.url]
            urls = [u for u in urls if only is None or u.startswith(only)]
            result = {"machine": machine(), **extra, "results": [measure(u) for u in urls]}
    finally:
        server.stop()
    emit(result)
    if out:
        out.write_text(json.dumps(result, indent=2) + "\n")


def on_postgres(measure: Callable[[str], Any], extra: dict[str, Any], out: Path | None) -> None:
    """``measure(url)`` on a PostgreSQL server started here (as the tests do)."""
    from tests.support.postgres_servers import PostgresServer

    server = PostgresServer()
    try:
        url = f"{server.url}?schema=bench{uuid.uuid4().hex[:6]}"
        result = {"machine": machine(), **extra, "results": [measure(url)]}
    finally:
        server.stop()
    emit(result)
    if out:
        out.write_text(json.dumps(result, indent=2) + "\n")


def on_cassandra(measure: Callable[[str], Any], extra: dict[str, Any], out: Path | None) -> None:
    """``measure(url)`` on a Cassandra node started here (as the tests do)."""
    from tests.support.cassandra_servers import CassandraNode

    node = CassandraNode()
    try:
        url = f"cassandra://{node.hosts}/bench{uuid.uuid4().hex[:6]}?consistency=ONE"
        result = {"machine": machine(), **extra, "results": [measure(url)]}
    finally:
        node.stop()
    emit(result)
    if out:
        out.write_text(json.dumps(result, indent=2) + "\n")


def on_backends(
    measure: Callable[[str], Any], extra: dict[str, Any], out: Path | None, only: str | None
) -> None:
    """What ``--only`` asks for: Cassandra alone (its node is slow to start), PostgreSQL
    alone, or SQLite and Redis (one of them with ``only``)."""
    if only == "cassandra":
        on_cassandra(measure, extra, out)
    elif only == "postgres":
        on_postgres(measure, extra, out)
    else:
        on_sqlite_and_redis(measure, extra, out, only)


def alternate(
    rounds: int,
    base: str,
    measure_base: Callable[[], float],
    other: str,
    measure_other: Callable[[], float],
) -> dict[str, Any]:
    """Run ``measure_base`` and ``measure_other`` in turn ``rounds`` times (a figure each,
    higher is better) and quote ``other / base`` pair by pair: this machine's speed drifts
    more between runs than most features cost."""
    runs = []
    for _ in range(rounds):
        first = measure_base()
        runs.append({base: first, other: measure_other()})
    ratios = [r[other] / r[base] for r in runs]
    return {
        "pairs": runs,
        "median_ratio": round(statistics.median(ratios), 3),
        "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)],
        "median_cost_percent": round(100 * (1 - statistics.median(ratios)), 1),
    }
