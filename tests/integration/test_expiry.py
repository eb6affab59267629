"""Expiry (``expires=`` on a task or a call): a message not started by then is not run;
it goes to the poison store as ``expired`` (a replay runs it after all), counted under
``expired``, recorded in its ledger, and a recurring chain goes on. On every backend."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from tests.support.helpers import running, wait_for
from tickwork.scheduler import App, InvalidMessage
from tickwork.scheduler.schedules.ledger import RunOutcome
from tickwork.triggers import Repeating
from tickwork.workers import Worker, WorkerConfig


def _burst(app: App) -> Worker:
    worker = Worker(app, WorkerConfig(burst=True, poll_interval_s=0.05, lookahead_ms=0))
    worker.run()
    return worker


def test_a_message_not_started_in_time_is_not_run(app: App) -> None:
    ran: list[str] = []

    @app.task(expires=timedelta(milliseconds=300), history=True)
    def report(name: str) -> None:
        ran.append(name)

    late = report.delay("late")
    time.sleep(0.5)
    fresh = report.schedule(("fresh",), expires=timedelta(minutes=5))
    worker = _burst(app)
    assert ran == ["fresh"], "the expired one never ran"
    assert worker.stats.expired == 1
    (record,) = app.backend.poison.list()
    assert record.envelope.id == str(late) and record.failure.reason == "expired"
    assert "not started within 0.3 s" in record.failure.message
    assert app.backend.queues.stats("default")[0].counters.get("expired") == 1
    (entry,) = app.run_history(str(late))
    assert entry.outcome is RunOutcome.EXPIRED and entry.started_at is None
    assert app.get(id=str(fresh)) is None
    assert app.backend.poison.replay([str(late)]) == 1, "a replay runs it after all"
    _burst(app)
    assert ran == ["fresh", "late"]


def test_an_expiry_time_for_a_one_off(sqlite_app: App) -> None:
    ran: list[int] = []

    @sqlite_app.task
    def job(n: int) -> None:
        ran.append(n)

    past_soon = datetime.now(UTC) + timedelta(milliseconds=200)
    job.schedule((1,), expires=past_soon)
    job.schedule((2,), expires=datetime.now(UTC) + timedelta(minutes=5))
    time.sleep(0.4)
    _burst(sqlite_app)
    assert ran == [2]


def test_a_recurring_schedule_goes_on_after_an_expired_occurrence(sqlite_app: App) -> None:
    ran: list[float] = []

    @sqlite_app.task
    def tick() -> None:
        ran.append(time.monotonic())

    tick.schedule(
        trigger=Repeating(interval=timedelta(seconds=1)), key="tick", expires=timedelta(seconds=1)
    )
    time.sleep(1.3)  # its first occurrence expires before any worker starts
    with running(sqlite_app):
        wait_for(lambda: len(ran) >= 1, 20)
    outcomes = [entry.outcome for entry in sqlite_app.schedules.history("tick")]
    assert RunOutcome.EXPIRED in outcomes and RunOutcome.SUCCEEDED in outcomes
    assert sqlite_app.get(key="tick") is not None, "the schedule goes on"


def test_an_expiry_that_cannot_be_is_refused_and_writes_nothing(sqlite_app: App) -> None:
    @sqlite_app.task
    def job() -> None: ...

    with pytest.raises(InvalidMessage, match="before its time"):
        job.schedule(expires=timedelta(0))
    with pytest.raises(InvalidMessage, match="before its time"):
        job.schedule(delay=timedelta(hours=1), expires=datetime.now(UTC) + timedelta(minutes=1))
    with pytest.raises(InvalidMessage, match="aware datetime"):
        job.schedule(expires=datetime.now() + timedelta(minutes=1))
    with pytest.raises(InvalidMessage, match="timedelta, not a datetime"):
        job.schedule(
            trigger=Repeating(interval=timedelta(minutes=1)),
            key="k",
            expires=datetime.now(UTC) + timedelta(minutes=1),
        )
    with pytest.raises(InvalidMessage, match=r"option expires=-1 day.*\(expires must be"):
        sqlite_app.task(name="bad", expires=timedelta(seconds=-1))(lambda: None)
    assert sqlite_app.backend.queues.stats() == [] or all(
        s.ready + s.scheduled == 0 for s in sqlite_app.backend.queues.stats()
    )
