"""Oban for Python's side (its async API, driven from one event loop of this module's):
the tasks as ``@worker`` classes, ``enqueue``, ``enqueue_many``, a scheduled job; the
worker is ``oban start`` with one queue of ``CONCURRENCY``."""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from oban import Oban, worker
from oban.schema import install as install_schema
from psycopg_pool import AsyncConnectionPool

from bench.peers_pg.common import CONCURRENCY, QUEUE, URL, connection, delayed_body

_loop = asyncio.new_event_loop()
_pool: AsyncConnectionPool | None = None
_oban: Oban | None = None


def _run(coroutine: Any) -> Any:
    return _loop.run_until_complete(coroutine)


async def _client() -> Oban:
    global _pool, _oban
    if _oban is None:
        _pool = AsyncConnectionPool(URL, open=False, min_size=1, max_size=4)
        await _pool.open()
        _oban = Oban(pool=_pool)
    return _oban


_updates: AsyncConnectionPool | None = None


@worker(queue=QUEUE)
class Noop:
    async def process(self, job: Any) -> None:
        pass


@worker(queue=QUEUE)
class Update:
    async def process(self, job: Any) -> None:
        global _updates
        if _updates is None:
            _updates = AsyncConnectionPool(URL, min_size=1, max_size=CONCURRENCY, open=False)
            await _updates.open()
        async with _updates.connection() as conn:
            await conn.execute("UPDATE bench_counter SET n = n + 1 WHERE id = 1")


@worker(queue=QUEUE)
class Delayed:
    async def process(self, job: Any) -> None:
        delayed_body(job.args["target"])


def install() -> None:
    async def go() -> None:
        async with AsyncConnectionPool(URL, min_size=1, max_size=1) as pool:
            await install_schema(pool)

    _run(go())


def enqueue_one(kind: str = "update") -> None:
    async def go() -> None:
        await _client()
        await (Update if kind == "update" else Noop).enqueue()

    _run(go())


def enqueue_many(count: int, kind: str = "update") -> None:
    async def go() -> None:
        oban = await _client()
        task = Update if kind == "update" else Noop
        for start in range(0, count, 1000):
            await oban.enqueue_many([task.new() for _ in range(min(1000, count - start))])

    _run(go())


def enqueue_delayed(target: float) -> None:
    async def go() -> None:
        oban = await _client()
        at = datetime.fromtimestamp(target, tz=UTC)
        await oban.enqueue(Delayed.new({"target": target}, scheduled_at=at))

    _run(go())


def close() -> None:
    """Close the client's pool on its loop (before the interpreter closes the loop)."""

    async def go() -> None:
        if _pool is not None:
            await _pool.close()

    _run(go())


def completed() -> int:
    row = (
        connection().execute("SELECT count(*) FROM oban_jobs WHERE state = 'completed'").fetchone()
    )
    return 0 if row is None else int(row[0])  # type: ignore[call-overload]


def worker_command() -> list[str]:
    oban = str(Path(sys.executable).with_name("oban"))
    return [
        *(oban, "start", "--dsn", URL, "--queues", f"{QUEUE}:{CONCURRENCY}"),
        *("--log-level", "WARNING"),
    ]
