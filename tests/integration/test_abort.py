"""Aborting runs: a running handler stops in each pool, a pending message is cancelled,
the run is recorded as aborted with no retry, and the caller chooses whether a chain goes
on."""

from __future__ import annotations

import asyncio
import importlib
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest

from tests.support.backends import backend_url
from tests.support.helpers import running, wait_for
from tickwork.scheduler import Aborted, AbortResult, App, current_run
from tickwork.scheduler.backends import State
from tickwork.triggers import Repeating
from tickwork.workers import Worker, WorkerConfig


def test_a_sync_handler_sees_the_abort_and_is_not_retried(app: App) -> None:
    started, stopped = threading.Event(), threading.Event()
    runs: list[int] = []

    @app.task(retries=3)
    def crunch() -> None:
        run = current_run()
        runs.append(run.attempt)
        started.set()
        while not run.wait_aborted(0.02):
            pass
        stopped.set()
        run.raise_if_aborted()

    message_id = crunch.delay()
    with running(app) as worker:
        assert started.wait(20)
        assert app.abort(id=message_id) is AbortResult.REQUESTED
        assert stopped.wait(20), "the handler never saw the abort"
        wait_for(lambda: worker.stats.aborted == 1)
    assert worker.stats.retried == 0 and runs == [1], "an aborted run is never retried"
    (record,) = app.backend.poison.list()
    assert record.envelope.id == message_id and record.failure.reason == "aborted"
    assert app.get(id=message_id) is None
    assert app.backend.aborts.pending() == [], "the settled run's request is dropped"
    assert app.backend.queues.stats("default")[0].counters.get("aborted") == 1


def test_a_pending_message_is_cancelled_and_never_runs(sqlite_app: App) -> None:
    runs: list[int] = []

    @sqlite_app.task
    def later(n: int) -> None:
        runs.append(n)

    message_id = later.schedule((1,), delay=timedelta(seconds=0.3))
    assert sqlite_app.abort(id=message_id) is AbortResult.CANCELLED
    assert sqlite_app.abort(id=message_id) is AbortResult.NOT_FOUND
    assert sqlite_app.abort(key="nothing") is AbortResult.NOT_FOUND
    later.schedule((2,), delay=timedelta(seconds=0.6))  # a sentinel, due after it
    with running(sqlite_app):
        wait_for(lambda: runs == [2])
    assert runs == [2]


@pytest.mark.parametrize("continue_chain", [True, False])
def test_the_caller_chooses_whether_a_chain_goes_on(app: App, continue_chain: bool) -> None:
    started = threading.Event()

    @app.task
    def tick() -> None:
        started.set()
        current_run().wait_aborted(30)
        current_run().raise_if_aborted()

    tick.schedule(trigger=Repeating(interval=timedelta(hours=1)), key="hourly")
    with running(app) as worker:
        assert started.wait(20)
        result = app.abort(key="hourly", continue_chain=continue_chain)
        assert result is AbortResult.REQUESTED
        wait_for(lambda: worker.stats.aborted == 1)
    nxt = app.get(key="hourly")
    if continue_chain:
        assert nxt is not None and nxt.state is State.SCHEDULED
        assert nxt.message.id.endswith(".1"), "the next occurrence of the same chain"
    else:
        assert nxt is None, "the chain ends with the aborted run"


def test_a_handler_that_finishes_anyway_is_acked(sqlite_app: App) -> None:
    """The abort came too late for a handler that never looks: its work is done, so
    the run is acked, and the request is dropped."""
    started, release = threading.Event(), threading.Event()

    @sqlite_app.task
    def deaf() -> None:
        started.set()
        release.wait(20)

    deaf.delay()
    with running(sqlite_app) as worker:
        assert started.wait(20)
        message_id = worker._context.holdings.all()[0].claim.id
        assert sqlite_app.abort(id=message_id) is AbortResult.REQUESTED
        wait_for(lambda: worker._context.holdings.all()[0].abort is not None)
        release.set()
        wait_for(lambda: worker.stats.acked == 1)
    assert worker.stats.aborted == 0 and sqlite_app.backend.poison.list() == []
    assert sqlite_app.backend.aborts.pending() == []


def test_a_handler_that_sees_the_abort_and_returns_is_recorded_aborted(sqlite_app: App) -> None:
    """Stopping early by returning (after ``aborted`` said so) is an abort, not a success:
    no result, to the poison store as aborted."""
    started = threading.Event()

    @sqlite_app.task(keep_result=True)
    def polite() -> str:
        started.set()
        run, deadline = current_run(), time.monotonic() + 20
        while not run.aborted and time.monotonic() < deadline:
            time.sleep(0.01)
        return "stopped early"

    handle = polite.delay()
    with running(sqlite_app) as worker:
        assert started.wait(20)
        assert sqlite_app.abort(id=handle) is AbortResult.REQUESTED
        wait_for(lambda: worker.stats.aborted == 1)
    assert worker.stats.acked == 0
    (record,) = sqlite_app.backend.poison.list()
    assert record.envelope.id == handle and record.failure.reason == "aborted"
    assert handle.status().value == "failed"


def test_raising_aborted_ends_the_run_without_retry(sqlite_app: App) -> None:
    runs: list[int] = []

    @sqlite_app.task(retries=3)
    def give_up() -> None:
        runs.append(1)
        raise Aborted("nothing to do here")

    give_up.delay()
    with running(sqlite_app, burst=True) as worker:
        wait_for(lambda: worker.stats.aborted == 1)
    assert runs == [1]
    (record,) = sqlite_app.backend.poison.list()
    assert record.failure.reason == "aborted" and "nothing to do" in record.failure.message


@pytest.mark.parametrize("backend", ["sqlite", "redis"])
def test_an_async_handler_is_cancelled(backend: str, tmp_path: Path) -> None:
    app = App(backend_url(backend, tmp_path))
    started = threading.Event()
    cancelled: list[bool] = []

    @app.task(retries=3)
    async def fetch() -> None:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.append(current_run().aborted)
            raise

    message_id = fetch.delay()
    with running(app) as worker:
        assert started.wait(20)
        assert app.abort(id=message_id) is AbortResult.REQUESTED
        wait_for(lambda: worker.stats.aborted == 1)
    assert cancelled == [True]
    assert [r.failure.reason for r in app.backend.poison.list()] == ["aborted"]
    app.close()


def test_an_async_handler_aborted_before_it_starts_never_runs(sqlite_app: App) -> None:
    """Queued behind a busy event loop slot, an aborted coroutine is never started."""
    first_started = threading.Event()
    ran: list[str] = []

    @sqlite_app.task
    async def slot_holder() -> None:
        first_started.set()
        await asyncio.sleep(1.0)
        ran.append("holder")

    @sqlite_app.task
    async def queued() -> None:
        ran.append("queued")

    slot_holder.delay()
    with running(sqlite_app, async_concurrency=1) as worker:
        assert first_started.wait(20)
        queued_id = queued.delay()
        wait_for(lambda: any(w.claim.id == queued_id for w in worker._context.holdings.all()))
        assert sqlite_app.abort(id=queued_id) is AbortResult.REQUESTED
        wait_for(lambda: worker.stats.aborted == 1 and worker.stats.acked == 1)
    assert ran == ["holder"]


# -- the process pool ------------------------------------------------------------------------


@pytest.fixture
def process_tasks(sqlite_url: str, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("TICKWORK_BACKEND", sqlite_url)
    import tests.support.abort_tasks as module

    module = importlib.reload(module)
    yield module
    module.app.close()


def process_worker(app: App, **config: object) -> WorkerConfig:
    return WorkerConfig(
        pool="process",
        concurrency=2,
        poll_interval_s=0.05,
        abort_check_s=0.05,
        grace_s=10,
        app_reference="tests.support.abort_tasks",
        **config,  # type: ignore[arg-type]
    )


def test_a_process_pool_handler_is_interrupted(process_tasks, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    marker = str(tmp_path / "sleeper")
    message_id = process_tasks.sleeper.delay(marker)
    app = process_tasks.app
    worker = Worker(app, process_worker(app))
    worker.start()
    try:
        wait_for(lambda: Path(marker + ".started").exists())
        assert app.abort(id=message_id) is AbortResult.REQUESTED
        wait_for(lambda: worker.stats.aborted == 1)
    finally:
        worker.stop()
        assert worker.join(30)
    assert not Path(marker + ".finished").exists()
    (record,) = app.backend.poison.list()
    assert record.failure.reason == "aborted"


def test_a_stubborn_process_handler_is_killed_and_the_pool_recovers(  # type: ignore[no-untyped-def]
    process_tasks, tmp_path: Path
) -> None:
    """A handler that swallows ``Aborted`` is killed after the grace: only its slot gets
    a fresh process. The bystander running in another child never notices: it runs once,
    to its end, and is not charged an attempt."""
    stubborn, bystander = str(tmp_path / "stubborn"), str(tmp_path / "bystander")
    message_id = process_tasks.stubborn.delay(stubborn)
    app = process_tasks.app
    worker = Worker(app, process_worker(app, abort_grace_s=0.5))
    worker.start()
    try:
        wait_for(lambda: Path(stubborn + ".started").exists())
        process_tasks.bystander.delay(bystander)
        wait_for(lambda: Path(bystander + ".runs").exists())
        assert app.abort(id=message_id) is AbortResult.REQUESTED
        wait_for(lambda: Path(stubborn + ".ignored").exists())
        wait_for(lambda: worker.stats.aborted == 1)
        wait_for(lambda: worker.stats.acked == 1)  # the bystander
        process_tasks.bystander.delay(str(tmp_path / "after"))  # the pool goes on
        wait_for(lambda: worker.stats.acked == 2)
    finally:
        worker.stop()
        assert worker.join(30)
    assert worker.stats.retried == 0
    runs = Path(bystander + ".runs").read_text().split()
    assert len(runs) == 1, "the bystander ran once"
    assert [r.envelope.id for r in app.backend.poison.list()] == [message_id]
