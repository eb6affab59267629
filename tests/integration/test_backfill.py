"""Backfilling a schedule's past occurrences on every backend: each occurrence of the range
runs once, a backfill asked twice enqueues nothing twice (before and after the runs), a
range too large or malformed is one clear error that enqueues nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise

import pytest

from tickwork.scheduler import App, InvalidMessage, ScheduleNotFound, current_run
from tickwork.scheduler.clock import to_datetime, to_ms
from tickwork.triggers import Cron
from tickwork.workers import Worker, WorkerConfig


def _hour_floor(at: datetime) -> datetime:
    return at.replace(minute=0, second=0, microsecond=0)


def test_each_occurrence_of_the_range_runs_once_however_often_it_is_asked(app: App) -> None:
    ran: list[tuple[int, str | None]] = []

    @app.task
    def report(customer: int) -> None:
        ran.append((customer, current_run().key))

    report.schedule(args=(7,), trigger=Cron("0 * * * *"), key="report")
    now = to_datetime(app.backend.now_ms())
    start = _hour_floor(now) - timedelta(hours=4)  # five hour marks up to now
    first = app.schedules.backfill("report", start, now + timedelta(hours=3))
    assert first.occurrences == [start + timedelta(hours=h) for h in range(5)], (
        "the range ends now at the latest: the future is the schedule's own"
    )
    assert (first.enqueued, first.already) == (5, 0)
    again = app.schedules.backfill("report", start, now)
    assert (again.enqueued, again.already) == (0, 5), "waiting runs are not enqueued twice"
    stored = app.get(key=f"report/backfill/{to_ms(start)}")
    assert stored is not None and stored.message.scheduled_at == start
    assert stored.message.headers["tickwork-origin"] == "backfill"

    Worker(app, WorkerConfig(burst=True, poll_interval_s=0.05)).run(duration_s=30)
    assert sorted(ran) == sorted((7, f"report/backfill/{to_ms(t)}") for t in first.occurrences)
    after = app.schedules.backfill("report", start, now)
    assert (after.enqueued, after.already) == (0, 5), "runs that succeeded are remembered"
    schedule = app.get(key="report")
    assert schedule is not None and schedule.message.scheduled_at > now, "the grid did not move"


def test_a_range_too_large_or_malformed_is_one_error_and_enqueues_nothing(
    sqlite_app: App,
) -> None:
    @sqlite_app.task
    def tick() -> None: ...

    tick.schedule(trigger=Cron("* * * * *"), key="tick")
    now = to_datetime(sqlite_app.backend.now_ms())
    with pytest.raises(InvalidMessage, match="more than 60 occurrences of 'tick'"):
        sqlite_app.schedules.backfill("tick", now - timedelta(hours=2), now, limit=60)
    with pytest.raises(InvalidMessage, match="after its end"):
        sqlite_app.schedules.backfill("tick", now, now - timedelta(hours=1))
    with pytest.raises(InvalidMessage, match="timezone-aware"):
        sqlite_app.schedules.backfill("tick", datetime(2026, 1, 1), now)
    with pytest.raises(ScheduleNotFound):
        sqlite_app.schedules.backfill("nothing", now - timedelta(hours=1), now)
    assert sqlite_app.backend.queues.stats("default")[0].ready == 0, "nothing was enqueued"
    spaced = sqlite_app.schedules.backfill(
        "tick", now - timedelta(minutes=3), now, spacing=timedelta(seconds=10)
    )
    dues = sorted(
        stored.due_at
        for t in spaced.occurrences
        if (stored := sqlite_app.get(key=f"tick/backfill/{to_ms(t)}")) is not None
    )
    assert len(dues) == len(spaced.occurrences) >= 3
    assert all(b - a == timedelta(seconds=10) for a, b in pairwise(dues))
    assert dues[0] <= datetime.now(UTC) + timedelta(seconds=1)
