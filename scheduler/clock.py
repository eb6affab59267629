"""Time sources. Code that needs "now" takes a ``Clock`` so tests can drive time."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Protocol

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Clock(Protocol):
    """Wall-clock milliseconds since the epoch."""

    def now_ms(self) -> int: ...


class SystemClock:
    """The machine's clock."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that only moves when told to; thread-safe. For tests and simulations."""

    def __init__(self, start_ms: int = 1_800_000_000_000) -> None:
        self._now = start_ms
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        with self._lock:
            return self._now

    def advance(self, ms: int) -> None:
        with self._lock:
            self._now += ms


def to_datetime(ms: int) -> datetime:
    """Epoch milliseconds to an aware UTC datetime."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def to_ms(value: datetime) -> int:
    """An aware datetime to epoch milliseconds, rounded up so nothing runs early."""
    delta = value - _EPOCH
    return delta.days * 86_400_000 + delta.seconds * 1000 + -(-delta.microseconds // 1000)
