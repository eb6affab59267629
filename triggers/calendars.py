"""Calendar exclusions: dates on which a schedule does not run, and the times of day it
may run at.

``Exclusions`` is stored with the trigger (so every worker applies the same rule): single
dates, inclusive date ranges, and optionally the public holidays of a country (or of a
subdivision, ``"US-CA"``) from the ``holidays`` package, which is then needed wherever the
trigger is planned (``pip install 'tickwork[holidays]'``). Dates are wall dates in the
trigger's timezone. A ``holidays`` calendar object may be given instead of its code.
``windows`` (business hours: ``Window(start=time(9), end=time(17), days="MON-FRI")``)
keep only the occurrences whose wall time falls inside one of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime, time, timedelta
from functools import cached_property
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from tickwork.triggers.errors import checked

_DAY_NAMES = ("MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN")


class Window(BaseModel):
    """A time of day a schedule may run in: from ``start`` (included) to ``end``
    (excluded) wall time, on ``days`` (``"MON-FRI"``, ``"SAT,SUN"``, or weekday numbers,
    0 for Monday; default every day). ``end`` of midnight (``time(0)``) is the end of the
    day; a window does not cross midnight (use two)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    start: time
    end: time
    days: tuple[int, ...] = (0, 1, 2, 3, 4, 5, 6)

    def __init__(
        self, start: time, end: time, days: str | Sequence[int] = (0, 1, 2, 3, 4, 5, 6)
    ) -> None:
        with checked("Window"):
            super().__init__(start=start, end=end, days=days)

    @field_validator("days", mode="before")
    @classmethod
    def _day_names(cls, value: Any) -> Any:
        return parse_days(value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _checked(self) -> Window:
        if any(not 0 <= day <= 6 for day in self.days) or not self.days:
            raise ValueError(f"a window's days are weekdays 0 (MON) to 6 (SUN), not {self.days}")
        if self.start.tzinfo is not None or self.end.tzinfo is not None:
            raise ValueError("a window's times are wall times: give them without a timezone")
        if self.end != time(0) and self.end <= self.start:
            raise ValueError(f"a window ends after it starts: {self.start} .. {self.end}")
        return self

    def holds(self, wall: datetime) -> bool:
        """Whether wall time ``wall`` is inside the window."""
        if wall.weekday() not in self.days:
            return False
        clock = wall.time()
        return self.start <= clock and (self.end == time(0) or clock < self.end)

    def next_start(self, wall: datetime) -> datetime:
        """The first wall time after ``wall`` at which the window opens."""
        day = wall.date()
        for offset in range(8):
            opening = datetime.combine(day + timedelta(days=offset), self.start)
            if opening > wall and opening.weekday() in self.days:
                return opening
        raise AssertionError("a window opens within a week")  # days is never empty

    def describe(self) -> str:
        days = "every day" if len(self.days) == 7 else ",".join(_DAY_NAMES[d] for d in self.days)
        end = "24:00" if self.end == time(0) else f"{self.end:%H:%M}"
        return f"{self.start:%H:%M}-{end} {days}"


def parse_days(text: str) -> tuple[int, ...]:
    """``"MON-FRI"`` or ``"MON,WED,SAT-SUN"`` as weekday numbers (0 for Monday)."""
    days: list[int] = []
    for part in text.upper().replace(" ", "").split(","):
        first, _, last = part.partition("-")
        if first not in _DAY_NAMES or (last and last not in _DAY_NAMES):
            raise ValueError(f"bad days {text!r}: use names such as MON-FRI or SAT,SUN")
        a, b = _DAY_NAMES.index(first), _DAY_NAMES.index(last or first)
        days += range(a, b + 1) if a <= b else [*range(a, 7), *range(0, b + 1)]
    return tuple(sorted(set(days)))


class Exclusions(BaseModel):
    """Dates a schedule skips: ``dates``, ``ranges`` (first, last: inclusive) and the
    public ``holidays`` of a country code such as ``"FR"`` or ``"US-CA"``; and, when
    ``windows`` are given, every time of day outside them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def __init__(self, /, **data: Any) -> None:
        with checked("Exclusions"):
            super().__init__(**data)

    dates: tuple[date, ...] = ()
    ranges: tuple[tuple[date, date], ...] = ()
    holidays: str | None = None
    windows: tuple[Window, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _calendar_to_code(cls, data: Any) -> Any:
        """Accept a ``holidays`` calendar object and keep its country (and subdivision)."""
        calendar = data.get("holidays") if isinstance(data, dict) else None
        if calendar is not None and not isinstance(calendar, str):
            country = getattr(calendar, "country", None)
            if not isinstance(country, str):
                raise ValueError("holidays must be a country code or a holidays calendar")
            subdivision = getattr(calendar, "subdiv", None)
            data = {**data, "holidays": f"{country}-{subdivision}" if subdivision else country}
        return data

    @classmethod
    def of_calendar(cls, calendar: Any, **others: Any) -> Exclusions:
        """Exclusions of a ``holidays`` calendar object (``holidays.country_holidays("FR")``),
        kept as its code, plus any ``dates`` and ``ranges`` given."""
        return cls.model_validate({**others, "holidays": calendar})

    @model_validator(mode="after")
    def _checked(self) -> Exclusions:
        for first, last in self.ranges:
            if last < first:
                raise ValueError(f"the range {first} .. {last} ends before it starts")
        if self.holidays is not None:
            self._calendar.get(date(2000, 1, 1))  # an unknown code fails here, not later
        return self

    @cached_property
    def _calendar(self) -> Any:
        assert self.holidays is not None
        try:
            import holidays
        except ImportError as err:
            raise ValueError(
                "holidays= needs the holidays package: pip install 'tickwork[holidays]'"
            ) from err
        country, _, subdivision = self.holidays.partition("-")
        try:
            return holidays.country_holidays(country, subdiv=subdivision or None)
        except NotImplementedError as err:
            raise ValueError(f"no holiday calendar for {self.holidays!r}") from err

    def reason(self, day: date) -> str | None:
        """Why ``day`` is excluded (a holiday's name, "excluded date", "excluded range"),
        or None when it is not."""
        if day in self.dates:
            return "excluded date"
        if any(first <= day <= last for first, last in self.ranges):
            return "excluded range"
        if self.holidays is not None:
            name = self._calendar.get(day)
            if name:
                return f"holiday: {name}"
        return None

    def outside(self, wall: datetime) -> bool:
        """Whether wall time ``wall`` is outside every window (never, without windows)."""
        return bool(self.windows) and not any(w.holds(wall) for w in self.windows)

    def next_opening(self, wall: datetime) -> datetime:
        """The first wall time after ``wall`` at which a window opens."""
        return min(w.next_start(wall) for w in self.windows)

    def describe(self) -> str:
        parts = []
        if self.dates:
            parts.append(f"{len(self.dates)} date{'s' if len(self.dates) > 1 else ''}")
        if self.ranges:
            parts.append(f"{len(self.ranges)} range{'s' if len(self.ranges) > 1 else ''}")
        if self.holidays:
            parts.append(f"holidays {self.holidays}")
        text = "except " + ", ".join(parts) if parts else ""
        if self.windows:
            inside = "within " + " or ".join(w.describe() for w in self.windows)
            text = f"{inside}, {text}" if text else inside
        return text or "no exclusions"
