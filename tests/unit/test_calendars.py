"""Calendar exclusions: a schedule skips listed dates, ranges and public holidays, in its
own timezone; preview lists what is skipped."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import holidays
import pytest
from pydantic import TypeAdapter

from tickwork.triggers import AnyTrigger, Cron, Exclusions, Misfire, Repeating, preview

PARIS = ZoneInfo("Europe/Paris")


def fires(trigger: Cron | Repeating, after: datetime, until: datetime) -> list[datetime]:
    out: list[datetime] = []
    fire = trigger.first(after)
    while fire is not None and fire.at <= until:
        out.append(fire.at)
        fire = trigger.following(fire.at, fire.occurrence, fire.at)
    return out


def test_a_daily_cron_skips_french_holidays_for_a_year_as_the_calendar_says() -> None:
    exclude = Exclusions.of_calendar(holidays.country_holidays("FR"), dates=(date(2026, 12, 24),))
    assert exclude.holidays == "FR", "a calendar object is kept as its country code"
    cron = Cron("0 9 * * *", tz="Europe/Paris", exclude=exclude)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    got = [f.astimezone(PARIS).date() for f in fires(cron, start, start + timedelta(days=365))]
    french = holidays.country_holidays("FR", years=2026)
    want = [
        day
        for day in (date(2026, 1, 1) + timedelta(days=i) for i in range(366))
        if day.year == 2026 and day not in french and day != date(2026, 12, 24)
    ]
    assert got == want
    assert len(want) == 365 - 11 - 1  # eleven public holidays in metropolitan France


def test_dates_are_wall_dates_in_the_trigger_zone() -> None:
    """23:30 in Paris on the 24th is 22:30 UTC on the 24th; 00:30 on the 25th is 23:30
    UTC on the 24th: the exclusion of the 25th takes the second, not the first."""
    cron = Cron("30 0,23 * * *", tz="Europe/Paris", exclude=Exclusions(dates=(date(2026, 12, 25),)))
    got = fires(cron, datetime(2026, 12, 24, tzinfo=UTC), datetime(2026, 12, 26, 12, tzinfo=UTC))
    walls = [f.astimezone(PARIS).strftime("%d %H:%M") for f in got]
    assert walls == ["24 23:30", "26 00:30"]  # 25 00:30 (24th in UTC) and 25 23:30: skipped


def test_a_repeating_trigger_steps_over_a_range_and_keeps_its_grid_numbers() -> None:
    start = datetime(2026, 12, 23, tzinfo=UTC)
    every_6h = Repeating(
        interval=timedelta(hours=6),
        start=start,
        exclude=Exclusions(ranges=((date(2026, 12, 24), date(2026, 12, 26)),)),
    )
    fire = every_6h.following(start + timedelta(hours=18), 3, start)
    assert fire is not None and fire.at == datetime(2026, 12, 27, tzinfo=UTC)
    assert fire.occurrence == 16, "the occurrence number is the grid index: ids stay unique"


def test_missed_runs_on_excluded_dates_are_not_counted() -> None:
    start = datetime(2026, 12, 23, tzinfo=UTC)
    daily = Repeating(
        interval=timedelta(days=1),
        start=start,
        misfire=Misfire.SKIP,
        exclude=Exclusions(dates=(date(2026, 12, 25),)),
    )
    first = daily.first(start)
    assert first is not None
    after_outage = daily.following(first.at, first.occurrence, start + timedelta(days=4, hours=1))
    assert after_outage is not None
    assert after_outage.at == datetime(2026, 12, 28, tzinfo=UTC)
    assert after_outage.misfires == 3, "the 24th, 26th and 27th; the 25th was never due"


def test_preview_lists_excluded_occurrences_without_counting_them() -> None:
    cron = Cron("0 9 * * *", tz="Europe/Paris", exclude=Exclusions(holidays="FR"))
    shown = preview(cron, 3, datetime(2026, 12, 23, tzinfo=UTC))
    assert [(o.wall.day, o.note) for o in shown] == [
        (23, None),
        (24, None),
        (25, "not run: holiday: Christmas Day"),
        (26, None),
    ]
    assert cron.describe() == "cron 0 9 * * * Europe/Paris, except holidays FR"


def test_exclusions_survive_the_message_body() -> None:
    cron = Cron(
        "0 9 * * *",
        tz="Europe/Paris",
        exclude=Exclusions(
            dates=(date(2026, 5, 2),),
            ranges=((date(2026, 8, 1), date(2026, 8, 15)),),
            holidays="US-CA",
        ),
    )
    adapter: TypeAdapter[AnyTrigger] = TypeAdapter(AnyTrigger)
    again = adapter.validate_json(cron.model_dump_json(exclude_defaults=True))
    assert again == cron


def test_bad_exclusions_are_one_clear_error() -> None:
    with pytest.raises(ValueError, match="ends before it starts"):
        Exclusions(ranges=((date(2026, 2, 1), date(2026, 1, 1)),))
    with pytest.raises(ValueError, match="no holiday calendar for 'XX'"):
        Exclusions(holidays="XX")
    with pytest.raises(ValueError, match="country code or a holidays calendar"):
        Exclusions.of_calendar(object())
    every_day = Exclusions(ranges=((date(2000, 1, 1), date(2099, 12, 31)),))
    with pytest.raises(ValueError, match="free of the exclusions"):
        Cron("0 9 * * *", exclude=every_day).first(datetime(2026, 1, 1, tzinfo=UTC))
