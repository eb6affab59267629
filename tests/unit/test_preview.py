"""Preview: the next fire times of a trigger with DST notes (pure; no clock, no backend)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tickwork.triggers import Cron, Repeating, RunOnce
from tickwork.triggers.preview import MAX_PREVIEW, preview

PARIS = "Europe/Paris"  # 2026: forward 03-29 02:00 -> 03:00, back 10-25 03:00 -> 02:00


def test_a_fixed_time_in_the_spring_gap_is_shifted_and_noted() -> None:
    fires = preview(Cron("30 2 * * *", tz=PARIS), 3, datetime(2026, 3, 27, 12, tzinfo=UTC))
    assert [o.wall.strftime("%m-%d %H:%M") for o in fires] == [
        "03-28 02:30",
        "03-29 03:00",
        "03-30 02:30",
    ]
    assert fires[0].note is None and fires[2].note is None
    assert fires[1].note is not None and fires[1].note.startswith("shifted")


def test_a_fixed_time_repeated_in_the_fall_runs_on_its_first_pass_only() -> None:
    fires = preview(Cron("30 2 * * *", tz=PARIS), 3, datetime(2026, 10, 23, 12, tzinfo=UTC))
    assert [o.at for o in fires] == [
        datetime(2026, 10, 24, 0, 30, tzinfo=UTC),
        datetime(2026, 10, 25, 0, 30, tzinfo=UTC),  # 02:30 CEST, not 02:30 CET
        datetime(2026, 10, 26, 1, 30, tzinfo=UTC),
    ]
    assert fires[1].note == (
        "repeated wall time (clock goes back): first pass; the second is not run"
    )


def test_an_interval_schedule_lists_skipped_wall_times_and_both_passes() -> None:
    spring = preview(Cron("*/30 * * * *", tz=PARIS), 2, datetime(2026, 3, 29, 0, 15, tzinfo=UTC))
    assert spring[1].wall.strftime("%H:%M") == "03:00"
    assert spring[1].note == "skipped 02:00, 02:30 (not on the clock: it goes forward)"
    fall = preview(Cron("*/30 * * * *", tz=PARIS), 4, datetime(2026, 10, 25, 0, 15, tzinfo=UTC))
    assert [(o.wall.strftime("%H:%M"), o.note) for o in fall] == [
        ("02:30", "repeated wall time (clock goes back): first pass"),
        ("02:00", "repeated wall time (clock goes back): second pass"),
        ("02:30", "repeated wall time (clock goes back): second pass"),
        ("03:00", None),
    ]


def test_notes_follow_the_schedule_dst_policy() -> None:
    skip = preview(
        Cron("30 2 * * *", tz=PARIS, dst_gap="skip"), 2, datetime(2026, 3, 28, 12, tzinfo=UTC)
    )
    assert [o.wall.strftime("%m-%d %H:%M") for o in skip] == ["03-30 02:30", "03-31 02:30"]
    assert skip[0].note == "skipped 02:30 (not on the clock: it goes forward)"
    last = preview(
        Cron("30 2 * * *", tz=PARIS, dst_repeat="last"), 1, datetime(2026, 10, 24, 12, tzinfo=UTC)
    )
    assert last[0].at == datetime(2026, 10, 25, 1, 30, tzinfo=UTC)  # 02:30 CET
    assert last[0].note == (
        "repeated wall time (clock goes back): second pass; the first is not run"
    )
    shifted = preview(
        Cron("*/30 * * * *", tz=PARIS, dst_gap="shift"), 2, datetime(2026, 3, 29, 0, 15, tzinfo=UTC)
    )
    assert [o.wall.strftime("%H:%M") for o in shifted] == ["01:30", "03:00"]
    assert shifted[1].note is None, "03:00 is on the clock; the shifted walls run with it"


@pytest.mark.parametrize(
    ("expr", "tz"),
    [
        ("30 2 * * *", "America/New_York"),
        ("*/20 * * * *", "Australia/Lord_Howe"),  # a 30-minute DST shift
        ("0 0 * * *", "America/Santiago"),  # DST changes at midnight
        ("15 1 * * SUN", "Europe/London"),
        ("*/10 * * * * ?", "Europe/Paris"),
    ],
)
def test_preview_agrees_with_the_trigger_it_describes(expr: str, tz: str) -> None:
    """The preview's instants are exactly what the worker will plan, fire after fire."""
    cron = Cron(expr, tz=tz)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for month in range(12):
        after = start + timedelta(days=30 * month)
        fires = preview(cron, 40, after)
        expected = [cron.first(after)]
        while len(expected) < 40:
            last = expected[-1]
            assert last is not None
            expected.append(cron.following(last.at, last.occurrence, last.at))
        assert [o.at for o in fires] == [f.at for f in expected if f is not None]
        assert all(o.wall.astimezone(UTC) == o.at for o in fires)


def test_repeating_and_run_once_previews() -> None:
    start = datetime(2030, 1, 1, tzinfo=UTC)
    grid = Repeating(interval=timedelta(hours=1), start=start, repeat_count=3)
    fires = preview(grid, 10, start - timedelta(seconds=1))
    assert [(o.at.hour, o.occurrence) for o in fires] == [(0, 0), (1, 1), (2, 2)]
    assert all(o.note is None for o in fires)
    later = preview(grid, 10, start + timedelta(minutes=30))
    assert [o.occurrence for o in later] == [1, 2]
    ended = Repeating(interval=timedelta(hours=1), start=start, end=start + timedelta(hours=1))
    assert len(preview(ended, 10, start - timedelta(seconds=1))) == 2
    assert [o.at for o in preview(RunOnce(at=start), 5, start - timedelta(days=1))] == [start]
    assert preview(RunOnce(at=start), 5, start) == []
    relative = preview(Repeating(interval=timedelta(minutes=5)), 2, start)
    assert [o.at for o in relative] == [start + timedelta(minutes=5), start + timedelta(minutes=10)]


def test_bad_counts_and_naive_times_are_refused() -> None:
    cron = Cron("* * * * *")
    with pytest.raises(ValueError, match="count"):
        preview(cron, 0, datetime(2026, 1, 1, tzinfo=UTC))
    with pytest.raises(ValueError, match="count"):
        preview(cron, MAX_PREVIEW + 1, datetime(2026, 1, 1, tzinfo=UTC))
    with pytest.raises(ValueError, match="timezone-aware"):
        preview(cron, 1, datetime(2026, 1, 1))
