"""``Specs``: one schedule whose grid is the union of several specs.

Each spec is a ``Cron``, ``Repeating`` or ``RunOnce`` with its own timezone (and its own
exclusions and end, if it has any); an instant on two specs' grids is one occurrence.
The schedule's own settings (misfire policy, overlap, jitter, catch-up, the pause after
failures) are set on ``Specs``, and its ``exclude`` (dates, holidays, time windows) is
applied to the union, in ``tz``: Temporal's schedule spec (calendars and intervals with
exclusions), Quartz's calendars shared by its triggers.

    Specs(
        specs=[Cron("0 9 * * MON-FRI", tz="Europe/Paris"), Cron("0 9 * * *", tz="Asia/Tokyo")],
        exclude=Exclusions(holidays="FR"),
        tz="Europe/Paris",
    )
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from tickwork.triggers.base import Fire, Trigger
from tickwork.triggers.cron import Cron
from tickwork.triggers.fires import known_zone
from tickwork.triggers.once import RunOnce
from tickwork.triggers.repeating import Repeating

#: A spec inside ``Specs``: pydantic picks the class from ``kind``.
AnySpec = Annotated[RunOnce | Repeating | Cron, Field(discriminator="kind")]

#: the settings of a schedule, which a spec inside ``Specs`` leaves to it
_SCHEDULE_SETTINGS = (
    "misfire",
    "overlap",
    "max_catch_up",
    "catch_up_spacing",
    "catch_up_window",
    "jitter",
    "pause_after_failures",
    "calendar",
)


class Specs(Trigger):
    """Fire at every occurrence of any of ``specs`` (at least one, at most 50)."""

    kind: Literal["specs"] = "specs"
    specs: tuple[AnySpec, ...] = Field(min_length=1, max_length=50)
    #: the timezone of the schedule's own ``exclude`` (dates and windows are wall times)
    tz: str = "UTC"

    @field_validator("tz")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        return known_zone(value)

    @model_validator(mode="after")
    def _specs_leave_settings_to_the_schedule(self) -> Specs:
        for spec in self.specs:
            for name in _SCHEDULE_SETTINGS:
                if getattr(spec, name) != type(spec).model_fields[name].default:
                    raise ValueError(
                        f"{name} is a setting of the whole schedule: set it on Specs, "
                        f"not on its spec {spec.describe()!r}"
                    )
        return self

    @property
    def zone(self) -> str:
        return self.tz

    def anchored(self, now: datetime) -> Specs:
        anchored = tuple(spec.anchored(now) for spec in self.specs)
        if anchored == self.specs:
            return self
        return self.model_copy(update={"specs": anchored})

    def _candidate(self, now: datetime) -> Fire | None:
        firsts = [spec.within_end(spec.candidate(now)) for spec in self.anchored(now).specs]
        return _earliest(firsts, 0)

    def _after(self, at: datetime, occurrence: int) -> Fire | None:
        return _earliest([_next_of(spec, at) for spec in self.specs], occurrence + 1)

    @property
    def recurring(self) -> bool:
        return len(self.specs) > 1 or self.specs[0].recurring

    def _describe_own(self) -> str:
        own = "any of: " + "; ".join(spec.describe() for spec in self.specs)
        return own if self.tz == "UTC" else f"{own} (calendar in {self.tz})"


def _next_of(spec: Trigger, at: datetime) -> Fire | None:
    """The first fire of ``spec`` strictly after ``at``: a one-off's own time, once."""
    if isinstance(spec, RunOnce):
        fire = spec.within_end(spec.candidate(at))
        return fire if fire is not None and fire.at > at else None
    return spec.next_after(at)


def _earliest(fires: list[Fire | None], occurrence: int) -> Fire | None:
    """The earliest of the specs' next fires (past their own ends), numbered
    ``occurrence``; None when every spec is over."""
    times = [f.at for f in fires if f is not None]
    return Fire(min(times), occurrence) if times else None
