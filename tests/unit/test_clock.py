"""``CorrectedClock``: a local clock read as the reference's time, measured lazily and
again once a period; a failed refresh keeps the last offset."""

from __future__ import annotations

import pytest

from scheduler.clock import CorrectedClock, ManualClock


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
