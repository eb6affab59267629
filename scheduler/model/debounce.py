"""Debounce per key: calls of a task with the same key within a quiet period collapse into
one run (with the last call's arguments, or the first's), which happens at the latest
``max`` after the first call of the period even while calls keep coming
(``scheduler/producing/debounce.py`` does it at enqueue)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

from tickwork.scheduler.errors import InvalidMessage
from tickwork.scheduler.model.limits import LimitKey


@dataclass(frozen=True)
class Debounce:
    """``period``: the quiet time after the last call before the run; ``max``: the longest
    a run waits after the first call of its period (None: as long as calls keep coming);
    ``key``: a parameter name, or a function of the arguments, whose value makes the
    groups (None: one group per task, or the call's own ``key=``); ``keep``: the
    arguments of the ``"last"`` call of the period, or of the ``"first"``."""

    period: timedelta
    max: timedelta | None = None
    key: LimitKey | None = None
    keep: Literal["last", "first"] = "last"

    def __post_init__(self) -> None:
        if not isinstance(self.period, timedelta) or self.period <= timedelta(0):
            raise InvalidMessage(f"a debounce period is a positive timedelta, not {self.period!r}")
        if self.max is not None and (
            not isinstance(self.max, timedelta) or self.max <= timedelta(0)
        ):
            raise InvalidMessage(f"a debounce max is a positive timedelta, not {self.max!r}")
        if self.keep not in ("last", "first"):
            raise InvalidMessage(f"debounce keep is 'last' or 'first', not {self.keep!r}")
