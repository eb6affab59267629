"""What a running handler can learn about its own run, and how it hears of an abort.

Inside a handler, ``current_run()`` returns the ``RunContext`` of the message being run:
its id, key, queue, attempt, and whether someone asked to abort it (``app.abort``). A
sync handler that can stop early polls ``aborted`` or calls ``raise_if_aborted()`` at
safe points; an ``async def`` handler is cancelled instead; a process-pool handler gets
``Aborted`` raised in it (and is killed if it does not stop). A task with a
``time_limit`` is stopped at it (``TimeLimitExceeded``); ``time_left()`` says how long it
has. The worker sets the context (a ``ContextVar``, so each thread and each asyncio task
sees its own).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextvars import ContextVar, Token
from typing import NamedTuple

from tickwork.scheduler.errors import TickworkError


class Aborted(TickworkError):
    """Raised in a handler whose run was aborted. Raising it yourself ends the run as
    aborted too: no retry, and the message goes to the poison store with reason
    ``aborted``."""


class TimeLimitExceeded(BaseException):
    """Raised in a handler that ran past its task's ``time_limit``: the run fails, and is
    retried or poisoned by its retry policy. A ``BaseException``, so that a handler's own
    ``except Exception`` does not swallow it."""


class SoftTimeLimitExceeded(Exception):
    """Raised once in a sync handler that ran past its task's ``soft_time_limit``: a
    warning it may catch to stop cleanly before its ``time_limit`` stops it. Not caught,
    the run fails like any error (retried or poisoned by its policy)."""


class RunInfo(NamedTuple):
    """The message a handler is running (a named tuple: one is made per message)."""

    message_id: str
    task: str
    queue: str
    key: str | None
    attempt: int
    keep_value: bool = False  # what the handler returns is needed (a chain's next step)
    traceparent: str | None = None  # the producer's span (OpenTelemetry), from the headers
    lateness_ms: int = 0  # from the message's due time to this run's start
    time_limit_s: float | None = None  # the run is stopped this long after it starts
    soft_time_limit_s: float | None = None  # SoftTimeLimitExceeded this long after it starts


#: writes a run's progress: (run, fraction, note)
ProgressReporter = Callable[[RunInfo, float, str | None], None]


class RunContext:
    """One handler's run: what it is running and whether it was asked to stop."""

    __slots__ = ("_aborted", "_event", "_reporter", "_started", "abort_seen", "info")

    _event_lock = threading.Lock()

    def __init__(self, info: RunInfo, reporter: ProgressReporter | None = None) -> None:
        self.info = info
        self._reporter = reporter  # writes progress (the worker gives one)
        self._aborted = False
        #: whether the handler was told of its abort (``aborted``, ``wait_aborted``): a
        #: handler that then returns stopped because of it, and its run ends as aborted
        self.abort_seen = False
        self._event: threading.Event | None = None  # made only if a handler waits on it
        self._started = 0.0  # when its handler started (monotonic), set by ``enter``

    @property
    def message_id(self) -> str:
        return self.info.message_id

    @property
    def key(self) -> str | None:
        return self.info.key

    @property
    def queue(self) -> str:
        return self.info.queue

    @property
    def attempt(self) -> int:
        """1 on the first delivery."""
        return self.info.attempt

    @property
    def aborted(self) -> bool:
        """True once an abort of this run was requested (a handler that sees it and
        returns ends its run as aborted)."""
        if self._aborted:
            self.abort_seen = True
        return self._aborted

    def raise_if_aborted(self) -> None:
        """Raise ``Aborted`` if an abort of this run was requested."""
        if self._aborted:
            raise Aborted(f"message {self.info.message_id} was aborted")

    def wait_aborted(self, timeout_s: float) -> bool:
        """Sleep up to ``timeout_s``, waking at once on an abort; True if aborted (a
        ``time.sleep`` that an abort interrupts)."""
        with self._event_lock:
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        if self._aborted or event.wait(timeout_s) or self._aborted:
            self.abort_seen = True
            return True
        return False

    def time_left(self) -> float | None:
        """Seconds before this run is stopped by its task's ``time_limit`` (None: it has
        none); a handler with a long loop checks it to stop cleanly first."""
        limit = self.info.time_limit_s
        if limit is None:
            return None
        return max(0.0, limit - (time.monotonic() - self._started))

    def progress(self, fraction: float, note: str | None = None) -> None:
        """Report how far this run has come (a fraction from 0 to 1, and a short note),
        readable with its handle while it runs; for a task that keeps its results (one
        backend write per call: report at a human pace, not per row)."""
        if self._reporter is None:
            raise TickworkError("progress can only be reported from a run a worker started")
        self._reporter(self.info, fraction, note)

    def request_abort(self) -> None:
        """Mark this run aborted (the worker calls it; any thread)."""
        self._aborted = True
        with self._event_lock:
            event = self._event
        if event is not None:
            event.set()


_current: ContextVar[RunContext | None] = ContextVar("tickwork_run", default=None)


def current_run() -> RunContext:
    """The run of the handler calling this. Outside a handler: ``TickworkError``."""
    run = _current.get()
    if run is None:
        raise TickworkError("current_run() is only available inside a running task handler")
    return run


def enter(run: RunContext) -> Token[RunContext | None]:
    """Make ``run`` the current run until ``leave(token)`` (the worker calls both around
    a handler; a plain pair, not a context manager, as it runs once per message)."""
    run._started = time.monotonic()
    return _current.set(run)


def leave(token: Token[RunContext | None]) -> None:
    _current.reset(token)
