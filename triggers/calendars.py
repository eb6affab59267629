"""Calendar exclusions: dates on which a schedule does not run.

``Exclusions`` is stored with the trigger (so every worker applies the same rule): single
dates, inclusive date ranges, and optionally the public holidays of a country (or of a
subdivision, ``"US-CA"``) from the ``holidays`` package, which is then needed wherever the
trigger is planned (``pip install 'tickwork[holidays]'``). Dates are wall dates in the
trigger's timezone. A ``holidays`` calendar object may be given instead of its code.
"""

from __future__ import annotations

from datetime import date
from functools import cached_property
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator


class Exclusions(BaseModel):
    """Dates a schedule skips: ``dates``, ``ranges`` (first, last: inclusive) and the
    public ``holidays`` of a country code such as ``"FR"`` or ``"US-CA"``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dates: tuple[date, ...] = ()
    ranges: tuple[tuple[date, date], ...] = ()
    holidays: str | None = None

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

    def describe(self) -> str:
        parts = []
        if self.dates:
            parts.append(f"{len(self.dates)} date{'s' if len(self.dates) > 1 else ''}")
        if self.ranges:
            parts.append(f"{len(self.ranges)} range{'s' if len(self.ranges) > 1 else ''}")
        if self.holidays:
            parts.append(f"holidays {self.holidays}")
        return "except " + ", ".join(parts) if parts else "no exclusions"
