"""Field types with their checks, shared by the triggers: a duration that must be positive
or not negative, a time that must be timezone-aware. A bad value is reported with the
field's name (``triggers.errors``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated

from pydantic import AfterValidator


def _aware(value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"must be timezone-aware (got naive {value.isoformat()})")
    return value.astimezone(UTC)


def _positive(value: timedelta) -> timedelta:
    if value <= timedelta(0):
        raise ValueError("must be positive")
    return value


def _not_negative(value: timedelta) -> timedelta:
    if value < timedelta(0):
        raise ValueError("must not be negative")
    return value


#: a duration above zero (an interval, a catch-up window)
PositiveDuration = Annotated[timedelta, AfterValidator(_positive)]
#: a duration of zero or more (a delay, a jitter, a spacing)
Duration = Annotated[timedelta, AfterValidator(_not_negative)]
#: a time with its timezone (a naive one is ambiguous), kept in UTC
AwareTime = Annotated[datetime, AfterValidator(_aware)]
