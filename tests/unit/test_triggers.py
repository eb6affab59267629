"""Trigger arithmetic: examples, properties (hypothesis) and a brute-force DST oracle."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.zones import ZONES
from tickwork.triggers import Cron, Misfire, Repeating, RunOnce
from tickwork.triggers.base import Fire

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
EXPRESSIONS = ["0 * * * *", "30 1 * * *", "30 2 * * *", "0 0 * * *", "*/15 * * * *", "45 2 * * *"]
MAX_SHIFT = timedelta(hours=3)


# -- examples --------------------------------------------------------------------------------


def test_run_once_at_and_delay() -> None:
    assert RunOnce(at=T0).first(T0 - timedelta(hours=1)) == (T0, 0, 0)
    anchored = RunOnce(delay=timedelta(seconds=30)).anchored(T0)
    assert anchored.first(T0) == (T0 + timedelta(seconds=30), 0, 0)
    assert RunOnce(at=T0).following(T0, 0, T0) is None
    late = RunOnce(at=T0).first(T0 + timedelta(days=3))
    assert late is not None and late.at == T0, "a late one-off still runs"


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        RunOnce(at=datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="timezone-aware"):
        Repeating(interval=timedelta(seconds=1), start=datetime(2026, 1, 1))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"expr": "61 * * * *"}, "invalid cron"),
        ({"expr": "* * *"}, "fields"),
        ({"expr": "0 0 30 2 *"}, "never fires"),
        ({"expr": "* * * * *", "tz": "Mars/Olympus"}, "unknown timezone"),
    ],
)
def test_bad_cron_is_one_clear_error(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Cron(**kwargs)


def test_bad_repeating_is_refused() -> None:
    with pytest.raises(ValueError):
        Repeating(interval=timedelta(0))
    with pytest.raises(ValueError):
        Repeating(interval=timedelta(seconds=1), repeat_count=0)


def test_quartz_seconds_first_with_question_mark() -> None:
    cron = Cron("*/5 * * * * ?")
    fires = []
    t = T0
    for _ in range(3):
        fire = cron.following(t, 0, t)
        assert fire is not None
        fires.append(fire.at)
        t = fire.at
    assert fires == [T0 + timedelta(seconds=5 * i) for i in (1, 2, 3)]


def test_quartz_numeric_days_of_week_start_on_sunday() -> None:
    # Quartz 2-6 is MON-FRI; T0 is a Sunday
    quartz = Cron("0 0 9 ? * 2-6")
    named = Cron("0 9 * * MON-FRI")
    assert quartz.first(T0) == named.first(T0)
    first = quartz.first(T0)
    assert first is not None and first.at.weekday() == 0


def test_repeating_has_no_drift_and_keeps_its_count() -> None:
    trigger = Repeating(interval=timedelta(minutes=10), repeat_count=3).anchored(T0)
    first = trigger.first(T0)
    assert first == (T0, 0, 0)
    # acked 7 minutes late: the next is still on the grid
    second = trigger.following(first.at, first.occurrence, T0 + timedelta(minutes=7))
    assert second == (T0 + timedelta(minutes=10), 1, 0)
    third = trigger.following(second.at, second.occurrence, second.at)
    assert third == (T0 + timedelta(minutes=20), 2, 0)
    assert trigger.following(third.at, third.occurrence, third.at) is None, "count is kept"


def test_repeating_end_is_kept_from_one_occurrence_to_the_next() -> None:
    trigger = Repeating(interval=timedelta(minutes=10), end=T0 + timedelta(minutes=25)).anchored(T0)
    fire = trigger.first(T0)
    seen = []
    while fire is not None:
        seen.append(fire.at)
        fire = trigger.following(fire.at, fire.occurrence, fire.at)
    assert seen == [T0 + timedelta(minutes=m) for m in (0, 10, 20)]


def test_misfire_policies_after_downtime() -> None:
    base = Repeating(interval=timedelta(minutes=1)).anchored(T0)
    back = T0 + timedelta(minutes=10, seconds=30)  # occurrences 1..10 were missed
    coalesce = base.following(T0, 0, back)
    assert coalesce == (back, 10, 9), "run once now, standing for the latest missed"
    after = base.following(coalesce.at, coalesce.occurrence, coalesce.at)
    assert after is not None and after.at == T0 + timedelta(minutes=11), "then back on the grid"
    skip = base.model_copy(update={"misfire": Misfire.SKIP}).following(T0, 0, back)
    assert skip == (T0 + timedelta(minutes=11), 11, 10)
    catch_up = base.model_copy(update={"misfire": Misfire.CATCH_UP})
    assert catch_up.following(T0, 0, back) == (T0 + timedelta(minutes=1), 1, 0)
    bounded = base.model_copy(update={"misfire": Misfire.CATCH_UP, "max_catch_up": 5})
    # beyond the bound the newest 5 run, the 5 before them are dropped (coalesced)
    assert bounded.following(T0, 0, back) == (T0 + timedelta(minutes=6), 6, 5)
    window = base.model_copy(
        update={"misfire": Misfire.CATCH_UP, "catch_up_window": timedelta(minutes=3)}
    )
    # only occurrences due within the last 3 minutes (8, 9 and 10) run
    assert window.following(T0, 0, back) == (T0 + timedelta(minutes=8), 8, 7)
    coalesce_window = base.model_copy(update={"catch_up_window": timedelta(minutes=3)})
    assert coalesce_window.following(T0, 0, back) == (back, 10, 9)
    assert "catch up within 3m" in window.describe()


def test_cron_misfire_coalesce_then_grid() -> None:
    cron = Cron("*/10 * * * *")
    back = T0 + timedelta(hours=2, minutes=3)
    fire = cron.following(T0, 0, back)
    assert fire is not None and fire.at == back and fire.misfires == 11
    nxt = cron.following(fire.at, fire.occurrence, fire.at)
    assert nxt is not None and nxt.at == T0 + timedelta(hours=2, minutes=10)


def test_late_but_single_occurrence_is_not_a_misfire() -> None:
    cron = Cron("0 * * * *")
    fire = cron.following(T0, 0, T0 + timedelta(hours=1, minutes=5))
    assert fire == (T0 + timedelta(hours=1), 1, 0)


def test_dst_worked_example_from_the_docstring() -> None:
    zone = ZoneInfo("America/New_York")
    start = datetime(2026, 11, 1, 0, 0, tzinfo=zone)
    fixed = list(
        _fires(Cron("30 1 * * *", tz="America/New_York"), start, start + timedelta(hours=4))
    )
    interval = list(
        _fires(Cron("30 * * * *", tz="America/New_York"), start, start + timedelta(hours=3))
    )
    assert [f.astimezone(UTC).hour for f in fixed] == [5]
    assert [f.astimezone(UTC).hour for f in interval] == [4, 5, 6, 7]


def test_spring_forward_gap_fires_fixed_time_at_the_end_of_the_gap() -> None:
    zone = ZoneInfo("America/New_York")
    start = datetime(2026, 3, 8, 0, 0, tzinfo=zone)
    fires = list(
        _fires(Cron("30 2 * * *", tz="America/New_York"), start, start + timedelta(hours=6))
    )
    assert fires == [datetime(2026, 3, 8, 7, 0, tzinfo=UTC)]  # 03:00 EDT


# -- the oracle ------------------------------------------------------------------------------


def _fires(cron: Cron, start: datetime, end: datetime) -> list[datetime]:
    out: list[datetime] = []
    t = start.astimezone(UTC)
    while True:
        fire = cron.following(t, 0, t)
        if fire is None or fire.at > end:
            return out
        out.append(fire.at)
        t = fire.at


def _matcher(expr: str):  # type: ignore[no-untyped-def]
    """A plain field-set matcher for 5-field expressions (independent of croniter iteration)."""
    minutes, hours, days, months, weekdays = croniter.expand(expr)[0]

    def allowed(values: Sequence[object], value: int) -> bool:
        return values == ["*"] or value in values

    def match(wall: datetime) -> bool:
        return (
            allowed(minutes, wall.minute)
            and allowed(hours, wall.hour)
            and allowed(days, wall.day)
            and allowed(months, wall.month)
            and allowed(weekdays, (wall.weekday() + 1) % 7)
        )

    return match


def _oracle(
    expr: str,
    tz: str,
    start: datetime,
    end: datetime,
    gap: str | None = None,
    repeat: str | None = None,
) -> list[datetime]:
    """Walk UTC minutes, map each to wall time, apply the documented DST rules (the
    schedule's ``gap`` and ``repeat`` policies, or the defaults of its kind)."""
    zone = ZoneInfo(tz)
    matches = _matcher(expr)
    interval = "*" in expr.split()[1]
    gap = gap or ("skip" if interval else "shift")
    repeat = repeat or ("both" if interval else "first")
    fires: list[datetime] = []
    u = start.astimezone(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
    previous_wall = (u - timedelta(minutes=1)).astimezone(zone).replace(tzinfo=None)
    while u <= end:
        local = u.astimezone(zone)
        wall = local.replace(tzinfo=None)
        fire = False
        if matches(wall):
            ambiguous = (
                wall.replace(tzinfo=zone, fold=0).utcoffset()
                != wall.replace(tzinfo=zone, fold=1).utcoffset()
            )
            pass_ = "first" if local.fold == 0 else "last"
            fire = not ambiguous or repeat in ("both", pass_)
        skipped = wall - previous_wall - timedelta(minutes=1)
        if not fire and gap == "shift" and timedelta(0) < skipped <= MAX_SHIFT:
            w = previous_wall + timedelta(minutes=1)
            while w < wall and not fire:
                fire = matches(w)
                w += timedelta(minutes=1)
        if fire:
            fires.append(u)
        previous_wall = wall
        u += timedelta(minutes=1)
    return fires


def _transitions(tz: str, year: int) -> list[datetime]:
    zone = ZoneInfo(tz)
    found = []
    t = datetime(year, 1, 1, tzinfo=UTC)
    offset = t.astimezone(zone).utcoffset()
    while t.year == year:
        nxt = t + timedelta(hours=1)
        if nxt.astimezone(zone).utcoffset() != offset:
            found.append(nxt)
            offset = nxt.astimezone(zone).utcoffset()
        t = nxt
    return found


@pytest.mark.parametrize("tz", ZONES)
def test_cron_matches_the_brute_force_oracle_around_every_transition(tz: str) -> None:
    transitions = _transitions(tz, 2026) or [datetime(2026, 6, 1, tzinfo=UTC)]
    expressions = EXPRESSIONS if tz != "Pacific/Chatham" else [*EXPRESSIONS, "45 3 * * *"]
    for transition in transitions:
        start, end = transition - timedelta(days=2), transition + timedelta(days=2)
        for expr in expressions:
            got = _fires(Cron(expr, tz=tz), start, end)
            want = _oracle(expr, tz, start, end)
            assert got == want, f"{expr!r} in {tz} around {transition}"


@pytest.mark.parametrize("tz", [z for z in ZONES if _transitions(z, 2026)])
def test_every_dst_policy_matches_the_oracle_around_every_transition(tz: str) -> None:
    """Each combination of gap (shift, skip) and repeat (first, last, both), on fixed-time
    and interval expressions, in every zone with DST changes (12, with Lord Howe's 30
    minutes, Santiago's, Cairo's and Havana's at midnight)."""
    expressions = ["30 1 * * *", "30 2 * * *", "0 0 * * *", "*/15 * * * *", "0 * * * *"]
    for transition in _transitions(tz, 2026):
        start, end = transition - timedelta(days=1), transition + timedelta(days=1)
        for expr in expressions:
            for gap in ("shift", "skip"):
                for repeat in ("first", "last", "both"):
                    cron = Cron(expr, tz=tz, dst_gap=gap, dst_repeat=repeat)
                    got = _fires(cron, start, end)
                    want = _oracle(expr, tz, start, end, gap, repeat)
                    assert got == want, f"{expr!r} in {tz} around {transition}, {gap}/{repeat}"


def test_dst_policies_on_the_new_york_fall_back_and_spring_forward() -> None:
    fall = datetime(2026, 10, 31, 12, tzinfo=UTC)
    first = [f.at.strftime("%H:%M") for f in _fires_n(Cron("30 1 * * *", tz=NY), fall, 2)]
    last = _fires_n(Cron("30 1 * * *", tz=NY, dst_repeat="last"), fall, 1)
    both = _fires_n(Cron("30 1 * * *", tz=NY, dst_repeat="both"), fall, 2)
    assert first == ["05:30", "06:30"]  # 01:30 EDT on the 1st, 01:30 EST on the 2nd
    assert [f.at for f in last] == [datetime(2026, 11, 1, 6, 30, tzinfo=UTC)]
    assert [f.at.hour for f in both] == [5, 6] and both[1].at.day == 1
    spring = datetime(2026, 3, 7, 12, tzinfo=UTC)
    shifted = _fires_n(Cron("30 2 * * *", tz=NY), spring, 1)[0]
    skipped = _fires_n(Cron("30 2 * * *", tz=NY, dst_gap="skip"), spring, 1)[0]
    assert shifted.at == datetime(2026, 3, 8, 7, 0, tzinfo=UTC)  # 03:00 EDT
    assert skipped.at == datetime(2026, 3, 9, 6, 30, tzinfo=UTC)  # next day, 02:30 EDT
    quarter = _fires_n(Cron("*/15 * * * *", tz=NY, dst_gap="shift"), spring, 200)
    at_three = [f for f in quarter if f.at == datetime(2026, 3, 8, 7, 0, tzinfo=UTC)]
    assert len(at_three) == 1, "the gap's four wall times shifted to its end run once there"


NY = "America/New_York"


def _fires_n(cron: Cron, after: datetime, n: int) -> list[Fire]:
    out: list[Fire] = []
    t = after
    for _ in range(n):
        fire = cron.following(t, 0, t)
        assert fire is not None
        out.append(fire)
        t = fire.at
    return out


def test_fixed_time_daily_fires_at_most_once_per_local_day_in_apia() -> None:
    zone = ZoneInfo("Pacific/Apia")  # skipped 2011-12-30 entirely
    start = datetime(2011, 12, 27, tzinfo=zone)
    fires = _fires(Cron("0 9 * * *", tz="Pacific/Apia"), start, start + timedelta(days=7))
    days = [f.astimezone(zone).date() for f in fires]
    assert len(days) == len(set(days)) == 6


# -- properties ------------------------------------------------------------------------------

times = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2037, 12, 31), timezones=st.just(UTC)
)
cron_fields = st.tuples(
    st.sampled_from(["*", "0", "*/7", "15,45", "5-10"]),
    st.sampled_from(["*", "2", "*/3", "1-4", "9"]),
    st.sampled_from(["*", "1", "15", "28"]),
    st.sampled_from(["*", "3", "*/2"]),
    st.sampled_from(["*", "MON-FRI", "0", "SAT,SUN"]),
).map(" ".join)


@settings(max_examples=200, deadline=None)
@given(expr=cron_fields, tz=st.sampled_from(ZONES), t=times)
def test_cron_next_is_strictly_later_and_idempotent(expr: str, tz: str, t: datetime) -> None:
    cron = Cron(expr, tz=tz)
    fire = cron.following(t, 0, t)
    assert fire is not None and fire.at > t
    again = cron.following(
        fire.at - timedelta(microseconds=1), 0, fire.at - timedelta(microseconds=1)
    )
    assert again is not None and again.at == fire.at


@settings(max_examples=200, deadline=None)
@given(expr=cron_fields, tz=st.sampled_from(ZONES), t=times, gap=st.integers(1, 10**6))
def test_cron_next_is_monotone(expr: str, tz: str, t: datetime, gap: int) -> None:
    cron = Cron(expr, tz=tz)
    later = t + timedelta(seconds=gap)
    a, b = cron.following(t, 0, t), cron.following(later, 0, later)
    assert a is not None and b is not None and a.at <= b.at


@settings(max_examples=300, deadline=None)
@given(
    seconds=st.integers(1, 400 * 86400),
    start=times,
    steps=st.integers(1, 50),
    lag=st.floats(0, 0.99),
)
def test_repeating_stays_on_its_grid(seconds: int, start: datetime, steps: int, lag: float) -> None:
    interval = timedelta(seconds=seconds)
    trigger = Repeating(interval=interval).anchored(start)
    fire = trigger.first(start)
    assert fire is not None
    for k in range(1, steps):
        now = fire.at + interval * lag  # each ack arrives late, but before the next is due
        fire = trigger.following(fire.at, fire.occurrence, now)
        assert fire is not None and fire.at == start + k * interval and fire.occurrence == k


@settings(max_examples=200, deadline=None)
@given(missed=st.integers(2, 300), bound=st.integers(1, 100))
def test_catch_up_is_bounded(missed: int, bound: int) -> None:
    trigger = Repeating(
        interval=timedelta(minutes=1), misfire=Misfire.CATCH_UP, max_catch_up=bound
    ).anchored(T0)
    now = T0 + timedelta(minutes=missed, seconds=1)
    runs = 0
    fire = trigger.following(T0, 0, now)
    while fire is not None and fire.at <= now:
        runs += 1
        fire = trigger.following(fire.at, fire.occurrence, now)
    assert runs == min(missed, bound)  # beyond the bound: the newest ``bound`` of them


@settings(max_examples=100, deadline=None)
@given(expr=cron_fields, tz=st.sampled_from(ZONES))
def test_triggers_survive_json(expr: str, tz: str) -> None:
    from pydantic import TypeAdapter

    from tickwork.triggers import AnyTrigger

    adapter: TypeAdapter[object] = TypeAdapter(AnyTrigger)
    for trigger in (
        Cron(expr, tz=tz, jitter=timedelta(seconds=2)),
        Repeating(interval=timedelta(seconds=3), repeat_count=4).anchored(T0),
        RunOnce(at=T0),
    ):
        dumped = trigger.model_dump_json(exclude_defaults=True)
        assert adapter.validate_json(dumped) == trigger


quartz_days = st.lists(st.integers(1, 7), min_size=1, max_size=3, unique=True)
NAMES = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]


@settings(max_examples=150, deadline=None)
@given(
    second=st.integers(0, 59),
    minute=st.integers(0, 59),
    hour=st.sampled_from(["*", "3", "14", "*/5"]),
    days=quartz_days,
    tz=st.sampled_from(ZONES),
    t=times,
)
def test_quartz_numeric_days_equal_named_days(
    second: int, minute: int, hour: str, days: list[int], tz: str, t: datetime
) -> None:
    numeric = Cron(f"{second} {minute} {hour} ? * {','.join(map(str, days))}", tz=tz)
    named = Cron(f"{second} {minute} {hour} ? * {','.join(NAMES[d - 1] for d in days)}", tz=tz)
    a, b = numeric.following(t, 0, t), named.following(t, 0, t)
    assert a is not None and b is not None and a.at == b.at
    assert a.at.astimezone(ZoneInfo(tz)).second == second or a.at > t


# -- describing a trigger --------------------------------------------------------------------


def test_triggers_describe_themselves_as_a_person_writes_them() -> None:
    start = datetime(2030, 1, 1, tzinfo=UTC)
    assert Cron("0 9 * * MON-FRI", tz="Europe/Paris").describe() == (
        "cron 0 9 * * MON-FRI Europe/Paris"
    )
    assert Repeating(
        interval=timedelta(hours=1, minutes=30),
        start=start,
        repeat_count=5,
        misfire=Misfire.CATCH_UP,
    ).describe() == ("every 1h30m from 2030-01-01 00:00:00 UTC, 5 runs, misfire catch_up")
    assert Repeating(interval=timedelta(milliseconds=250)).describe() == "every 250ms"
    assert Repeating(interval=timedelta(days=1), delay=timedelta(minutes=5)).describe() == (
        "every 1d after 5m"
    )
    assert RunOnce(at=start).describe() == "once at 2030-01-01 00:00:00 UTC"
    assert RunOnce(delay=timedelta(minutes=10)).describe() == "once after 10m"
    assert RunOnce().describe() == "once, now"
    assert (
        Cron("*/5 * * * * ?", jitter=timedelta(seconds=2), end=start).describe()
        == "cron */5 * * * * ? UTC, until 2030-01-01 00:00:00 UTC, jitter 2s"
    )
    assert Cron("* * * * *", tz="Asia/Tokyo").zone == "Asia/Tokyo"
    assert Repeating(interval=timedelta(hours=1)).zone == "UTC"


def test_a_year_field_far_ahead_or_in_the_past() -> None:
    """A match decades away is found (croniter's own search stops at 50 years); a year in
    the past leaves nothing to fire: None, not a library exception."""
    far = Cron("0 0 0 1 1 ? 2099")
    fire = far.first(datetime(2026, 1, 1, tzinfo=UTC))
    assert fire is not None and fire.at == datetime(2099, 1, 1, tzinfo=UTC)
    soon = Cron("0 0 0 1 1 ? 2030")
    for start in (datetime(2026, 1, 1, tzinfo=UTC), datetime(2029, 12, 31, tzinfo=UTC)):
        fire = soon.first(start)
        assert fire is not None and fire.at == datetime(2030, 1, 1, tzinfo=UTC)
    assert soon.first(datetime(2030, 1, 2, tzinfo=UTC)) is None
    assert (
        soon.following(datetime(2030, 1, 1, tzinfo=UTC), 0, datetime(2030, 1, 1, tzinfo=UTC))
        is None
    )
    with pytest.raises(ValueError, match="never fires"):
        Cron("0 0 30 2 *")


# -- Quartz's "last" forms, against a day-by-day oracle --------------------------------------


def _month_days(year: int, month: int) -> list[date]:
    first = date(year, month, 1)
    return [
        first + timedelta(days=i) for i in range(31) if (first + timedelta(days=i)).month == month
    ]


def _last_forms_oracle(form: str, year: int, month: int) -> date | None:
    """The day a form names in a month, by walking the month's days (not by arithmetic)."""
    days = _month_days(year, month)
    if form == "L":
        return days[-1]
    if form == "LW":
        return [d for d in days if d.weekday() < 5][-1]
    if form.startswith("L-"):
        offset = int(form[2:])
        return days[-1 - offset] if offset < len(days) else None
    weekday = int(form[:-1])  # "nL", standard numbering: 0 = Sunday
    return [d for d in days if (d.weekday() + 1) % 7 == weekday][-1]


@pytest.mark.parametrize(
    ("expr", "form"),
    [
        ("0 9 L * *", "L"),
        ("0 9 LW * *", "LW"),
        ("0 9 L-3 * *", "L-3"),
        ("0 9 L-30 * *", "L-30"),
        ("0 9 * * 5L", "5L"),
        ("0 9 * * 0L", "0L"),
        ("0 0 9 LW * ?", "LW"),  # Quartz, seconds first
        ("0 0 9 L-1 * ?", "L-1"),
        ("0 0 9 ? * 6L", "5L"),  # Quartz numbering: 6 = Friday
        ("0 0 9 ? * 1L", "0L"),  # 1 = Sunday
    ],
)
def test_quartz_last_forms_match_the_oracle_for_three_years(expr: str, form: str) -> None:
    cron = Cron(expr, tz="Europe/Paris")
    zone = ZoneInfo("Europe/Paris")
    fired = _fires(cron, datetime(2026, 1, 1, tzinfo=UTC), datetime(2029, 1, 1, tzinfo=UTC))
    want = [
        day
        for year in (2026, 2027, 2028)
        for month in range(1, 13)
        if (day := _last_forms_oracle(form, year, month)) is not None
    ]
    assert [f.astimezone(zone).date() for f in fired] == want
    assert all(f.astimezone(zone).hour == 9 for f in fired)


def test_bad_last_forms_are_one_clear_error() -> None:
    for expr in ("0 0 L-31 * *", "0 0 L-0 * *", "0 0 LX * *", "0 0 * * 8L"):
        with pytest.raises(ValueError, match=r"invalid cron expression|offset must be"):
            Cron(expr)


# -- what repeat_count counts ----------------------------------------------------------------


def _runs_of_a_late_series(trigger: Repeating, late: timedelta) -> list[int]:
    """Plan a series the way workers do (the chain's misfires carried along), with the
    first run ``late`` after its start and the rest on time: the occurrence numbers run."""
    start = trigger.start
    assert start is not None
    fire = trigger.first(start + late)
    runs: list[int] = []
    misfires = 0
    while fire is not None:
        runs.append(fire.occurrence)
        misfires += fire.misfires
        fire = trigger.with_misfires(misfires).following(fire.at, fire.occurrence, fire.at)
    return runs


def test_repeat_count_counts_grid_slots_by_default_and_runs_on_request() -> None:
    """The report: ``Repeating(interval=1 s, repeat_count=6)`` with the worker 2.8 s late
    ran fewer than 6 times. By default the count is of grid slots (the three missed
    slots are coalesced into one run: 4 runs), as the guide now says; with
    ``count_missed=False`` exactly 6 runs happen, the grid extended by what was missed."""
    start = datetime(2026, 1, 1, tzinfo=UTC)
    slots = Repeating(interval=timedelta(seconds=1), repeat_count=6, start=start)
    assert _runs_of_a_late_series(slots, timedelta(seconds=2.8)) == [2, 3, 4, 5]
    runs = slots.model_copy(update={"count_missed": False})
    assert _runs_of_a_late_series(runs, timedelta(seconds=2.8)) == [2, 3, 4, 5, 6, 7]
    skip = runs.model_copy(update={"misfire": Misfire.SKIP})
    assert len(_runs_of_a_late_series(skip, timedelta(seconds=2.8))) == 6
    on_time = _runs_of_a_late_series(runs, timedelta(0))
    assert on_time == [0, 1, 2, 3, 4, 5], "without misfires both meanings agree"
    assert runs.describe().endswith("6 runs however late")


def test_whether_a_cron_expression_fires_is_searched_once_per_process() -> None:
    from tickwork.triggers import cron

    cron._ever_fires.cache_clear()
    for _ in range(3):
        Cron("*/5 * * * *", tz="Europe/Paris")
        with pytest.raises(ValueError, match="never fires"):
            Cron("0 0 30 2 *")
    info = cron._ever_fires.cache_info()
    assert (info.misses, info.hits) == (2, 4), "one search each, then remembered"
