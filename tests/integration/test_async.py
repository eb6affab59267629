"""``async def`` tasks: run on the worker's event loop, many at a time, next to sync tasks,
with timeouts, retries, the poison queue and shutdown behaving as for sync tasks; and the
async producer API."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from tests.support.backends import backend_url
from tests.support.helpers import wait_for
from tickwork.scheduler import App, InvalidMessage, RetryPolicy
from tickwork.scheduler.runs.context import RunContext, RunInfo
from tickwork.triggers import Misfire, Repeating
from tickwork.workers import Worker, WorkerConfig


def burst(app: App, **config: object) -> Worker:
    """Run a worker until nothing is due or running; return it."""
    config.setdefault("poll_interval_s", 0.05)
    config.setdefault("lookahead_ms", 0)
    worker = Worker(app, WorkerConfig(burst=True, **config))  # type: ignore[arg-type]
    worker.run()
    return worker


def test_an_async_task_runs_on_the_loop_and_is_acked(app: App) -> None:
    seen: list[tuple[int, str]] = []

    @app.task
    async def fetch(n: int) -> None:
        await asyncio.sleep(0.01)
        seen.append((n, threading.current_thread().name))

    for n in range(5):
        fetch.delay(n)
    worker = burst(app)
    assert sorted(n for n, _ in seen) == [0, 1, 2, 3, 4], "every coroutine was awaited"
    assert {name for _, name in seen} == {"tickwork-event-loop"}
    assert worker.stats.acked == 5
    stats = app.backend.queues.stats("default")[0]
    assert stats.ready + stats.scheduled + stats.in_flight == 0


def test_async_failures_retry_then_poison_like_sync_ones(app: App) -> None:
    attempts: list[int] = []

    @app.task(retry=RetryPolicy(retries=1, base_s=0.05, jitter=False))
    async def flaky() -> None:
        attempts.append(1)
        raise ConnectionError("upstream down")

    flaky.delay()
    worker = Worker(app, WorkerConfig(poll_interval_s=0.05))
    worker.start()
    try:
        wait_for(lambda: worker.stats.poisoned == 1)
    finally:
        worker.stop()
        assert worker.join(30)
    assert len(attempts) == 2 and worker.stats.retried == 1
    (record,) = app.backend.poison.list()
    assert record.failure.error_type == "ConnectionError"
    assert "upstream down" in record.failure.message


def test_a_recurring_async_chain_reschedules(app: App) -> None:
    runs: list[int] = []

    @app.task
    async def tick() -> None:
        runs.append(1)

    # catch_up: every run happens even if a slow start makes the first ones late
    grid = Repeating(interval=timedelta(milliseconds=200), repeat_count=3, misfire=Misfire.CATCH_UP)
    tick.schedule(trigger=grid, key="t")
    worker = Worker(app, WorkerConfig(poll_interval_s=0.05))
    worker.start()
    try:
        wait_for(lambda: len(runs) == 3)
        wait_for(lambda: app.get(key="t") is None)
    finally:
        worker.stop()
        assert worker.join(30)


def test_many_async_handlers_run_at_once(sqlite_app: App) -> None:
    """Forty handlers that each wait until all forty have started: they only finish if
    the loop runs them together (a thread pool of 8 would time out)."""
    started: list[int] = []
    peak: list[int] = [0]
    running = [0]

    @sqlite_app.task(timeout=20)
    async def gather(n: int) -> None:
        started.append(n)
        running[0] += 1
        peak[0] = max(peak[0], running[0])
        while len(started) < 40:
            await asyncio.sleep(0.005)
        running[0] -= 1

    for n in range(40):
        gather.delay(n)
    worker = burst(sqlite_app, concurrency=2, async_concurrency=50)
    assert worker.stats.acked == 40 and peak[0] == 40


def test_async_concurrency_is_a_bound(sqlite_app: App) -> None:
    running, peak = [0], [0]

    @sqlite_app.task
    async def step() -> None:
        running[0] += 1
        peak[0] = max(peak[0], running[0])
        await asyncio.sleep(0.02)
        running[0] -= 1

    for _ in range(30):
        step.delay()
    worker = burst(sqlite_app, async_concurrency=4)
    assert worker.stats.acked == 30 and 1 < peak[0] <= 4


def test_the_timeout_cancels_the_coroutine_and_fails_the_attempt(sqlite_app: App) -> None:
    cancelled = threading.Event()

    @sqlite_app.task(timeout=0.2)
    async def slow() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    slow.delay()
    worker = burst(sqlite_app)
    assert cancelled.is_set() and worker.stats.poisoned == 1
    (record,) = sqlite_app.backend.poison.list()
    assert record.failure.error_type == "TimeoutError"
    assert "timeout of 0.2 s" in record.failure.message


def test_sync_and_async_tasks_share_a_worker(sqlite_app: App) -> None:
    threads: dict[str, str] = {}

    @sqlite_app.task
    def blocking(n: int) -> None:
        threads[f"sync{n}"] = threading.current_thread().name

    @sqlite_app.task
    async def nonblocking(n: int) -> None:
        threads[f"async{n}"] = threading.current_thread().name

    for n in range(10):
        blocking.delay(n)
        nonblocking.delay(n)
    worker = burst(sqlite_app)
    assert worker.stats.acked == 20 and len(threads) == 20
    assert all(threads[f"async{n}"] == "tickwork-event-loop" for n in range(10))
    assert all(threads[f"sync{n}"].startswith("tickwork-pool-") for n in range(10))


def test_a_task_class_may_define_async_run(sqlite_app: App) -> None:
    done: list[str] = []

    class Notify(sqlite_app.Task):  # type: ignore[name-defined,misc]
        async def run(self, who: str) -> None:
            await asyncio.sleep(0)
            done.append(who)

    Notify.delay("ada")
    assert Notify.task.is_async
    burst(sqlite_app)
    assert done == ["ada"]


def test_a_forced_stop_cancels_running_coroutines_and_acks_nothing(sqlite_app: App) -> None:
    started, cancelled = threading.Event(), threading.Event()

    @sqlite_app.task(timeout=60)
    async def long() -> None:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    long.delay()
    worker = Worker(sqlite_app, WorkerConfig(poll_interval_s=0.05, grace_s=30))
    worker.start()
    assert started.wait(20)
    worker.stop()
    worker.stop(force=True)
    assert worker.join(20)
    assert cancelled.is_set()
    assert worker.stats.acked == 0
    assert sqlite_app.backend.queues.stats("default")[0].in_flight == 1, "left to its lease"


def test_a_graceful_stop_waits_for_running_coroutines(sqlite_app: App) -> None:
    started, finished = threading.Event(), threading.Event()

    @sqlite_app.task
    async def short() -> None:
        started.set()
        await asyncio.sleep(0.3)
        finished.set()

    short.delay()
    worker = Worker(sqlite_app, WorkerConfig(poll_interval_s=0.05, grace_s=30))
    worker.start()
    assert started.wait(20)
    worker.stop()
    assert worker.join(20)
    assert finished.is_set() and worker.stats.acked == 1 and not worker.forced


def test_an_async_task_on_the_sync_path_still_runs() -> None:
    """Defence in depth: if an async handler ever reaches a thread or process, it runs to
    completion on a fresh loop rather than being acked unawaited."""
    from tickwork.workers.pools.execution import Verdict, run_handler

    app = App("sqlite://:memory:")
    ran: list[int] = []

    @app.task
    async def job(n: int) -> None:
        await asyncio.sleep(0)
        ran.append(n)

    run = RunContext(RunInfo("m", job.name, "q", None, 1))
    result = run_handler(app, job.name, [7], {}, run)
    assert result.verdict is Verdict.ACK and ran == [7]


@pytest.mark.parametrize("kind", ["generator", "async generator"])
def test_a_generator_cannot_be_a_task(kind: str) -> None:
    app = App("sqlite://:memory:")

    def gen() -> Iterator[int]:
        yield 1

    async def agen():  # type: ignore[no-untyped-def]
        yield 1

    with pytest.raises(InvalidMessage, match="generator function"):
        app.task(gen if kind == "generator" else agen)


async def _produce(app: App, ticks: list[int]) -> None:
    @app.task
    def noop(n: int) -> None: ...

    async def ticker() -> None:
        while True:
            ticks.append(1)
            await asyncio.sleep(0.001)

    beat = asyncio.create_task(ticker())
    message_id = await noop.adelay(1)
    assert (await app.aget(id=message_id)) is not None
    await noop.aschedule(args=(2,), key="k", delay=timedelta(hours=1))
    found = await app.aget(key="k")
    assert found is not None and found.message.args == [2]
    assert await app.acancel(key="k")
    assert not await app.acancel(key="k")
    before = len(ticks)
    report = await app.aenqueue_many((noop.call(n) for n in range(20_000)), batch_size=500)
    assert report.enqueued == 20_000
    assert len(ticks) > before, "the loop kept running while the batch was written"
    with pytest.raises(InvalidMessage):
        await noop.adelay("not a number")  # type: ignore[arg-type]
    beat.cancel()


def test_the_async_producer_api_does_not_block_the_loop(sqlite_app: App) -> None:
    ticks: list[int] = []
    asyncio.run(_produce(sqlite_app, ticks))
    assert sqlite_app.backend.queues.stats("default")[0].ready == 20_001


def test_the_async_producer_api_on_one_redis_node(tmp_path: Path) -> None:
    """The same on Redis, whose writes go from the loop itself once a queue is known."""
    app = App(backend_url("redis", tmp_path))
    ticks: list[int] = []
    asyncio.run(_produce(app, ticks))
    assert app.backend.queues.stats("default")[0].ready == 20_001
    worker = burst(app, queues=("default",))
    assert worker.stats.acked == 20_001
    app.close()
