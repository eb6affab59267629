"""The timer thread: holds claims due within the lookahead and fires each on time.

The consumer parks a claim that is not yet due (``park``); this thread sleeps until the
earliest bucket of its ``TimingWheel`` comes due, then hands each due claim to the pool.
A parked claim holds no permit (it waits for its time, not for a handler slot); when it
fires it takes one, into debt if need be, so it runs on time. On shutdown every parked
claim is released at once.

Thread-safety: ``park``, ``has_room`` and ``wake`` may be called from any thread; ``run``
is the timer thread's body. The wheel is only touched under the condition lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from tickwork.workers.intake.flow import Permits
from tickwork.workers.intake.holdings import Work
from tickwork.workers.intake.timing_wheel import TimingWheel

#: the longest the thread sleeps before looking at the clock again (ms)
_MAX_WAIT_MS = 200


class Timer:
    """Owns the timing wheel and fires parked claims on time."""

    def __init__(
        self,
        now_ms: Callable[[], int],
        permits: Permits,
        submit: Callable[[list[Work]], None],
        release: Callable[[list[Work]], None],
        stopping: threading.Event,
        capacity: int,
    ) -> None:
        self._now_ms = now_ms
        self._permits = permits
        self._submit = submit
        self._release = release
        self._stopping = stopping
        self._capacity = capacity
        self._condition = threading.Condition()
        self._wheel: TimingWheel[Work] = TimingWheel(1, 20, now_ms())

    def has_room(self) -> bool:
        """Whether more claims may be parked (``timer_capacity``)."""
        with self._condition:
            return self._wheel.size < self._capacity

    def park(self, work: Work, due_ms: int) -> bool:
        """Hold ``work`` until ``due_ms``; False (nothing kept) when it is already due, or
        when the worker is stopping (the timer may have drained its wheel for the last
        time: a claim parked after that would be held until the grace ran out)."""
        with self._condition:
            if self._stopping.is_set():
                return False
            parked = self._wheel.add(work, due_ms)
            if parked:
                self._condition.notify()
        return parked

    def wake(self) -> None:
        """Make the thread look at the clock (and at ``stopping``) now."""
        with self._condition:
            self._condition.notify_all()

    def fire_due(self) -> list[Work]:
        """Take the parked claims that are due now (the thread's step; tests call it)."""
        with self._condition:
            return self._wheel.advance(self._now_ms())

    def run(self) -> None:
        while True:
            with self._condition:
                if self._stopping.is_set():
                    parked = self._wheel.drain()
                    break
                expiration = self._wheel.next_expiration()
                wait_ms = (
                    _MAX_WAIT_MS if expiration is None else max(0, expiration - self._now_ms())
                )
                if wait_ms > 0:
                    self._condition.wait(min(wait_ms, _MAX_WAIT_MS) / 1000)
                due = self._wheel.advance(self._now_ms())
            if due:
                self._permits.force(len(due))  # may overdraw: the consumer waits to be paid back
                for work in due:
                    work.holds_permit = True
                self._submit(due)
        self._release(parked)
