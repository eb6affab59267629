"""Time sources. Code that needs "now" takes a ``Clock`` so tests can drive time."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol

from pydantic import TypeAdapter

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

#: the UTC that pydantic gives every datetime it decodes (one object of its own, not
#: ``datetime.UTC``): two datetimes subtract fast only when they share a tzinfo object, so
#: ``to_ms`` subtracts an epoch in it (cheaper than converting a decoded message's time)
_PYDANTIC_UTC = TypeAdapter(datetime).validate_json(b"20000000001").tzinfo
_PYDANTIC_EPOCH = _EPOCH.replace(tzinfo=_PYDANTIC_UTC)
if _PYDANTIC_UTC is None or _PYDANTIC_UTC.utcoffset(None) != timedelta(0):  # pragma: no cover
    _PYDANTIC_UTC, _PYDANTIC_EPOCH = UTC, _EPOCH  # not a fixed zero offset: never the fast path


class Clock(Protocol):
    """Wall-clock milliseconds since the epoch."""

    def now_ms(self) -> int: ...


class SystemClock:
    """The machine's clock (and its monotonic clock, which a step of the time of day does
    not move: ``CorrectedClock`` tells steps by it)."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def steady_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000


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


#: a read of the reference clock slower than this is taken again (``CorrectedClock``)
_SLOW_READ_MS = 10
#: the local clock moved this much more (or less) than its monotonic clock since the last
#: measurement: it was stepped, so the offset is measured again at once (a clock slewed
#: by NTP drifts by at most 0.5 ms a second: 30 ms in a refresh period)
_STEP_MS = 500
#: ... compared once this many ms of local time (a step forward, or any back, at once):
#: the readings in between cost no monotonic read
_LOOK_MS = 100


class CorrectedClock:
    """A local clock corrected to a reference clock (the backend's, which every process
    compares due times against): the offset is measured on first use and again every
    ``refresh_ms`` of local time, so a machine whose clock is off, or is stepped while it
    runs, still stamps and fires on the reference's time. A local clock that also reads a
    monotonic time (``steady_ms``, as ``SystemClock``) has a step of its time of day (an
    operator's ``date -s``, a virtual machine resumed) noticed at the next reading: the
    offset is measured again at once. The first measurement's error propagates; a failed
    refresh keeps the last offset and tries again a period later."""

    def __init__(
        self,
        reference: Callable[[], int],
        local: Clock,
        refresh_ms: int = 60_000,
        errors: tuple[type[Exception], ...] = (Exception,),
    ) -> None:
        self._reference = reference
        self._local = local
        self._refresh_ms = refresh_ms
        self._errors = errors
        self._offset_ms: int | None = None
        self._measured_at = 0  # local ms of the last measurement (or attempt)
        #: the local clock's monotonic reading, if it has one (a test's ``ManualClock``
        #: has none: its steps are the test's time)
        self._steady: Callable[[], int] | None = getattr(local, "steady_ms", None)
        self._steady_at = 0  # its reading at the last measurement (or attempt)
        self._looked_at = 0  # local ms when the monotonic clock was last compared
        self._lock = threading.Lock()  # one measurement at a time

    @property
    def offset_ms(self) -> int:
        """Reference minus local, as last measured (measured now if never)."""
        if self._offset_ms is None:
            self.measure()
        assert self._offset_ms is not None
        return self._offset_ms

    def measure(self) -> int:
        """Measure the offset now (one read of the reference) and return it. A read that
        took longer than ``_SLOW_READ_MS`` (the first, opening a connection or a schema)
        is taken again: its midpoint could be off by half of it."""
        before = self._local.now_ms()
        reference = self._reference()
        after = self._local.now_ms()
        if after - before > _SLOW_READ_MS:
            before = self._local.now_ms()
            reference = self._reference()
            after = self._local.now_ms()
        # a reading inside the local window agrees with the local clock as closely as
        # can be told: no offset (the same clock, as on SQLite, must read exactly alike)
        inside = before <= reference <= after
        offset = self._offset_ms = 0 if inside else reference - (before + after) // 2
        self._mark(after)  # after the offset: a reading in between measures too
        return offset

    def forget(self) -> None:
        """Measure again at the next reading (the reference changed)."""
        self._offset_ms = None

    def due(self) -> bool:
        """Whether the next ``now_ms`` reads the reference (a blocking call: code on an
        event loop makes it in a thread)."""
        return self._offset_ms is None or self._stale(self._local.now_ms())

    def _mark(self, local: int) -> int:
        """Note ``local`` (and the monotonic time) as the last measurement's; return it."""
        self._measured_at = self._looked_at = local
        if self._steady is not None:
            self._steady_at = self._steady()
        return local

    def _stale(self, local: int) -> bool:
        """Whether the offset is a period old at local time ``local``, or the local clock
        went back or was stepped since it was measured."""
        since = local - self._measured_at
        if since >= self._refresh_ms or since < 0:
            return True
        if self._steady is None:
            return False
        looked = local - self._looked_at
        if 0 <= looked < _LOOK_MS:  # the clock moved on by less than a look's span
            return False
        if abs(since - (self._steady() - self._steady_at)) > _STEP_MS:
            return True  # (not looked at: every reading measures, or waits, until marked)
        self._looked_at = local
        return False

    def now_ms(self) -> int:
        local = self._local.now_ms()
        if self._offset_ms is None:
            return local + self.measure()
        if self._stale(local):
            return self._measured(local)
        return local + self._offset_ms

    def _measured(self, local: int) -> int:
        """``local`` corrected by an offset measured now, unless another thread measured
        it while this one waited (every reading of a stale offset waits for the one
        measurement, so none uses the offset from before a step); a failed measurement
        keeps the last offset, and is tried again a period later."""
        with self._lock:
            last = self._offset_ms
            assert last is not None  # measured once before any refresh
            if not self._stale(self._local.now_ms()):
                return local + last
            try:
                return local + self.measure()
            except self._errors:
                self._mark(local)  # one attempt a period, whether it works or not
                return local + last


def to_datetime(ms: int) -> datetime:
    """Epoch milliseconds to an aware UTC datetime."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def to_ms(value: datetime) -> int:
    """An aware datetime to epoch milliseconds, rounded up so nothing runs early."""
    delta = value - (_PYDANTIC_EPOCH if value.tzinfo is _PYDANTIC_UTC else _EPOCH)
    return delta.days * 86_400_000 + delta.seconds * 1000 + -(-delta.microseconds // 1000)
