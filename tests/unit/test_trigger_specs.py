"""Several specs per schedule (``Specs``), time windows, and the catch-up window: each
checked against an oracle over a whole year in 13 zones (the union of each spec's own
fires; a wall-clock test of every hourly fire), and by properties."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from tests.support.zones import ZONES
from tickwork.triggers import (
    AnyTrigger,
    Cron,
    Exclusions,
    Misfire,
    Repeating,
    RunOnce,
    Specs,
    Trigger,
    Window,
)
from tickwork.triggers.errors import InvalidTrigger

YEAR_START = datetime(2026, 1, 1, tzinfo=UTC)
YEAR_END = datetime(2027, 1, 1, tzinfo=UTC)
T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)


def _walk(trigger: Trigger, start: datetime, end: datetime) -> list[datetime]:
    """Every fire of ``trigger`` from ``start`` to ``end``, one after the other."""
    found: list[datetime] = []
    fire = trigger.first(start)
    while fire is not None and fire.at <= end:
        found.append(fire.at)
        fire = trigger.following(fire.at, fire.occurrence, fire.at)
    return found


@pytest.mark.parametrize("tz", ZONES)
def test_specs_fire_on_the_union_of_their_grids_over_a_year(tz: str) -> None:
    other = ZONES[(ZONES.index(tz) + 5) % len(ZONES)]
    specs = (
        Cron("30 2 * * *", tz=tz),  # in a DST gap or fold twice a year in most zones
        Cron("0 9 * * MON-FRI", tz=other),
        Cron("0 9 * * *", tz=tz),  # the same instant as the one above some days
        Repeating(interval=timedelta(hours=53), start=YEAR_START),
        RunOnce(at=datetime(2026, 7, 14, 10, 15, tzinfo=UTC)),
    )
    union = Specs(specs=specs)
    want = sorted({at for spec in specs for at in _walk(spec, YEAR_START, YEAR_END)})
    assert _walk(union, YEAR_START, YEAR_END) == want


def _inside(wall: datetime) -> bool:
    """The oracle's business hours: 09:00 to 17:00 Monday to Friday, 19:00 to 20:00 on
    Saturdays."""
    if wall.weekday() < 5:
        return time(9) <= wall.time() < time(17)
    return wall.weekday() == 5 and time(19) <= wall.time() < time(20)


WINDOWS = (
    Window(start=time(9), end=time(17), days="MON-FRI"),
    Window(start=time(19), end=time(20), days="SAT"),
)


@pytest.mark.parametrize("tz", ZONES)
def test_time_windows_keep_the_fires_inside_them_over_a_year(tz: str) -> None:
    zone = ZoneInfo(tz)
    hourly = Cron("0 * * * *", tz=tz)
    windowed = Cron("0 * * * *", tz=tz, exclude=Exclusions(windows=WINDOWS))
    every = _walk(hourly, YEAR_START, YEAR_END)
    want = [at for at in every if _inside(at.astimezone(zone).replace(tzinfo=None))]
    assert _walk(windowed, YEAR_START, YEAR_END) == want
    # the same windows as a schedule's calendar over two specs in two zones
    half_past = Cron("30 */3 * * *", tz="UTC")
    union = Specs(specs=(hourly, half_past), exclude=Exclusions(windows=WINDOWS), tz=tz)
    both = sorted({*every, *_walk(half_past, YEAR_START, YEAR_END)})
    want = [at for at in both if _inside(at.astimezone(zone).replace(tzinfo=None))]
    assert _walk(union, YEAR_START, YEAR_END) == want


def test_windows_and_dates_combine() -> None:
    calendar = Exclusions(
        windows=(Window(start=time(9), end=time(12)),),
        dates=(datetime(2026, 3, 3).date(),),
        holidays="FR",
    )
    trigger = Cron("0 * * * *", tz="Europe/Paris", exclude=calendar)
    fires = _walk(trigger, T0, T0 + timedelta(days=3))
    walls = [f.astimezone(ZoneInfo("Europe/Paris")) for f in fires]
    assert {w.hour for w in walls} == {9, 10, 11}
    assert {w.day for w in walls} == {2, 4}  # not the 3rd (excluded), not the 1st (past noon)
    assert "within 09:00-12:00 every day" in trigger.describe()


def test_window_days_parse_names_and_wrap() -> None:
    assert Window(start=time(1), end=time(2), days="FRI-MON").days == (0, 4, 5, 6)
    assert Window(start=time(22), end=time(0)).holds(datetime(2026, 1, 1, 23, 59))
    with pytest.raises(InvalidTrigger, match="ends after it starts"):
        Window(start=time(17), end=time(9))
    with pytest.raises(InvalidTrigger, match="bad days"):
        Window(start=time(9), end=time(17), days="MONDAY")


def test_specs_survive_json_and_refuse_settings_of_their_own() -> None:
    union = Specs(
        specs=(Cron("0 9 * * *", tz="Asia/Tokyo"), Repeating(interval=timedelta(hours=5))),
        exclude=Exclusions(windows=WINDOWS),
        tz="Europe/Paris",
        misfire=Misfire.SKIP,
    ).anchored(T0)
    adapter: TypeAdapter[AnyTrigger] = TypeAdapter(AnyTrigger)
    again = adapter.validate_json(adapter.dump_json(union))
    assert again == union and isinstance(again, Specs)
    assert _walk(again, T0, T0 + timedelta(days=9)) == _walk(union, T0, T0 + timedelta(days=9))
    assert union.describe().startswith("any of: cron 0 9 * * * Asia/Tokyo; every 5h from")
    with pytest.raises(InvalidTrigger, match="misfire is a setting of the whole schedule"):
        Specs(specs=(Cron("0 9 * * *", misfire=Misfire.SKIP),))
    with pytest.raises(InvalidTrigger, match="specs"):
        Specs(specs=())
    with pytest.raises(InvalidTrigger, match="unknown timezone"):
        Specs(specs=(Cron("0 9 * * *"),), tz="Mars/Olympus")


@settings(max_examples=200, deadline=None)
@given(
    missed=st.integers(2, 300),
    bound=st.integers(1, 100),
    window_min=st.integers(1, 400),
)
def test_catch_up_runs_the_newest_within_the_window_and_the_bound(
    missed: int, bound: int, window_min: int
) -> None:
    trigger = Repeating(
        interval=timedelta(minutes=1),
        misfire=Misfire.CATCH_UP,
        max_catch_up=bound,
        catch_up_window=timedelta(minutes=window_min, seconds=30),
    ).anchored(T0)
    now = T0 + timedelta(minutes=missed, seconds=1)
    ran: list[int] = []
    stepped_over = 0
    fire = trigger.following(T0, 0, now)
    while fire is not None and fire.at <= now:
        ran.append(fire.occurrence)
        stepped_over += fire.misfires
        fire = trigger.following(fire.at, fire.occurrence, now)
    in_window = min(missed, window_min + 1)  # occurrences 1..missed, those of the last minutes
    assert len(ran) == min(in_window, bound)
    assert ran == list(range(missed - len(ran) + 1, missed + 1)), "the newest, in order"
    assert stepped_over == missed - len(ran), "every other one is counted as dropped"
