"""``RunOnce``: a single fire at a time or after a delay."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from pydantic import field_validator, model_validator

from tickwork.triggers.base import Fire, Trigger, format_duration, require_aware


class RunOnce(Trigger):
    """Fire once, at ``at`` or ``delay`` after enqueue (``RunOnce()`` alone means now)."""

    kind: Literal["once"] = "once"
    at: datetime | None = None
    delay: timedelta | None = None

    @field_validator("at")
    @classmethod
    def _aware_at(cls, value: datetime | None) -> datetime | None:
        return None if value is None else require_aware(value, "at")

    @model_validator(mode="after")
    def _one_of(self) -> RunOnce:
        if self.at is not None and self.delay is not None:
            raise ValueError("give RunOnce either at= or delay=, not both")
        if self.delay is not None and self.delay < timedelta(0):
            raise ValueError("delay must not be negative")
        return self

    @property
    def recurring(self) -> bool:
        return False

    def _describe_own(self) -> str:
        if self.at is not None:
            return f"once at {self.at:%Y-%m-%d %H:%M:%S} UTC"
        if not self.delay:
            return "once, now"
        return f"once after {format_duration(self.delay)}"

    def anchored(self, now: datetime) -> RunOnce:
        if self.at is not None:
            return self
        return self.model_copy(update={"at": now + (self.delay or timedelta(0)), "delay": None})

    def _candidate(self, now: datetime) -> Fire | None:
        return Fire(self.at if self.at is not None else now + (self.delay or timedelta(0)), 0)

    def _after(self, at: datetime, occurrence: int) -> Fire | None:
        return None

    def _resolve(self, fire: Fire | None, now: datetime) -> Fire | None:
        return fire  # a one-off that is late still runs: there is nothing to coalesce
