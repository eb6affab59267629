"""``Cron``: cron expressions in a timezone, correct across DST changes.

Expressions are matched by croniter on *wall-clock* time in ``tz``; this module maps wall
times to instants. Two kinds of schedules behave differently across a DST change, as in
Vixie cron (and as users of celery#10107 expect):

- **Fixed-time** schedules, whose hour field has no ``*`` (``30 2 * * *``): once per local
  day. A wall time that falls in a spring-forward gap fires at the first instant after
  the gap (02:30 -> 03:00); a wall time repeated by a fall-back fires on its first pass.
- **Interval** schedules, whose hour field has a ``*`` (``*/15 * * * *``,
  ``0 * * * *``): elapsed real time. Wall times in a gap do not exist and do not fire;
  wall times repeated by a fall-back fire on both passes.

Worked example (America/New_York, 2026-11-01, clocks go 01:59:59 EDT -> 01:00:00 EST):
``30 1 * * *`` fires at 01:30 EDT (05:30 UTC) only; ``30 * * * *`` fires at 01:30 EDT
(05:30 UTC) and again at 01:30 EST (06:30 UTC).

Those are the defaults; a schedule may choose its own DST policy: ``dst_gap`` for a wall
time that does not exist, ``"shift"`` (run at the first instant after the gap) or
``"skip"``; ``dst_repeat`` for a wall time that occurs twice, ``"first"``, ``"last"`` or
``"both"``. Several wall times of one gap shifted to its end run once there.

Syntax: standard 5 fields (minute first), or Quartz-style 6 fields with seconds first
(``*/5 * * * * ?``) where ``?`` means "no specific value" and numeric days of week run
1 (SUN) to 7 (SAT) as in Quartz; names (``MON-FRI``) mean the same in both forms.
Quartz's "last" forms work in both: ``L`` (the month's last day), ``LW`` (its last
weekday, Monday to Friday), ``L-3`` (three days before its last day), ``15W`` (the
weekday nearest the 15th) in the day-of-month field, and ``6L`` in Quartz numbering or
``5L`` in standard numbering (the month's last Friday) in the day-of-week field.
croniter has no ``LW`` or ``L-n``: those expressions are matched on a superset of days,
filtered to the exact day here.
"""

from __future__ import annotations

import calendar
import copy
import re
from datetime import UTC, date, datetime, timedelta
from functools import cached_property, lru_cache
from typing import Any, Literal, NamedTuple
from zoneinfo import ZoneInfo

from croniter import CroniterBadDateError, croniter
from pydantic import field_validator, model_validator

from tickwork.triggers.base import Fire, Trigger
from tickwork.triggers.fires import known_zone

_MAX_DST_SHIFT = timedelta(hours=3)
#: how far croniter searches for the next match: past the last year it accepts (2099), so a
#: valid expression whose next match is decades away is found, not an error
_SEARCH_YEARS = 200


def _quartz_day_of_week(field: str) -> str:
    """Translate Quartz numeric days of week (1=SUN..7=SAT) to cron's (0=SUN..6=SAT)."""

    def shift_numbers(part: str) -> str:
        return re.sub(r"\d+", lambda m: str(int(m.group()) - 1), part)

    items = []
    for item in field.split(","):
        base, slash, step = item.partition("/")
        if "#" in base:
            day, _, nth = base.partition("#")
            base = f"{shift_numbers(day)}#{nth}"
        else:
            base = shift_numbers(base)
        items.append(base + slash + step)
    return ",".join(items)


_LAST_DAY_OF_WEEK = re.compile(r"^([0-7])L$")
_LAST_MINUS = re.compile(r"^L-(\d{1,2})$")


class Parsed(NamedTuple):
    """An expression as croniter takes it, and what croniter cannot say itself."""

    expr: str
    seconds_first: bool
    interval: bool  # the hour field has a ``*``
    day_rule: str | None = None  # "LW" or "L-n": croniter matches a superset of days


def _day_of_month(field: str) -> tuple[str, str | None]:
    """(croniter's field, rule) for Quartz's ``LW`` and ``L-n``, which croniter lacks:
    a range of days that holds the day in every month, and the rule that picks it."""
    upper = field.upper()
    if upper == "LW":
        return "26-31", "LW"  # the last weekday is one of the last three days
    minus = _LAST_MINUS.match(upper)
    if minus:
        offset = int(minus.group(1))
        if not 1 <= offset <= 30:
            raise ValueError(f"L-{offset}: the offset must be 1 to 30")
        return f"{max(1, 28 - offset)}-{31 - offset}", upper
    return field, None


def _day_of_week(field: str) -> str:
    """``5L`` (the last Friday) as croniter writes it: ``L5``."""
    last = _LAST_DAY_OF_WEEK.match(field.upper())
    return f"L{last.group(1)}" if last else field


def rule_matches(rule: str, day: date) -> bool:
    """Whether ``day`` is the one ``rule`` ("LW" or "L-n") names in its month."""
    last = calendar.monthrange(day.year, day.month)[1]
    if rule == "LW":
        weekday = date(day.year, day.month, last).weekday()  # 5 = Saturday, 6 = Sunday
        return day.day == last - max(0, weekday - 4)
    return day.day == last - int(rule[2:])


@lru_cache(maxsize=1024)
def _parsed_walls(expr: str, seconds_first: bool) -> croniter:
    """croniter's parse of ``expr`` (0.35 ms of building one, each time: its expansion);
    a search takes a copy, set to its own start (croniter copies what its steps change)."""
    return croniter(
        expr,
        datetime(2000, 1, 1),
        second_at_beginning=seconds_first,
        max_years_between_matches=_SEARCH_YEARS,
    )


#: the nicknames cron implementations share (Vixie cron's), as the 5 fields they stand for
MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


def expand_macro(expr: str) -> str:
    """``expr`` with a nickname (``@hourly``, ``@daily``, ``@weekly``, ``@monthly``,
    ``@yearly``) replaced by its 5 fields; anything else as given (stripped). ``@reboot``
    has no time: ``ValueError``."""
    text = expr.strip()
    if not text.startswith("@"):
        return text
    fields = MACROS.get(text.lower())
    if fields is None:
        raise ValueError(f"cron nickname {text!r} is not one of {', '.join(sorted(MACROS))}")
    return fields


@lru_cache(maxsize=4096)
def normalise_expression(expr: str) -> Parsed:
    """The expression as croniter takes it, or ``ValueError`` (remembered per expression:
    every decoded cron message asks)."""
    fields = expr.split()
    if len(fields) == 5:
        day_field, week_field = 2, 4
        seconds_first = False
    elif len(fields) in (6, 7):
        day_field, week_field = 3, 5
        fields[5] = _quartz_day_of_week(fields[5])
        seconds_first = True
    else:
        raise ValueError(
            f"cron expression {expr!r} has {len(fields)} fields; expected 5 "
            "(min hour day month weekday) or 6 with seconds first (sec min hour day month weekday)"
        )
    fields[day_field], rule = _day_of_month(fields[day_field])
    fields[week_field] = _day_of_week(fields[week_field])
    normalised = " ".join(fields)
    if not croniter.is_valid(normalised, second_at_beginning=seconds_first):
        raise ValueError(f"invalid cron expression {expr!r}{_which_field(expr, fields)}")
    return Parsed(normalised, seconds_first, "*" in fields[day_field - 1], rule)


#: each field of a 5-field expression: its name and the values it takes
_FIELDS = (
    ("minute", "0-59"),
    ("hour", "0-23"),
    ("day-of-month", "1-31, L, LW, nW"),
    ("month", "1-12 or JAN-DEC"),
    ("day-of-week", "0-7 or SUN-SAT, nL, n#k"),
)
_SECONDS = ("second", "0-59")


def _which_field(expr: str, normalised: list[str]) -> str:
    """``: the hour field '25' takes 0-23`` for the first field croniter refuses alone
    (the others left as ``*``); empty when each is valid on its own."""
    quartz = (_SECONDS, *_FIELDS[:4], ("day-of-week", "1-7 or SUN-SAT, nL, n#k"))
    named = _FIELDS if len(normalised) == 5 else quartz
    given = expr.split()
    for index, (name, values) in enumerate(named):
        probe = ["*"] * len(normalised)
        probe[index] = normalised[index]
        if not croniter.is_valid(" ".join(probe), second_at_beginning=len(normalised) > 5):
            return f": the {name} field {given[index]!r} takes {values}"
    return ""


class Cron(Trigger):
    """Fire on a cron expression in timezone ``tz`` (an IANA name such as ``Europe/Paris``)."""

    kind: Literal["cron"] = "cron"
    expr: str
    tz: str = "UTC"
    #: a wall time in a spring-forward gap: "shift" to the first instant after it, or
    #: "skip"; None: shift for fixed-time schedules, skip for interval ones
    dst_gap: Literal["shift", "skip"] | None = None
    #: a wall time repeated by a fall-back: run on the "first" pass, the "last", or "both";
    #: None: first for fixed-time schedules, both for interval ones
    dst_repeat: Literal["first", "last", "both"] | None = None

    def __init__(self, expr: str | None = None, /, **data: Any) -> None:
        if expr is not None:
            data["expr"] = expr
        super().__init__(**data)

    @field_validator("tz")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        return known_zone(value)

    @field_validator("expr")
    @classmethod
    def _valid_expr(cls, value: str) -> str:
        expanded = expand_macro(value)  # stored as its fields: what it means, plainly
        normalise_expression(expanded)
        return expanded

    @model_validator(mode="after")
    def _has_a_match(self) -> Cron:
        """Refuse an expression that never fires (``_ever_fires``)."""
        if not _ever_fires(self.expr, self.tz, self.dst_gap, self.dst_repeat):
            raise ValueError(f"cron expression {self.expr!r} never fires")
        return self

    @cached_property
    def _parsed(self) -> Parsed:
        return normalise_expression(self.expr)

    @cached_property
    def _zone(self) -> ZoneInfo:
        return ZoneInfo(self.tz)

    @property
    def zone(self) -> str:
        return self.tz

    def _describe_own(self) -> str:
        text = f"cron {self.expr} {self.tz}"
        if self.dst_gap is not None:
            text += f", dst gap {self.dst_gap}"
        if self.dst_repeat is not None:
            text += f", dst repeat {self.dst_repeat}"
        return text

    @property
    def interval(self) -> bool:
        """An interval schedule (its hour field has a ``*``), else a fixed-time one."""
        return self._parsed.interval

    @property
    def gap_policy(self) -> Literal["shift", "skip"]:
        """What a wall time in a spring-forward gap does (the default resolved)."""
        return self.dst_gap or ("skip" if self.interval else "shift")

    @property
    def repeat_policy(self) -> Literal["first", "last", "both"]:
        """Which passes of a wall time repeated by a fall-back fire (default resolved)."""
        return self.dst_repeat or ("both" if self.interval else "first")

    def _candidate(self, now: datetime) -> Fire | None:
        at = self._next_or_none(now)
        return None if at is None else Fire(at, 0)

    def _after(self, at: datetime, occurrence: int) -> Fire | None:
        nxt = self._next_or_none(at)
        return None if nxt is None else Fire(nxt, occurrence + 1)

    def _next_or_none(self, t: datetime) -> datetime | None:
        """The next firing instant, or None when the expression has no match left (a year
        field in the past: ``0 0 0 1 1 ? 2030`` after 2030)."""
        try:
            return self._next_instant(t)
        except CroniterBadDateError:
            return None

    # -- wall time <-> instants ----------------------------------------------------------

    def _instants(self, wall: datetime) -> list[datetime]:
        """The instants at which wall time ``wall`` fires, in order (maybe none)."""
        zone = self._zone
        first = wall.replace(tzinfo=zone, fold=0)
        second = wall.replace(tzinfo=zone, fold=1)
        as_utc = first.astimezone(UTC)
        if as_utc.astimezone(zone).replace(tzinfo=None) != wall:  # in a spring-forward gap
            low, high = second.astimezone(UTC), as_utc
            if self.gap_policy == "skip" or high - low > _MAX_DST_SHIFT:
                return []  # skipped, or a skipped calendar day (Pacific/Apia 2011)
            return [self._transition(low, high)]
        if first.utcoffset() != second.utcoffset():  # repeated by a fall-back
            policy = self.repeat_policy
            if policy == "both":
                return [as_utc, second.astimezone(UTC)]
            if policy == "last":
                return [second.astimezone(UTC)]
        return [as_utc]

    def _transition(self, low: datetime, high: datetime) -> datetime:
        """The instant in (low, high] where the zone's offset changes (bisection to 1 s)."""
        zone = self._zone
        before = low.astimezone(zone).utcoffset()
        while high - low > timedelta(seconds=1):
            middle = low + (high - low) / 2
            if middle.astimezone(zone).utcoffset() == before:
                low = middle
            else:
                high = middle
        return high.replace(microsecond=0)

    def _next_instant(self, t: datetime) -> datetime:
        """The first firing instant strictly after ``t``.

        Wall candidates come from croniter in wall order, starting early enough that a wall
        time repeated by a fall-back shortly after ``t`` is not missed. The earliest
        instant of each candidate never decreases in wall order, so the search stops at the
        first candidate that starts after the best instant found.
        """
        t = t.astimezone(UTC)
        zone = self._zone
        offsets = [
            t.astimezone(zone).utcoffset(),
            (t + _MAX_DST_SHIFT).astimezone(zone).utcoffset(),
        ]
        smallest = min(o for o in offsets if o is not None)
        start_wall = t.replace(tzinfo=None) + smallest - timedelta(seconds=1)
        expr, seconds_first, _, rule = self._parsed
        walls = copy.copy(_parsed_walls(expr, seconds_first))
        walls.set_current(start_wall, force=True)
        best: datetime | None = None
        while True:
            try:
                wall: datetime = walls.get_next(datetime)
            except CroniterBadDateError:  # no later match: the best found is the last one
                if best is None:
                    raise
                return best
            if rule is not None and not rule_matches(rule, wall.date()):
                continue
            instants = self._instants(wall)
            if best is not None and instants and instants[0] > best:
                return best
            for instant in instants:
                if instant > t and (best is None or instant < best):
                    best = instant
            if best is not None and wall - start_wall > timedelta(days=1) + _MAX_DST_SHIFT:
                return best


@lru_cache(maxsize=4096)
def _ever_fires(expr: str, tz: str, dst_gap: str | None, dst_repeat: str | None) -> bool:
    """Whether a cron with these fields fires at all after 1970: asked once per process
    for each (the search took 2.2 ms, and every decoded cron message is validated)."""
    probe = Cron.model_construct(expr=expr, tz=tz, dst_gap=dst_gap, dst_repeat=dst_repeat)
    try:
        probe._next_instant(datetime(1970, 1, 1, tzinfo=UTC))
    except (ValueError, KeyError):  # croniter: no match in range
        return False
    return True
