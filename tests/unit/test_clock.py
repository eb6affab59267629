"""``CorrectedClock``: a local clock read as the reference's time, measured lazily and
again once a period; a failed refresh keeps the last offset. ``to_ms`` of any aware time."""

from __future__ import annotations

import random
import threading
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from pydantic import TypeAdapter
from pydantic_core import to_json

from tickwork.scheduler import clock
from tickwork.scheduler.clock import CorrectedClock, ManualClock, to_ms
from tickwork.scheduler.model.message import Message


class Reference:
    def __init__(self, local: ManualClock, offset_ms: int) -> None:
        self.local, self.offset_ms, self.reads, self.down = local, offset_ms, 0, False

    def now_ms(self) -> int:
        self.reads += 1
        if self.down:
            raise ConnectionError("down")
        return self.local.now_ms() + self.offset_ms


def test_reads_the_reference_time_measuring_once_a_period() -> None:
    local = ManualClock(1_000_000)
    reference = Reference(local, -30_000)
    clock = CorrectedClock(reference.now_ms, local, refresh_ms=60_000)
    assert reference.reads == 0, "measured on first use, not before"
    assert clock.now_ms() == 970_000
    local.advance(59_999)
    assert clock.now_ms() == 1_029_999 and reference.reads == 1
    reference.offset_ms = -10_000  # the local clock was stepped
    local.advance(1)
    assert clock.now_ms() == 1_050_000 and reference.reads == 2


def test_a_slow_first_read_is_taken_again() -> None:
    """The first read may open the backend (a pool, a schema): 80 ms there would put the
    midpoint 40 ms off a reference a millisecond ahead of the local clock."""
    local = ManualClock(1_000_000)
    reads: list[int] = []

    def reference() -> int:
        reads.append(local.now_ms())
        if len(reads) == 1:
            local.advance(80)  # opening the connection
        return local.now_ms() + 1

    clock = CorrectedClock(reference, local)
    assert clock.offset_ms == 1 and len(reads) == 2


def test_a_failed_refresh_keeps_the_offset_and_tries_a_period_later() -> None:
    local = ManualClock(1_000_000)
    reference = Reference(local, 5_000)
    clock = CorrectedClock(reference.now_ms, local, refresh_ms=1_000, errors=(ConnectionError,))
    assert clock.now_ms() == 1_005_000
    reference.down = True
    local.advance(1_000)
    assert clock.now_ms() == 1_006_000
    assert clock.now_ms() == 1_006_000 and reference.reads == 2, "one attempt a period"
    local.advance(1_000)
    reference.down, reference.offset_ms = False, 7_000
    assert clock.now_ms() == 1_009_000


def test_the_first_measurement_fails_loudly_and_forget_measures_again() -> None:
    local = ManualClock(0)
    reference = Reference(local, 100)
    reference.down = True
    clock = CorrectedClock(reference.now_ms, local, errors=(ConnectionError,))
    with pytest.raises(ConnectionError):
        clock.now_ms()
    reference.down = False
    assert clock.now_ms() == 100
    reference.offset_ms = 200
    clock.forget()
    assert clock.now_ms() == 200 and clock.offset_ms == 200


def test_the_same_clock_reads_alike_even_when_it_ticks_while_measured() -> None:
    class Ticking:
        def __init__(self) -> None:
            self.ms = 0

        def now_ms(self) -> int:
            self.ms += 1  # every reading a millisecond later
            return self.ms

    ticking = Ticking()
    assert CorrectedClock(ticking.now_ms, ticking).offset_ms == 0


def test_to_ms_reads_every_aware_time_alike_whatever_its_tzinfo() -> None:
    """``to_ms`` subtracts an epoch in pydantic's own UTC object from a time decoded by
    pydantic (the fast path) and ``datetime.UTC``'s otherwise: every zone and offset, and
    times from a decoded message, round up to the same milliseconds."""
    rng = random.Random(7)
    zones = [UTC, timezone(timedelta(hours=5, minutes=30)), ZoneInfo("Australia/Lord_Howe")]
    decoded = Message.decode(b'{"id":"a","queue":"q","task":"t","scheduled_at":20000000001}')
    assert decoded.scheduled_at.tzinfo is clock._PYDANTIC_UTC, "the fast path is taken"
    adapter = TypeAdapter(datetime)
    for _ in range(5000):
        at = datetime(1971, 1, 1, tzinfo=UTC) + timedelta(microseconds=rng.randrange(10**17))
        expected = -(-(at - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1))
        assert to_ms(at) == expected
        assert to_ms(at.astimezone(rng.choice(zones))) == expected
        parsed = adapter.validate_json(to_json(at.isoformat().replace("+00:00", "Z")))
        assert parsed.tzinfo is clock._PYDANTIC_UTC and to_ms(parsed) == expected


class SteppedClock(ManualClock):
    """A local clock with a monotonic clock beside it (as ``SystemClock``): ``advance``
    moves both, ``step`` only the time of day (``date -s``, a resumed virtual machine)."""

    def __init__(self, start_ms: int) -> None:
        super().__init__(start_ms)
        self.steady = 0

    def advance(self, ms: int) -> None:
        super().advance(ms)
        self.steady += ms

    def step(self, ms: int) -> None:
        super().advance(ms)

    def steady_ms(self) -> int:
        return self.steady


def test_a_step_of_the_local_clock_is_measured_again_at_once() -> None:
    local = SteppedClock(1_000_000)
    truth = ManualClock(2_000_000)  # the backend's time: a step of ours does not move it
    reads = []

    def reference() -> int:
        reads.append(1)
        return truth.now_ms()

    clock = CorrectedClock(reference, local, refresh_ms=60_000)
    assert clock.now_ms() == 2_000_000
    local.advance(10_000)
    truth.advance(10_000)
    assert clock.now_ms() == 2_010_000 and len(reads) == 1, "no step: no read"
    for step_ms in (30_000, -3_600_000, 3_600_000, 2_000):  # forward, back, forward
        local.step(step_ms)
        assert clock.now_ms() == 2_010_000, f"a step of {step_ms} ms moved the backend's time"
    assert len(reads) == 5, "each step measured once"
    local.step(200)  # within what NTP's slewing may drift: no read
    local.advance(1_000)
    truth.advance(1_000)
    assert clock.now_ms() == 2_011_200 and len(reads) == 5


def test_a_reading_during_the_measurement_after_a_step_waits_for_its_offset() -> None:
    """Two threads read the clock after a step: the second does not use the offset from
    before the step while the first measures (a parked message would fire early)."""
    local = SteppedClock(1_000_000)
    truth = ManualClock(1_000_000)
    inside, release = threading.Event(), threading.Event()

    def reference() -> int:
        if len(read) == 1:  # the measurement after the step: held until told
            inside.set()
            release.wait(5)
        read.append(1)
        return truth.now_ms()

    read: list[int] = []
    clock = CorrectedClock(reference, local, refresh_ms=60_000)
    assert clock.now_ms() == 1_000_000
    local.step(30_000)
    first: list[int] = []
    measuring = threading.Thread(target=lambda: first.append(clock.now_ms()))
    measuring.start()
    assert inside.wait(5)
    second: list[int] = []
    reading = threading.Thread(target=lambda: second.append(clock.now_ms()))
    reading.start()
    reading.join(0.2)
    assert not second, "a reading went on with the offset from before the step"
    release.set()
    measuring.join(5)
    reading.join(5)
    assert first == second == [1_000_000] and len(read) == 2
