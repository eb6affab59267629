"""Cron ergonomics: nicknames (``@hourly`` to ``@yearly``), Quartz's ``#`` and ``nW``
checked against days computed by hand, jitter's bounds, and ``cron explain`` in words
with the DST flags it and ``enqueue --cron`` take."""

from __future__ import annotations

import calendar
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from tickwork.cli import cli
from tickwork.cli.cron import in_words
from tickwork.scheduler import App
from tickwork.scheduler.model.message import Message
from tickwork.triggers import Cron, Repeating
from tickwork.triggers.errors import InvalidTrigger
from tickwork.triggers.preview import preview

START = datetime(2026, 1, 1, tzinfo=UTC)


def _fires(trigger: Cron, count: int) -> list[datetime]:
    return [o.at for o in preview(trigger, count, START)]


@pytest.mark.parametrize(
    ("nickname", "fields"),
    [
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
        ("  @DAILY ", "0 0 * * *"),
    ],
)
def test_a_nickname_is_its_five_fields(nickname: str, fields: str) -> None:
    trigger = Cron(nickname, tz="Europe/Paris")
    assert trigger.expr == fields
    assert _fires(trigger, 3) == _fires(Cron(fields, tz="Europe/Paris"), 3)


def test_the_fire_times_of_the_nicknames() -> None:
    assert [f.hour for f in _fires(Cron("@hourly"), 3)] == [1, 2, 3]  # strictly after 00:00
    assert all(f.weekday() == calendar.SUNDAY for f in _fires(Cron("@weekly"), 5))
    assert [f.day for f in _fires(Cron("@monthly"), 4)] == [1, 1, 1, 1]
    assert [(f.year, f.month, f.day) for f in _fires(Cron("@yearly"), 2)] == [
        (2027, 1, 1),
        (2028, 1, 1),
    ]


def test_an_unknown_nickname_is_one_clear_error() -> None:
    with pytest.raises(InvalidTrigger, match="nickname '@reboot' is not one of"):
        Cron("@reboot")


def _nth_weekday(year: int, month: int, weekday: int, nth: int) -> date:
    days = [d for d in range(1, 32) if _exists(year, month, d)]
    matching = [d for d in days if date(year, month, d).weekday() == weekday]
    return date(year, month, matching[nth - 1])


def _exists(year: int, month: int, day: int) -> bool:
    return day <= calendar.monthrange(year, month)[1]


def _nearest_weekday(year: int, month: int, day: int) -> date:
    """Quartz's ``nW``: the weekday nearest day ``n``, never across the month's edge."""
    target = date(year, month, day)
    if target.weekday() == calendar.SATURDAY:
        return target - timedelta(days=1) if day > 1 else target + timedelta(days=2)
    if target.weekday() == calendar.SUNDAY:
        last = calendar.monthrange(year, month)[1]
        return target + timedelta(days=1) if day < last else target - timedelta(days=2)
    return target


def test_quartz_hash_is_the_nth_weekday_of_the_month() -> None:
    # Quartz numbers weekdays from 1 (Sunday): 6#3 is the third Friday
    fires = _fires(Cron("0 0 9 ? * 6#3"), 12)
    expected = [_nth_weekday(2026, m, calendar.FRIDAY, 3) for m in range(1, 13)]
    assert [f.date() for f in fires] == expected and all(f.hour == 9 for f in fires)


@pytest.mark.parametrize("day", [1, 15, 30, 31])
def test_quartz_nw_is_the_weekday_nearest_day_n(day: int) -> None:
    """Never across the month's edge; in a month without day n, the weekday nearest its
    last day (31W in April: the 30th, or the Friday before when it is a weekend)."""
    fires = _fires(Cron(f"0 0 12 {day}W * ?"), 12)
    last = [calendar.monthrange(2026, m)[1] for m in range(1, 13)]
    expected = [_nearest_weekday(2026, m, min(day, last[m - 1])) for m in range(1, 13)]
    assert [f.date() for f in fires] == expected


def test_jitter_stays_within_its_bounds(tmp_path: Path) -> None:
    app = App(f"sqlite:///{tmp_path / 'jitter.db'}")

    @app.task
    def report() -> None: ...

    spread = timedelta(seconds=30)
    offsets = []
    for n in range(200):
        trigger = Repeating(interval=timedelta(hours=1), jitter=spread)
        handle = report.schedule(trigger=trigger, key=f"jittered-{n}")
        found = app.backend.messages.get(handle)
        assert found is not None
        message = Message.decode(found.envelope.body)
        offsets.append(found.envelope.due_ms - int(message.scheduled_at.timestamp() * 1000))
    assert all(0 <= offset <= spread.total_seconds() * 1000 for offset in offsets)
    assert max(offsets) - min(offsets) > 10_000, "spread over the window, not one value"
    app.close()


def test_cron_explain_says_it_in_words_with_its_dst_policy() -> None:
    runner = CliRunner()
    shown = runner.invoke(cli, ["cron", "explain", "0 9 * * MON-FRI", "--tz", "Europe/Paris"])
    assert shown.exit_code == 0, shown.output
    first, second = shown.output.splitlines()[:2]
    assert first == "cron '0 9 * * MON-FRI' in Europe/Paris: At 09:00, Monday through Friday"
    assert "run at the first instant after it" in second and "on its first pass" in second
    chosen = runner.invoke(
        cli, ["cron", "explain", "@daily", "--dst-gap", "skip", "--dst-repeat", "both"]
    )
    assert chosen.exit_code == 0, chosen.output
    assert "'0 0 * * *'" in chosen.output and "is skipped" in chosen.output
    assert "on both passes" in chosen.output
    assert in_words(Cron("0 0 9 ? * 6#3")) == "At 09:00, on the third Friday of the month"


def test_enqueue_cron_takes_the_dst_flags(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    runner = CliRunner()
    task = "tests.support.crash_tasks.record"
    args = ["--backend", url, "enqueue", task, "-A", "tests.support.crash_tasks"]
    refused = runner.invoke(cli, [*args, "--args", "[1]", "--dst-gap", "skip"])
    assert refused.exit_code != 0 and "need --cron" in refused.output
    schedule = ["--key", "nightly", "--cron", "@daily", "--tz", "Europe/Paris"]
    policy = ["--dst-gap", "skip", "--dst-repeat", "last"]
    done = runner.invoke(cli, [*args, "--args", "[1]", *schedule, *policy])
    assert done.exit_code == 0, done.output
    app = App(url)
    found = app.get(key="nightly")
    assert found is not None and isinstance(found.message.trigger, Cron)
    trigger = found.message.trigger
    assert (trigger.expr, trigger.dst_gap, trigger.dst_repeat) == ("0 0 * * *", "skip", "last")
    app.close()
