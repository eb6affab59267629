"""``Repeating``: a fixed grid ``start + k * interval``."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from pydantic import Field

from tickwork.triggers.base import Fire, Trigger, format_duration, require_aware
from tickwork.triggers.fields import AwareTime, Duration, PositiveDuration


class Repeating(Trigger):
    """Fire every ``interval`` on the grid ``start + k * interval`` for k = 0, 1, 2, ...

    ``start`` defaults to enqueue time plus ``delay``. ``repeat_count`` bounds the series
    (``None``: unbounded); ``end`` is the last instant a run may be scheduled at. Both
    travel with every occurrence, so a bounded series stays bounded. The occurrence
    number of a run is its grid index k.

    What ``repeat_count`` counts: by default grid slots, k < repeat_count. When workers
    keep up that is the number of runs; occurrences a misfire policy coalesces or skips
    use up the count (Quartz's "with remaining count"). With ``count_missed=False`` it is
    the number of runs however late they come (Quartz's "with existing count"): the grid
    extends by the occurrences that were missed.

    Worked example: start 12:00, interval 1 h, repeat_count 3 fires at 12:00, 13:00 and
    14:00. If the 13:00 run is acked at 13:40 the next is still 14:00 (no drift); if a
    worker was down from 12:30 to 15:10 the default ``coalesce`` runs once at 15:10
    (occurrence 2 would be 14:00, the last one owed) and the series is over.
    """

    kind: Literal["repeating"] = "repeating"
    interval: PositiveDuration
    delay: Duration = timedelta(0)
    repeat_count: int | None = Field(default=None, ge=1)
    #: whether occurrences missed (coalesced or skipped) use up ``repeat_count``
    count_missed: bool = True
    start: AwareTime | None = None

    def _describe_own(self) -> str:
        text = f"every {format_duration(self.interval)}"
        if self.start is not None:
            text += f" from {self.start:%Y-%m-%d %H:%M:%S} UTC"
        elif self.delay:
            text += f" after {format_duration(self.delay)}"
        if self.repeat_count is not None:
            text += f", {self.repeat_count} run{'s' if self.repeat_count > 1 else ''}"
            if not self.count_missed:
                text += " however late"
        return text

    def with_misfires(self, misfires: int) -> Repeating:
        if self.count_missed or self.repeat_count is None or misfires <= 0:
            return self
        return self.model_copy(update={"repeat_count": self.repeat_count + misfires})

    def anchored(self, now: datetime) -> Repeating:
        if self.start is not None and self.delay == timedelta(0):
            return self
        base = self.start if self.start is not None else require_aware(now, "now")
        return self.model_copy(update={"start": base + self.delay, "delay": timedelta(0)})

    def _grid(self, index: int) -> Fire | None:
        if self.repeat_count is not None and index >= self.repeat_count:
            return None
        assert self.start is not None, "anchor the trigger before planning"
        return Fire(self.start + index * self.interval, index)

    def _candidate(self, now: datetime) -> Fire | None:
        return self.anchored(now)._grid(0)

    def _after(self, at: datetime, occurrence: int) -> Fire | None:
        assert self.start is not None, "anchor the trigger before planning"
        if at < self.start:
            return self._grid(0)
        index = (at - self.start) // self.interval + 1
        return self._grid(index)

    def _count_due(self, fire: Fire, now: datetime, limit: int) -> int:
        if self.rules:  # excluded dates and windows break the arithmetic: walk instead
            return super()._count_due(fire, now, limit)
        assert self.start is not None
        last = (now - self.start) // self.interval
        if self.repeat_count is not None:
            last = min(last, self.repeat_count - 1)
        if self.end is not None:
            last = min(last, (self.end - self.start) // self.interval)
        return max(0, min(limit, last - fire.occurrence + 1))

    def _last_due(self, fire: Fire, now: datetime) -> Fire:
        if self.rules:
            return super()._last_due(fire, now)
        count = self._count_due(fire, now, 2**62)
        found = self._grid(fire.occurrence + max(count, 1) - 1)
        return found if found is not None else fire
