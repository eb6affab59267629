"""The dispatcher: every outcome of a handler, leases, chains, shutdown, pools."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from tests.support.helpers import running, wait_for
from tickwork.scheduler import App, Message, QueueNotFound
from tickwork.scheduler.backends import Envelope, State
from tickwork.scheduler.clock import ManualClock
from tickwork.triggers import Misfire, Repeating
from tickwork.workers import Worker, WorkerConfig


class Runs:
    """A thread-safe record of handler calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[object, ...]] = []
        self.lock = threading.Lock()

    def add(self, *item: object) -> None:
        with self.lock:
            self.calls.append(item)

    def __len__(self) -> int:
        with self.lock:
            return len(self.calls)


def test_handler_that_returns_is_acked(app: App) -> None:
    runs = Runs()

    @app.task
    def work(n: int) -> None:
        runs.add(n)

    for i in range(50):
        work.delay(i)
    with running(app) as worker:
        wait_for(lambda: worker.stats.acked == 50)
    assert sorted(c[0] for c in runs.calls) == list(range(50))  # type: ignore[type-var]
    stats = app.backend.queues.stats("default")[0]
    assert (stats.ready, stats.in_flight) == (0, 0)


def test_false_means_redelivered_after_the_lease(app: App) -> None:
    runs = Runs()

    @app.task(timeout=0.5)
    def flaky() -> bool:
        runs.add(time.monotonic())
        return len(runs) >= 2

    flaky.delay()
    with running(app) as worker:
        wait_for(lambda: worker.stats.acked == 1)
    assert len(runs) == 2
    # the backend made it due again because its lease ran out, not as a retry
    counters = app.backend.queues.stats("default")[0].counters
    assert counters.get("redelivered") == 1 and not counters.get("retried")


def test_exception_retries_with_backoff_then_poisons(app: App) -> None:
    runs = Runs()

    @app.task(retries=2)
    def broken() -> None:
        runs.add(time.monotonic())
        raise ValueError("boom")

    from tickwork.scheduler import RetryPolicy

    app.tasks["tests.integration.test_worker.broken"].options = app.tasks[
        "tests.integration.test_worker.broken"
    ].options.model_copy(update={"retry": RetryPolicy(retries=2, base_s=0.2, jitter=False)})
    message_id = broken.delay()
    with running(app) as worker:
        wait_for(lambda: worker.stats.poisoned == 1)
    assert len(runs) == 3 and worker.stats.retried == 2
    gaps = [b[0] - a[0] for a, b in zip(runs.calls, runs.calls[1:], strict=False)]  # type: ignore[operator]
    assert gaps[0] >= 0.18 and gaps[1] >= 0.38, f"backoff must grow, not hot-loop: {gaps}"
    (record,) = app.backend.poison.list("default")
    assert record.envelope.id == message_id and record.attempts == 3
    assert record.failure.error_type == "ValueError" and "boom" in record.failure.message
    assert "Traceback" in record.failure.traceback


def test_delayed_failing_message_does_not_hot_loop(app: App) -> None:
    started: list[float] = []  # appended by the one thread running it at a time

    @app.task(retries=50)
    def broken() -> None:
        started.append(time.monotonic())
        raise RuntimeError("nope")

    broken.schedule(delay=timedelta(milliseconds=100))
    with running(app):
        wait_for(lambda: len(started) >= 3, timeout_s=30)
    # backoff 1 s then 2 s, each jittered to at least half: the runs are that far apart
    # (a slower machine only spaces them more)
    first, second, third = started[:3]
    assert second - first >= 0.5 and third - second >= 1.0, started


def test_recurring_chain_runs_on_its_grid_and_stops(app: App) -> None:
    runs = Runs()

    @app.task
    def tick() -> None:
        runs.add(time.time())

    # catch_up: every run happens even if a slow start makes the first ones late
    grid = Repeating(interval=timedelta(milliseconds=200), repeat_count=4, misfire=Misfire.CATCH_UP)
    tick.schedule(trigger=grid, key="t")
    with running(app) as worker:
        wait_for(lambda: worker.stats.acked == 4)
        # a fifth occurrence would have been written with the fourth's ack
        assert app.get(key="t") is None
    assert len(runs) == 4


def test_cancel_while_running_does_not_resurrect_the_chain(app: App) -> None:
    started, release = threading.Event(), threading.Event()

    @app.task
    def slow() -> None:
        started.set()
        release.wait(10)

    slow.schedule(trigger=Repeating(interval=timedelta(milliseconds=100)), key="chain")
    with running(app) as worker:
        assert started.wait(10)
        got = app.get(key="chain")
        assert got is not None and got.state is State.RUNNING
        assert app.cancel(key="chain")
        release.set()
        wait_for(lambda: worker.stats.stale == 1)  # its settle found it cancelled
    assert app.get(key="chain") is None
    assert app.backend.queues.stats("default")[0].scheduled == 0


def test_outliving_the_lease_does_not_fork_the_chain(app: App) -> None:
    """Astyanax #218. The lease heartbeat is paused, so the slow run's lease expires and a
    second run starts; only one next occurrence may come out of the two."""
    runs = Runs()
    first_release = threading.Event()

    @app.task(timeout=0.3)
    def tick(n: int) -> None:
        runs.add(n)
        if len(runs) == 1:
            first_release.wait(5)  # outlives its 0.3 s lease

    tick.schedule(args=(1,), trigger=Repeating(interval=timedelta(hours=1)), key="chain")
    worker = Worker(app, WorkerConfig(poll_interval_s=0.05, grace_s=5))
    worker._heartbeat.beat = lambda: None  # type: ignore[method-assign]
    worker.start()
    try:
        wait_for(lambda: len(runs) == 2)  # redelivered after the lease expired
        wait_for(lambda: worker.stats.acked == 1)
        first_release.set()
        wait_for(lambda: worker.stats.stale == 1)
    finally:
        worker.stop()
        worker.join(10)
    chain = [m for m in app.backend.messages.keyed("default")]
    assert len(chain) == 1 and chain[0].envelope.id.endswith(".1")


def test_heartbeat_keeps_a_long_handler_from_running_twice(app: App) -> None:
    runs = Runs()

    # Beats come every 0.25 s and extend a lease past half its length, so a 1.2 s lease
    # is extended with at least 0.35 s to spare (a loaded Cassandra's LWT took longer
    # than the 0.15 s a 0.4 s lease leaves); 2.5 s of work needs two extensions.
    @app.task(timeout=1.2)
    def long() -> None:
        runs.add(1)
        time.sleep(2.5)

    long.delay()
    with running(app) as worker:
        wait_for(lambda: worker.stats.acked == 1)
    assert len(runs) == 1 and worker.stats.stale == 0


def test_priority_order_among_due_messages(app: App) -> None:
    order = Runs()

    @app.task
    def job(name: str) -> None:
        order.add(name)

    for name, priority in [("low", 0), ("high", 10), ("mid", 5)]:
        job.schedule(args=(name,), priority=priority)
    with running(app, concurrency=1, prefetch=0) as worker:
        wait_for(lambda: worker.stats.acked == 3)
    assert [c[0] for c in order.calls] == ["high", "mid", "low"]


def test_unknown_task_and_undecodable_body_go_to_poison(app: App) -> None:
    @app.task
    def known() -> None: ...

    app.backend.messages.enqueue(
        [Envelope("garbage", "default", None, 0, app.clock.now_ms(), 1000, b"\xff{")]
    )
    message = Message.decode(app.get(id=known.delay()).message.encode())  # type: ignore[union-attr]
    foreign = message.model_copy(update={"id": "foreign", "task": "not.registered"})
    app.backend.messages.enqueue([foreign.envelope(app.clock.now_ms())])
    # with no grace for unknown tasks (tests/integration/test_rolling_deploys.py has one)
    with running(app, unknown_task_grace_s=0.0) as worker:
        wait_for(lambda: worker.stats.poisoned == 2 and worker.stats.acked == 1)
    reasons = {r.envelope.id: r.failure.reason for r in app.backend.poison.list()}
    assert reasons == {"garbage": "undecodable", "foreign": "unknown_task"}


def test_graceful_shutdown_releases_unstarted_claims_at_once(app: App) -> None:
    started, release = threading.Event(), threading.Event()

    @app.task
    def slow() -> None:
        started.set()
        release.wait(10)  # runs until the others were released (not a fixed time: a
        # slow machine could ask the stop after the first run ended and the next began)

    for _ in range(10):
        slow.delay()
    worker = Worker(app, WorkerConfig(concurrency=1, prefetch=9, poll_interval_s=0.05))
    worker.start()
    assert started.wait(10)
    worker.stop()
    wait_for(lambda: worker.stats.released == 9)  # at once: the first run still runs
    release.set()
    assert worker.join(10)
    stats = app.backend.queues.stats("default")[0]
    assert worker.stats.acked == 1 and worker.stats.released == 9
    assert (stats.ready, stats.in_flight) == (9, 0), "released claims are due again at once"


def test_timing_wheel_fires_on_time(app: App) -> None:
    lateness: list[float] = []

    @app.task
    def on_time(due: float) -> None:
        lateness.append(time.time() - due)

    now = time.time()
    for i in range(20):
        due = now + 0.3 + i * 0.05
        on_time.schedule(args=(due,), at=datetime.fromtimestamp(due, UTC))
    with running(app, lookahead_ms=1000) as worker:
        wait_for(lambda: worker.stats.acked == 20)
    assert min(lateness) >= -0.002, "nothing may run before it is due"


def test_burst_exits_when_idle(app: App) -> None:
    @app.task
    def job() -> None: ...

    for _ in range(5):
        job.delay()
    worker = Worker(app, WorkerConfig(burst=True, poll_interval_s=0.05))
    stats = worker.run()
    assert stats.acked == 5


def test_process_pool(sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sync tasks run in the child processes; async ones on the worker's event loop."""
    monkeypatch.setenv("TICKWORK_BACKEND", sqlite_url)
    import importlib

    import tests.support.process_tasks as module

    module = importlib.reload(module)
    for i in range(6):
        module.square.delay(i)
        module.async_square.delay(i)
    module.crash.delay()
    cubed = module.cube.delay(3)
    config = WorkerConfig(
        pool="process",
        concurrency=2,
        burst=True,
        poll_interval_s=0.05,
        app_reference="tests.support.process_tasks",
    )
    stats = Worker(module.app, config).run()
    assert stats.acked == 13 and stats.poisoned == 1
    assert cubed.result(timeout=5) == 27, "kept from the pool process (its progress too)"
    (record,) = module.app.backend.poison.list()
    assert record.failure.error_type == "ZeroDivisionError"
    module.app.close()


def test_grace_runs_on_the_worker_clock_and_ends_in_a_forced_stop(sqlite_url: str) -> None:
    """The grace period is measured on the injected clock: frozen, the worker waits for
    its running handler; moved past the grace, it abandons the handler at once (it does
    not then wait for the handler's thread) and says it was forced."""
    app = App(sqlite_url)
    started, release = threading.Event(), threading.Event()

    @app.task
    def stuck() -> None:
        started.set()
        release.wait(60)

    stuck.delay()
    clock = ManualClock(int(time.time() * 1000))
    worker = Worker(app, WorkerConfig(grace_s=0.2, poll_interval_s=0.05), clock=clock)
    worker.start()
    try:
        assert started.wait(15)
        worker.stop()
        assert not worker.join(1.0), "0.2 s of grace on a frozen clock has not passed"
        forced_during_grace = worker.forced
        assert not forced_during_grace
        clock.advance(201)
        assert worker.join(15), "past the grace the handler is abandoned"
        assert worker.forced
        stored = app.backend.queues.stats("default")[0]
        assert stored.in_flight == 1, "its lease is left to expire, never acked"
    finally:
        release.set()
        app.close()


def test_a_paused_queue_is_not_claimed_until_resumed(app: App) -> None:
    runs = Runs()

    @app.task
    def job(n: int) -> None:
        runs.add(n)

    @app.task(queue="other")
    def elsewhere(n: int) -> None:
        runs.add(f"other {n}")

    assert app.queues.pause() and app.queues.paused() == ["default"]
    job.delay(1)
    job.schedule(args=(2,), delay=timedelta(milliseconds=300))  # comes due while paused
    elsewhere.delay(1)
    # a sentinel in the other queue, due past the second's time: once it ran, the worker
    # has polled both queues since the second came due
    elsewhere.schedule(args=(2,), delay=timedelta(seconds=1))
    with running(app, queues=("default", "other")) as worker:
        wait_for(lambda: len(runs) == 2)  # the other queue is not paused
        assert runs.calls == [("other 1",), ("other 2",)]
        assert app.backend.queues.stats("default")[0].ready == 2
        assert app.queues.resume() and app.queues.paused() == []
        wait_for(lambda: worker.stats.acked == 4)
    assert sorted(map(str, runs.calls)) == ["('other 1',)", "('other 2',)", "(1,)", "(2,)"]


def test_pausing_a_running_worker_stops_its_claims_within_a_poll_interval(app: App) -> None:
    runs = Runs()

    @app.task
    def job() -> None:
        runs.add(1)

    @app.task(queue="other")
    def sentinel() -> None:
        runs.add("sentinel")

    job.delay()
    with running(app, queues=("default", "other"), poll_interval_s=0.05) as worker:
        wait_for(lambda: len(runs) == 1)
        assert worker.active_queues == ("default", "other")
        app.queues.pause()
        wait_for(lambda: worker.active_queues == ("other",))  # read once per poll interval
        job.delay()
        # several poll intervals in which nothing of the paused queue may be claimed,
        # ended by a sentinel in the other queue
        sentinel.schedule(delay=timedelta(milliseconds=500))
        wait_for(lambda: worker.stats.acked == 2)
        assert runs.calls == [(1,), ("sentinel",)]
        app.queues.resume()
        wait_for(lambda: worker.active_queues == ("default", "other"))
        wait_for(lambda: len(runs) == 3)


def test_pausing_a_queue_nobody_knows_is_one_clear_error(app: App) -> None:
    """A typo must not pause nothing in silence: a queue is known once written to, named
    by a task, or the default one."""

    @app.task(queue="reports")
    def report() -> None: ...

    with pytest.raises(QueueNotFound, match="'reprots'"):
        app.queues.pause("reprots")
    with pytest.raises(QueueNotFound):
        app.queues.resume("reprots")
    assert app.queues.paused() == [], "nothing was paused"
    assert app.queues.pause("reports"), "a task's queue, before anything was written to it"
    assert app.queues.pause("default")
    app.backend.messages.enqueue([Envelope("m", "written", None, 0, 0, 1_000, b"{}")])
    assert app.queues.pause("written"), "a queue something was written to"
    assert app.queues.paused() == ["default", "reports", "written"]
    assert "reprots" not in app.queues.names() and "written" in app.queues.names()


def test_burst_exits_when_every_queue_is_paused(app: App) -> None:
    @app.task
    def job() -> None: ...

    job.delay()
    app.queues.pause()
    worker = Worker(app, WorkerConfig(burst=True, poll_interval_s=0.05))
    stats = worker.run()
    assert stats.acked == 0 and app.backend.queues.stats("default")[0].ready == 1
