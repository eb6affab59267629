"""Throttles and costs end to end, on every backend: a task's ``throttle=(n, period)``
runs at most n calls per period per limit key and drops the rest, each one recorded in
the poison store as ``throttled`` (never lost, replayable); a call's ``cost=`` counts
that many units of its rate limit; bad input is one clear error and stores nothing."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from tests.support.helpers import running, wait_for
from tickwork.scheduler import App, InvalidMessage, chain, current_run
from tickwork.scheduler.model.message import Message
from tickwork.triggers import Repeating
from tickwork.workers import Worker, WorkerConfig


def test_a_throttle_runs_n_calls_a_period_per_key_and_records_each_dropped_one(
    app: App,
) -> None:
    lock = threading.Lock()
    ran: list[tuple[str, int]] = []

    @app.task(throttle=(3, timedelta(minutes=1)), limit_key="customer")
    def notify(customer: str, n: int) -> None:
        with lock:
            ran.append((customer, n))

    for n in range(5):
        notify.delay("acme", n)
    for n in range(2):
        notify.delay("globex", n)
    with running(app, concurrency=4) as worker:
        # the settler counts a throttled call after its poison record is written
        wait_for(
            lambda: (
                len(ran) == 5
                and len(app.backend.poison.list()) == 2
                and worker.stats.throttled >= 2
            ),
            timeout_s=60,
        )
        throttled = worker.stats.throttled
        assert worker.stats.rate_limited == 0, "a throttle that drops sends nothing to wait"
    assert sorted(customer for customer, _ in ran) == ["acme"] * 3 + ["globex"] * 2
    dropped = app.backend.poison.list()
    assert {record.failure.reason for record in dropped} == {"throttled"}
    calls = sorted(Message.decode(record.envelope.body).args[1] for record in dropped)
    assert len(set(calls) | {n for c, n in ran if c == "acme"}) == 5, "every call accounted for"
    assert throttled == 2
    name = "tests.integration.test_throttle.notify:acme"
    assert app.backend.rates.usage([name], 60_000)[name] == (3, 0), "a dropped call counts nothing"


def test_a_call_s_cost_counts_that_many_units_of_its_rate(app: App) -> None:
    starts: list[int] = []

    @app.task(rate_limit="10/2s")
    def complete(prompt: str) -> None:
        starts.append(app.backend.now_ms())

    complete.call("first").options(cost=6).delay()
    complete.call("second").options(cost=6).delay()
    with running(app, concurrency=2) as worker:
        wait_for(lambda: len(starts) == 2, timeout_s=30)
        assert worker.stats.rate_limited >= 1
    # 6 + 6 units do not fit in 10 a window: the second waits for the first to leave it
    # (a start is read on the backend's clock after its grant reached the worker)
    assert starts[1] - starts[0] >= 1500, starts
    stored = app.get(id=complete.call("third").options(cost=4, delay=3600).delay().id)
    assert stored is not None and stored.message.cost == 4


def test_bad_throttles_and_costs_are_one_clear_error_and_store_nothing(sqlite_app: App) -> None:
    shapes: list[object] = [(0, timedelta(seconds=1)), (3, 10), (3,), "3/m", (3, timedelta(0))]
    for n, bad in enumerate(shapes):
        with pytest.raises(InvalidMessage, match="throttle of task"):

            @sqlite_app.task(throttle=bad, name=f"bad-{n}")  # type: ignore[call-overload, untyped-decorator]
            def bad_task() -> None: ...

    with pytest.raises(InvalidMessage, match="a rate_limit and a throttle"):

        @sqlite_app.task(rate_limit="5/s", throttle=(5, timedelta(seconds=1)))
        def both() -> None: ...

    @sqlite_app.task(rate_limit="10/m")
    def limited(n: int) -> None: ...

    @sqlite_app.task
    def plain(n: int) -> None: ...

    with pytest.raises(InvalidMessage, match="has no rate_limit or throttle"):
        plain.call(1).options(cost=2).delay()
    for cost in (0, 11, 2.5, True):
        with pytest.raises(InvalidMessage, match="cost must be an integer from 1 to 10"):
            limited.call(1).options(cost=cost).delay()
    with pytest.raises(InvalidMessage, match="a later step of a chain"):
        chain(limited.si(1), limited.si(2).options(cost=3)).delay()
    assert sqlite_app.backend.queues.stats() == [], "nothing was stored"


def test_a_schedule_s_throttled_occurrences_are_recorded_and_it_goes_on(sqlite_app: App) -> None:
    ran: list[int] = []

    @sqlite_app.task(throttle=(1, timedelta(minutes=1)))
    def poll() -> None:
        ran.append(1)

    poll.schedule(key="poll", trigger=Repeating(interval=timedelta(milliseconds=200)))
    with running(sqlite_app):
        wait_for(lambda: len(_outcomes(sqlite_app)) >= 4, timeout_s=30)
    outcomes = _outcomes(sqlite_app)
    assert outcomes[-1] == "succeeded" and set(outcomes[:-1]) == {"throttled"}, outcomes
    assert ran == [1]
    assert sqlite_app.get(key="poll") is not None, "the schedule goes on"


def _outcomes(app: App) -> list[str]:
    """The schedule ``poll``'s recorded outcomes, newest first."""
    return [entry.outcome.value for entry in app.schedules.history("poll")]


def test_a_handler_s_charge_counts_against_its_rate(app: App) -> None:
    starts: list[int] = []

    @app.task(rate_limit="10/2s")
    def complete(prompt: str) -> None:
        starts.append(app.backend.now_ms())
        current_run().charge(9)  # the tokens its answer took

    with running(app) as worker:
        complete.delay("first")
        wait_for(lambda: len(starts) == 1, timeout_s=30)
        complete.delay("second")
        wait_for(lambda: len(starts) == 2, timeout_s=30)
        assert worker.stats.rate_limited == 1
    # 1 + 9 units charged fill the window: the second start waits for it to pass
    assert starts[1] - starts[0] >= 1500, starts


def test_a_charge_from_a_pool_process_is_counted(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TICKWORK_BACKEND", sqlite_url)
    import importlib

    import tests.support.process_tasks as module

    module = importlib.reload(module)
    module.answer.delay("summarise")
    config = WorkerConfig(
        pool="process",
        concurrency=1,
        burst=True,
        poll_interval_s=0.05,
        app_reference="tests.support.process_tasks",
    )
    assert Worker(module.app, config).run().acked == 1
    name = module.answer.name
    assert module.app.backend.rates.usage([name], 60_000)[name] == (10, 0), "1 + 9 units"
    module.app.close()


def test_a_bad_charge_fails_its_run_in_tickworks_words(sqlite_app: App) -> None:
    @sqlite_app.task
    def unlimited() -> None:
        current_run().charge(3)

    @sqlite_app.task(rate_limit="10/m")
    def limited() -> None:
        current_run().charge(0)

    unlimited.delay()
    limited.delay()
    with running(sqlite_app):
        wait_for(lambda: len(sqlite_app.backend.poison.list()) == 2, timeout_s=30)
    errors = sorted(record.failure.message for record in sqlite_app.backend.poison.list())
    assert "charge takes a whole number of units >= 1, not 0" in errors[0], errors
    assert "has no rate_limit or throttle to charge units to" in errors[1], errors
