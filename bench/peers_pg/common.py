"""What every system's adapter shares: the database URL, the tables the tasks write, and
the task bodies' work (the UPDATE task adds one to a counter row; the delayed task
records how late it started). Imports only psycopg, which every environment has."""

from __future__ import annotations

import os
import threading
import time

import psycopg

URL = os.environ.get("BENCH_PG_URL", "postgresql://localhost/bench")
QUEUE = "peers"
#: how many jobs each system runs at once (Oban needs a number; the others are told it)
CONCURRENCY = 10

_local = threading.local()


def connection() -> psycopg.Connection[tuple[object, ...]]:
    """This thread's own autocommit connection."""
    conn: psycopg.Connection[tuple[object, ...]] | None = getattr(_local, "conn", None)
    if conn is None:
        conn = _local.conn = psycopg.connect(URL, autocommit=True)
    return conn


def prepare() -> None:
    """The tables the tasks write (in a fresh database)."""
    with psycopg.connect(URL, autocommit=True) as conn:
        conn.execute("CREATE TABLE bench_counter (id int PRIMARY KEY, n bigint NOT NULL)")
        conn.execute("INSERT INTO bench_counter VALUES (1, 0)")
        conn.execute("CREATE TABLE bench_lateness (late double precision NOT NULL)")


def update_body() -> None:
    """The UPDATE task's work: one UPDATE in its own transaction."""
    connection().execute("UPDATE bench_counter SET n = n + 1 WHERE id = 1")


async def update_body_async(conn: psycopg.AsyncConnection[tuple[object, ...]]) -> None:
    await conn.execute("UPDATE bench_counter SET n = n + 1 WHERE id = 1")


def delayed_body(target: float) -> None:
    connection().execute("INSERT INTO bench_lateness VALUES (%s)", (time.time() - target,))


def updates_done() -> int:
    row = connection().execute("SELECT n FROM bench_counter WHERE id = 1").fetchone()
    return 0 if row is None else int(row[0])  # type: ignore[call-overload]


def lateness_s() -> list[float]:
    return [float(r[0]) for r in connection().execute("SELECT late FROM bench_lateness")]  # type: ignore[arg-type]
