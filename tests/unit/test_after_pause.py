"""What a paused schedule missed, and where it resumes: pure trigger arithmetic."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tickwork.triggers import Cron, Misfire, Repeating
from tickwork.triggers.base import Fire

T0 = datetime(2030, 1, 1, tzinfo=UTC)
HOURLY = Repeating(interval=timedelta(hours=1), start=T0)


def test_nothing_missed_resumes_the_pending_occurrence() -> None:
    pending = Fire(T0 + timedelta(hours=3), 3)
    now = T0 + timedelta(hours=2, minutes=30)
    for policy in Misfire:
        assert HOURLY.after_pause(pending, now, policy) == pending
    assert HOURLY.missed(pending, now, 10) == []


def test_skip_goes_to_the_first_grid_time_after_now_and_counts_the_rest() -> None:
    pending = Fire(T0 + timedelta(hours=1), 1)
    now = T0 + timedelta(hours=4, minutes=10)  # 01:00, 02:00, 03:00, 04:00 fell in the pause
    assert HOURLY.after_pause(pending, now, Misfire.SKIP) == Fire(T0 + timedelta(hours=5), 5, 4)
    # even a single missed occurrence is skipped (a worker after downtime would run it)
    one = T0 + timedelta(hours=1, minutes=10)
    assert HOURLY.after_pause(pending, one, Misfire.SKIP) == Fire(T0 + timedelta(hours=2), 2, 1)


def test_coalesce_runs_once_now() -> None:
    pending = Fire(T0 + timedelta(hours=1), 1)
    now = T0 + timedelta(hours=4, minutes=10)
    assert HOURLY.after_pause(pending, now, Misfire.COALESCE) == Fire(now, 4, 3)


def test_missed_lists_each_occurrence_in_order_up_to_the_limit() -> None:
    pending = Fire(T0 + timedelta(hours=1), 1)
    now = T0 + timedelta(hours=4, minutes=10)
    assert [f.occurrence for f in HOURLY.missed(pending, now, 10)] == [1, 2, 3, 4]
    assert [f.at.hour for f in HOURLY.missed(pending, now, 2)] == [1, 2]


def test_a_trigger_that_ends_in_the_pause_has_nothing_to_resume() -> None:
    five = Repeating(interval=timedelta(hours=1), start=T0, repeat_count=3)
    pending = Fire(T0 + timedelta(hours=1), 1)
    now = T0 + timedelta(hours=10)
    assert five.after_pause(pending, now, Misfire.SKIP) is None
    assert [f.occurrence for f in five.missed(pending, now, 10)] == [1, 2]


def test_cron_in_its_timezone() -> None:
    nine = Cron("0 9 * * *", tz="Europe/Paris")
    pending = nine.first(T0)
    assert pending is not None
    now = pending.at + timedelta(days=2, hours=1)  # three 09:00 runs missed
    after = nine.after_pause(pending, now, Misfire.SKIP)
    assert after is not None and after.misfires == 3
    assert after.at == pending.at + timedelta(days=3)
    assert len(nine.missed(pending, now, 100)) == 3
