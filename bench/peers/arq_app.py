"""arq's side (its own environment: arq pins ``redis<6``): the defaults (``max_jobs=10``,
``poll_delay=0.5`` s); no bulk API, so a bulk enqueue is 100 ``enqueue_job`` at a time
under ``asyncio.gather``."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

from arq import create_pool
from arq.connections import RedisSettings

from bench.peers.common import DONE, LATENESS, QUEUE, URL

settings = RedisSettings.from_dsn(URL)


async def noop(ctx: dict[str, Any]) -> None:
    await ctx["redis"].incr(DONE)


async def delayed(ctx: dict[str, Any], target: float) -> None:
    await ctx["redis"].rpush(LATENESS, time.time() - target)


class WorkerSettings:
    functions = [noop, delayed]
    redis_settings = settings
    queue_name = QUEUE


_loop = asyncio.new_event_loop()
_pool: Any = None


def _redis() -> Any:
    global _pool
    if _pool is None:
        _pool = _loop.run_until_complete(create_pool(settings, default_queue_name=QUEUE))
    return _pool


def enqueue_one() -> None:
    _loop.run_until_complete(_redis().enqueue_job("noop"))


_loop_pool: Any = None  # made on the running loop by ``open_loop_pool`` (``asingle``)


async def open_loop_pool() -> None:
    global _loop_pool
    _loop_pool = await create_pool(settings, default_queue_name=QUEUE)


async def aenqueue_one() -> None:
    await _loop_pool.enqueue_job("noop")


def enqueue_many(count: int) -> None:
    pool = _redis()

    async def send() -> None:
        for start in range(0, count, 100):
            batch = min(100, count - start)
            await asyncio.gather(*(pool.enqueue_job("noop") for _ in range(batch)))

    _loop.run_until_complete(send())


def enqueue_delayed(target: float) -> None:
    from datetime import UTC, datetime

    when = datetime.fromtimestamp(target, tz=UTC)
    _loop.run_until_complete(_redis().enqueue_job("delayed", target, _defer_until=when))


def worker_command(delayed_jobs: bool) -> list[str]:
    return [str(Path(sys.executable).with_name("arq")), f"{__name__}.WorkerSettings"]
