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
from collections.abc import Callable, Sequence
from contextvars import ContextVar, Token
from datetime import datetime, timedelta
from typing import Any, NamedTuple, TypeVar

from tickwork.scheduler.errors import Aborted as Aborted
from tickwork.scheduler.errors import InvalidMessage, TickworkError
from tickwork.scheduler.model.calls import Call
from tickwork.scheduler.model.retry import RetryPolicy
from tickwork.scheduler.runs.durable import DurableRun

T = TypeVar("T")


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
    rate: str | None = None  # the rate limit key its starts count under (``charge``)


#: writes a run's progress: (run, fraction, note)
ProgressReporter = Callable[[RunInfo, float, str | None], None]

#: opens a durable run's journal: (message id, task name, queue)
DurableOpener = Callable[[str, str, str], DurableRun]

#: counts units a run used against its rate limit: (run, units)
Charger = Callable[[RunInfo, int], None]


class RunContext:
    """One handler's run: what it is running and whether it was asked to stop."""

    __slots__ = (
        "_aborted",
        "_charger",
        "_durable",
        "_event",
        "_open_durable",
        "_reporter",
        "_started",
        "abort_seen",
        "info",
    )

    _event_lock = threading.Lock()

    def __init__(
        self,
        info: RunInfo,
        reporter: ProgressReporter | None = None,
        durable: DurableOpener | None = None,
        charger: Charger | None = None,
    ) -> None:
        self.info = info
        self._reporter = reporter  # writes progress (the worker gives one)
        self._charger = charger  # counts units against the rate limit (the worker gives one)
        self._open_durable = durable  # opens the journal of a durable task's run
        self._durable: DurableRun | None = None
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

    def charge(self, units: int) -> None:
        """Count ``units`` more of this run's rate limit (its task's ``rate_limit`` or
        ``throttle``) than its call's ``cost=`` did: the tokens a model's answer took
        against a tokens-per-minute budget. Counted in the backend at once, in the
        window's next room, so the limit's later starts wait for the budget."""
        if self._charger is None:
            raise TickworkError("a charge can only be made from a run a worker started")
        if isinstance(units, bool) or not isinstance(units, int) or units < 1:
            raise InvalidMessage(f"charge takes a whole number of units >= 1, not {units!r}")
        if self.info.rate is None:
            raise InvalidMessage(
                f"task {self.info.task!r} has no rate_limit or throttle to charge units to"
            )
        self._charger(self.info, units)

    # -- a durable task's steps (``scheduler/runs/durable.py``) ---------------------------

    def step(
        self,
        name: str,
        fn: Callable[..., T],
        /,
        *args: Any,
        retry: int | RetryPolicy | None = None,
        time_limit: float | timedelta | None = None,
        **kwargs: Any,
    ) -> T:
        """Run ``fn(*args, **kwargs)`` as step ``name`` of this durable run, once: on a
        replay its journaled value is returned without running it. ``retry``: the step's
        own retries (a count or a ``RetryPolicy``; the task's policy by default);
        ``time_limit``: past it the step fails; a step that fails for good raises
        ``StepFailed``."""
        return self.durable.step(name, fn, *args, retry=retry, time_limit=time_limit, **kwargs)

    async def astep(
        self,
        name: str,
        fn: Callable[..., Any],
        /,
        *args: Any,
        retry: int | RetryPolicy | None = None,
        time_limit: float | timedelta | None = None,
        **kwargs: Any,
    ) -> Any:
        """``step`` for an ``async def`` handler (``fn`` may be a coroutine function)."""
        durable = self.durable
        return await durable.astep(name, fn, *args, retry=retry, time_limit=time_limit, **kwargs)

    def sleep(self, delay: float | timedelta, *, name: str = "sleep") -> None:
        """Sleep ``delay`` (seconds or a ``timedelta``) without holding a thread or a
        lease: the run is stored due at its wake-up and resumes from its journal."""
        self.durable.sleep(delay, name=name)

    def sleep_until(self, when: datetime, *, name: str = "sleep") -> None:
        """Sleep until ``when`` (an aware datetime), as ``sleep`` does."""
        self.durable.sleep_until(when, name=name)

    def wait_for_event(
        self, name: str, *, key: str | None = None, timeout: float | timedelta
    ) -> dict[str, Any] | None:
        """Wait for an event ``name`` (with ``key``, when given) for at most ``timeout``
        without holding a thread: the event as a dict, or None when the timeout came
        first (``app.emit`` wakes the run)."""
        return self.durable.wait_for_event(name, key=key, timeout=timeout)

    def spawn(self, call: Call) -> str:
        """Start ``call`` (``task.call(...)``) as a child of this durable run, once (a
        replay gets the same child back); its message id, for ``gather``."""
        return self.durable.spawn(call)

    def gather(self, child_ids: Sequence[str]) -> list[Any]:
        """Wait for the children ``child_ids`` without holding a thread: their values, in
        order; a child failed for good raises ``StepFailed``."""
        return self.durable.gather(child_ids)

    def now(self) -> datetime:
        """The time (UTC) as this durable run first saw it at this point (journaled)."""
        return self.durable.now()

    def random(self) -> float:
        """A random float in [0, 1), journaled: the same on a replay."""
        return self.durable.random()

    def patched(self, patch_id: str) -> bool:
        """Whether this durable run takes the new code path of change ``patch_id`` (False
        for a run journaled past this point before the change)."""
        return self.durable.patched(patch_id)

    @property
    def step_id(self) -> str:
        """Inside a durable step: its stable id, for an outside API's idempotency key."""
        return self.durable.step_id

    @property
    def durable(self) -> DurableRun:
        """This run's journal (a durable task's run only)."""
        if self._durable is None:
            if self._open_durable is None:
                raise TickworkError(
                    "durable steps need a run a worker started (run_task and inline mode "
                    "run a task once, with no journal)"
                )
            info = self.info
            self._durable = self._open_durable(info.message_id, info.task, info.queue)
        return self._durable

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
