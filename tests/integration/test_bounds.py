"""Bounded queues end to end, on every backend: producers wait for room and proceed as a
worker drains, give up with one clear error that lists what they wrote, never write more
than the bound (also from several processes at once), and an async producer waits
without blocking its event loop."""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
import time
from datetime import timedelta

import pytest

from tests.support import bounded_tasks
from tests.support.helpers import running, wait_for
from tickwork.scheduler import App, ConfigurationError, QueueFull
from tickwork.triggers import Repeating


def _pending(app: App, queue: str) -> int:
    (stats,) = app.backend.queues.stats(queue)
    return stats.pending


def test_a_full_queue_times_out_having_written_only_what_fit(app: App) -> None:
    @app.task(queue="billing")
    def charge(n: int) -> None: ...

    app.queues.configure("billing", max_pending=5)
    assert app.queues.bounds() == {"billing": 5}
    with pytest.raises(QueueFull) as caught:
        app.enqueue_many((charge.call(n) for n in range(8)), batch_size=3, block_timeout=0.3)
    err = caught.value
    assert err.waited_s >= 0.3, "it waited for room (its whole timeout) before giving up"
    assert err.queue == "billing" and err.max_pending == 5 and err.written == 5
    assert err.refused == 1, "the batch that stalled had one message left"
    assert "queue 'billing' is full (max_pending 5)" in str(err)
    assert _pending(app, "billing") == 5, "nothing beyond what fit was written"
    assert all(app.get(id=message_id) is not None for message_id in err.written_ids)
    with pytest.raises(QueueFull):
        charge.schedule(args=(9,), block=False)
    assert _pending(app, "billing") == 5


def test_waiting_producers_proceed_as_a_worker_drains(app: App) -> None:
    runs: list[int] = []
    lock = threading.Lock()

    @app.task(queue="billing")
    def charge(n: int) -> None:
        time.sleep(0.01)
        with lock:
            runs.append(n)

    app.queues.configure("billing", max_pending=5)
    with running(app, queues=("billing",)) as worker:
        report = app.enqueue_many((charge.call(n) for n in range(30)), batch_size=10)
        assert report.enqueued == 30 and report.waited_s > 0
        for n in range(30, 40):
            charge.delay(n)
        wait_for(lambda: worker.stats.acked == 40, 60)
    assert sorted(runs) == list(range(40)), "every message ran exactly once"


def test_a_recurring_chain_is_never_blocked_by_the_bound(app: App) -> None:
    ticks: list[int] = []

    @app.task(queue="billing")
    def tick() -> None:
        ticks.append(1)

    @app.task(queue="billing")
    def charge(n: int) -> None: ...

    app.queues.configure("billing", max_pending=2)
    tick.schedule(trigger=Repeating(interval=timedelta(milliseconds=200)), key="ticker")
    charge.schedule(args=(1,), delay=timedelta(hours=1))
    with pytest.raises(QueueFull):
        charge.schedule(args=(2,), block=False)
    with running(app, queues=("billing",)):
        wait_for(lambda: len(ticks) >= 3, 30)
    assert app.get(key="ticker", queue="billing") is not None, "the chain goes on while full"


def test_several_producer_processes_never_pass_the_bound(app: App) -> None:
    bound, producers, each = 20, 3, 40
    app.queues.configure("bounded", max_pending=bound)
    context = multiprocessing.get_context("spawn")
    with context.Pool(producers) as pool:
        written = pool.starmap(
            bounded_tasks.produce,
            [(app.settings.backend, i * each, each) for i in range(producers)],
        )
    # one message per call: on Cassandra (approximate) the bound may be passed by what
    # the other producers write at the same moment, one message each
    margin = producers - 1 if app.settings.backend.startswith("cassandra") else 0
    assert bound <= sum(written) <= bound + margin
    assert _pending(app, "bounded") == sum(written)


def test_an_async_producer_waits_without_blocking_its_loop(app: App) -> None:
    @app.task(queue="billing")
    def charge(n: int) -> None: ...

    app.queues.configure("billing", max_pending=1)
    charge.delay(0)

    async def main() -> bool:
        waiting = asyncio.ensure_future(charge.aschedule(args=(1,), block_timeout=30))
        await asyncio.sleep(0.3)
        # this coroutine runs again while the producer still waits: had the wait blocked
        # the loop, it would resume only after the producer gave up (QueueFull at 30 s)
        loop_ran_while_waiting = not waiting.done()
        with running(app, queues=("billing",)) as worker:
            await waiting
            wait_for(lambda: worker.stats.acked == 2, 30)
        return loop_ran_while_waiting

    assert asyncio.run(main()), "the event loop ran while the producer waited for room"


def test_a_bound_must_be_a_positive_whole_number(sqlite_app: App) -> None:
    for bad in (0, -3, True):
        with pytest.raises(ConfigurationError):
            sqlite_app.queues.configure("billing", max_pending=bad)
