"""Stopping sync handlers at their task's time limit (``time_limit``), and warning them
first at its soft limit (``soft_time_limit``).

The pool thread running a handler opens a ``Guard`` right around the handler's call. A
watchdog thread (``ThreadLimits``) raises ``TimeLimitExceeded`` in that thread when the
limit passes (``PyThreadState_SetAsyncExc``: it lands at the handler's next Python
bytecode, as Dramatiq's time limit does), and only while the guard is open, so it can
never land in the worker's own code after the handler returned. A handler that does not
stop within the grace (it sits in C code, or swallowed the exception) is abandoned: the
pool reports its run failed, which frees its slot and settles its message, and replaces
the thread; whatever the thread does later is ignored.

At the soft limit, the watchdog raises ``SoftTimeLimitExceeded`` in the thread once (an
``Exception``: the handler may catch it and stop cleanly; not caught, the run fails).

The process pool does the same with a signal in the child (``process_pool.py``), and
kills the child after the grace.
"""

from __future__ import annotations

import ctypes
import logging
import math
import threading
import time
from collections.abc import Callable

from tickwork.scheduler.runs.context import SoftTimeLimitExceeded, TimeLimitExceeded
from tickwork.workers.app_needs import WorkerApp

log = logging.getLogger("tickwork.worker")

#: how often the watchdog looks at the running handlers (s)
CHECK_EVERY_S = 0.05


def _raise_in(thread_id: int, exception: type[BaseException] | None) -> None:
    """Make ``exception`` pending in thread ``thread_id`` (None: cancel a pending one)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exception) if exception else None
    )


def limits_of(
    app: WorkerApp, task_name: str, default_s: float | None
) -> tuple[float | None, float | None]:
    """The time limit of a run of ``task_name`` (its task's own, else ``default_s``, the
    worker's) and its soft time limit (its task's own; None: none)."""
    task = app.registry.tasks.get(task_name)
    if task is None:
        return default_s, None
    own = task.options.time_limit_s
    return (own if own is not None else default_s), task.options.soft_time_limit_s


def over_limit_message(limit_s: float) -> str:
    return f"the handler ran past its time limit of {limit_s:g} s"


class Guard:
    """One run's time limit, opened right around its handler's call (``run_handler``
    calls ``enter`` and ``leave``; ``leave`` may be called again)."""

    __slots__ = (
        "_limits",
        "abandoned",
        "deadline",
        "inside",
        "limit_s",
        "on_abandon",
        "signalled",
        "soft_deadline",
        "soft_s",
        "thread",
        "warned",
    )

    def __init__(
        self,
        limits: ThreadLimits,
        limit_s: float | None,
        on_abandon: Callable[[], None],
        soft_s: float | None = None,
    ):
        self._limits = limits
        self.limit_s = limit_s  # None: a soft limit only
        self.soft_s = soft_s
        self.thread = threading.get_ident()
        self.deadline = self.soft_deadline = 0.0
        self.inside = False
        self.signalled = 0.0  # when TimeLimitExceeded was raised in it (monotonic; 0: not)
        self.warned = False  # SoftTimeLimitExceeded was raised in it
        self.abandoned = False
        self.on_abandon = on_abandon

    def enter(self) -> None:
        now = time.monotonic()
        self.deadline = now + self.limit_s if self.limit_s is not None else math.inf
        self.soft_deadline = now + self.soft_s if self.soft_s is not None else math.inf
        self._limits.watch(self)

    def leave(self) -> None:
        self._limits.unwatch(self)


class ThreadLimits:
    """The watchdog of a thread pool's time limits (its thread starts with the first
    limited run)."""

    def __init__(self, grace_s: float) -> None:
        self._grace_s = grace_s
        self._lock = threading.Lock()
        self._guards: set[Guard] = set()
        self._thread: threading.Thread | None = None

    def guard(
        self, limit_s: float | None, on_abandon: Callable[[], None], soft_s: float | None = None
    ) -> Guard:
        return Guard(self, limit_s, on_abandon, soft_s)

    def watch(self, guard: Guard) -> None:
        with self._lock:
            guard.inside = True
            self._guards.add(guard)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="tickwork-time-limits", daemon=True
                )
                self._thread.start()

    def unwatch(self, guard: Guard) -> None:
        """Close ``guard``: no exception is raised in its thread any more, and one still
        pending is cancelled (it could otherwise land after the handler returned)."""
        with self._lock:
            if (guard.signalled or guard.warned) and guard.inside:
                _raise_in(guard.thread, None)
            guard.inside = False
            self._guards.discard(guard)

    def _run(self) -> None:
        while True:
            time.sleep(CHECK_EVERY_S)
            now = time.monotonic()
            abandon: list[Guard] = []
            with self._lock:
                for guard in list(self._guards):
                    if guard.inside and not guard.warned and now >= guard.soft_deadline:
                        guard.warned = True
                        _raise_in(guard.thread, SoftTimeLimitExceeded)
                        continue
                    if not guard.inside or now < guard.deadline:
                        continue
                    if not guard.signalled:
                        guard.signalled = now
                        _raise_in(guard.thread, TimeLimitExceeded)
                    elif now >= guard.signalled + self._grace_s:
                        guard.abandoned = True
                        guard.inside = False
                        self._guards.discard(guard)
                        abandon.append(guard)
            for guard in abandon:
                log.warning(
                    "a handler did not stop within %.1f s of its time limit of %g s: "
                    "its run fails and its thread is replaced",
                    self._grace_s,
                    guard.limit_s,
                )
                guard.on_abandon()
