"""What both peer benchmarks (on Redis, ``bench.peers``; on PostgreSQL,
``bench.peers_pg``) measure alike, with the standard library only, so that every
system's environment can import it: a worker process started and stopped, and the two
enqueue rates."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def start_worker(command: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    """``command`` from the project's root in a session of its own, output dropped."""
    return subprocess.Popen(
        command,
        cwd=ROOT,
        env={**os.environ, **env, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def stop_worker(worker: subprocess.Popen[bytes], grace_s: float = 20) -> None:
    """SIGTERM to the worker's session, then SIGKILL after ``grace_s``."""
    try:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(10)
    except ProcessLookupError:
        pass


def single(adapter: Any, count: int) -> dict[str, Any]:
    """``count`` enqueues one call at a time, after 10 to warm up: enqueues per second."""
    for _ in range(10):
        adapter.enqueue_one()
    started = time.perf_counter()
    for _ in range(count):
        adapter.enqueue_one()
    return {"per_second": round(count / (time.perf_counter() - started))}


def asingle(adapter: Any, count: int) -> dict[str, Any]:
    """``count`` awaited enqueues one at a time in one coroutine on one event loop, after
    10 to warm up (systems with an asyncio producer: tickwork's ``adelay``, arq's
    ``enqueue_job``): enqueues per second."""
    if not hasattr(adapter, "aenqueue_one"):
        raise SystemExit("no asyncio producer")

    async def calls() -> float:
        opening = getattr(adapter, "open_loop_pool", None)
        if opening is not None:
            await opening()
        for _ in range(10):
            await adapter.aenqueue_one()
        started = time.perf_counter()
        for _ in range(count):
            await adapter.aenqueue_one()
        return time.perf_counter() - started

    return {"per_second": round(count / asyncio.run(calls()))}


def bulk(adapter: Any, count: int) -> dict[str, Any]:
    """``count`` enqueues by the system's bulk API."""
    adapter.enqueue_many(10)
    started = time.perf_counter()
    adapter.enqueue_many(count)
    return {"per_second": round(count / (time.perf_counter() - started))}
