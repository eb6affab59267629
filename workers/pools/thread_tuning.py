"""How many of a thread pool's threads take work at once.

Threads of one process take turns holding the interpreter lock. Handlers that wait on
I/O for long (an HTTP call, a slow query) need many threads to overlap their waits; fast
handlers (a Redis ``INCR``: tens of microseconds on a socket) gain nothing from more
than two, and lose: every extra runnable thread adds lock hand-offs and context switches
around each socket call (on this project's machine, the peers' one-``INCR`` job ran
about a third faster on two threads than on eight; ``bench/NOTES.md``, "Issue 38").

``ThreadTuner`` decides, window by window, how many threads take work (between
``FLOOR`` and the pool's size): while work waits for a thread and the process keeps a
whole core busy, it halves the number, and keeps the halving only if the rate of
finished runs did not fall by more than a tenth; it doubles the number again when work
waits while the process leaves the core half idle (handlers waiting on I/O) or a run
has lasted ``SLOW_RUN_S`` (a slow or stuck handler must not keep others waiting). After
an undone halving or a doubling it tries no halving for ``HOLD_WINDOWS``. With no work
waiting, it changes nothing. ``ThreadGate`` is what the pool's threads consult:
thread ``i`` takes work only while ``i`` is below the number, and parks otherwise.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger("tickwork.worker")

#: never fewer threads than this: one leaves no overlap between a handler's wait and the
#: next handler's start
FLOOR = 2
#: how often the number is reconsidered (s)
WINDOW_S = 0.1
#: the process's CPU time over wall time at or above which the interpreter lock is taken
#: to be the bottleneck (one core's worth, less a margin)
BUSY_CPU = 0.9
#: below this, handlers wait on I/O: more threads can only help while work waits
IDLE_CPU = 0.5
#: a run this old (s) while fewer threads take work brings more back (a run's age also
#: counts its waits for the interpreter lock, which can reach a tenth of a second among
#: eight threads of fast handlers)
SLOW_RUN_S = 0.25
#: a halving whose window finishes runs at less than this share of the rate before it is
#: undone
KEEP_SHARE = 0.9
#: after an undone halving or a doubling, windows before halving is tried again (5 s)
HOLD_WINDOWS = 50


def cpu_time() -> float:
    """The process's CPU time (s): what ``ThreadGate`` measures a window's CPU share by
    (tests replace it to play a process that keeps a core busy on any machine)."""
    return time.process_time()


@dataclass(frozen=True)
class Window:
    """What one window saw: work waiting for a thread at its end, the process's CPU
    time over its wall time, runs finished a second, and the age of the oldest run
    still going (0 when none)."""

    backlog: bool
    cpu_share: float
    rate: float
    oldest_run_s: float


class ThreadTuner:
    """The number of threads taking work, decided window by window (module docstring).
    Pure: fed ``Window``s, it returns the number; ``ThreadGate`` measures."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.limit = size
        self._trial: tuple[int, float] | None = None  # (number before a halving, its rate)
        self._hold = 0

    def step(self, window: Window) -> int:
        """The number of threads for the next window, after ``window``."""
        trial, self._trial = self._trial, None
        if not window.backlog:
            return self.limit
        if self.limit < self.size and (
            window.oldest_run_s >= SLOW_RUN_S or window.cpu_share < IDLE_CPU
        ):
            self.limit = min(self.size, self.limit * 2)
            self._hold = HOLD_WINDOWS  # more threads were needed: not fewer again soon
            return self.limit
        if trial is not None and window.rate < trial[1] * KEEP_SHARE:
            self.limit = trial[0]
            self._hold = HOLD_WINDOWS
            return self.limit
        if self._hold > 0:
            self._hold -= 1
        elif window.cpu_share >= BUSY_CPU and self.limit > FLOOR:
            self._trial = (self.limit, window.rate)
            self.limit = max(FLOOR, self.limit // 2)
        return self.limit


class ThreadGate:
    """Which of a pool's ``size`` threads (numbered from 0) take work: each calls
    ``wait_turn(i)`` before taking its next item, ``started(i)`` and ``finished(i)``
    around a run. ``backlog()`` says whether items wait for a thread. With ``adaptive``
    False every thread always takes work (the pool's size is the number)."""

    def __init__(self, size: int, backlog: Callable[[], bool], adaptive: bool = True) -> None:
        self.size = size
        self._backlog = backlog
        self._tuner = ThreadTuner(size) if adaptive and size > FLOOR else None
        self.limit = size
        self._open = False  # shutting down: every thread takes work (and its stop)
        self._changed = threading.Condition()
        self._tuning = threading.Lock()
        self._started_at = [0.0] * size  # per thread: when its run started (0: none)
        self._finished = 0  # runs finished since the window started
        self._window_at = time.monotonic()
        self._cpu_at = cpu_time()

    def wait_turn(self, index: int) -> None:
        """Return when thread ``index`` may take work (at once while it is below the
        number); a parked thread looks at the window as time passes."""
        if index < self.limit or self._tuner is None:
            return
        with self._changed:
            while index >= self.limit and not self._open:
                self._changed.wait(WINDOW_S)
                self._changed.release()
                try:
                    self.tick(time.monotonic())
                finally:
                    self._changed.acquire()

    def started(self, index: int) -> None:
        self._started_at[index] = time.monotonic()

    def finished(self, index: int) -> None:
        self._started_at[index] = 0.0
        self._finished += 1  # a count lost to a race only blurs a rate
        if self._tuner is not None:
            now = time.monotonic()
            if now - self._window_at >= WINDOW_S:
                self.tick(now)

    def tick(self, now: float) -> None:
        """Close the window if it is over (one thread at a time; the others go on)."""
        tuner = self._tuner
        if tuner is None or now - self._window_at < WINDOW_S:
            return
        if not self._tuning.acquire(blocking=False):
            return
        try:
            elapsed = now - self._window_at
            cpu = cpu_time()
            running = [at for at in self._started_at if at]
            window = Window(
                backlog=self._backlog(),
                cpu_share=(cpu - self._cpu_at) / elapsed,
                rate=self._finished / elapsed,
                oldest_run_s=now - min(running) if running else 0.0,
            )
            self._window_at, self._cpu_at, self._finished = now, cpu, 0
            limit = tuner.step(window)
            if limit != self.limit:
                log.debug("handler threads taking work: %d of %d", limit, self.size)
                with self._changed:
                    self.limit = limit
                    self._changed.notify_all()
        finally:
            self._tuning.release()

    def open(self) -> None:
        """Let every thread take work from now on (the pool is shutting down)."""
        with self._changed:
            self._open = True
            self.limit = self.size
            self._changed.notify_all()
