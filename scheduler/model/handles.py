"""What a caller holds of a run: ``TaskHandle`` (the id ``delay()`` and ``schedule()``
return, with ``status()``, ``info()``, ``result(timeout)``, ``aresult(timeout)``,
``watch()``, ``awatch()`` and ``cancel()``), the ``TaskInfo`` it reads and the errors
``result()`` raises. The handle reads through its app (``ResultReader``); the records it
reads are written and read by ``scheduler.runs.results``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

from tickwork.scheduler.errors import TickworkError
from tickwork.scheduler.ids import occurrence_id
from tickwork.scheduler.model.watching import WATCH_EVERY_S, achanges, changes


class ResultReader(Protocol):
    """What a handle reads through (an ``App``)."""

    def result_retention_ms(self, task: str) -> int | None: ...

    def result(self, id: str) -> TaskInfo: ...

    def get(self, *, id: str) -> object | None: ...  # the stored message, if any

    def cancel(
        self, *, id: str | None = None, key: str | None = None, queue: str | None = None
    ) -> bool: ...


class WorkflowHandle(Protocol):
    """What ``group(...).delay()``, ``batch(...).delay()`` and ``graph(...).delay()``
    return: a ``BatchHandle`` (a group's or a batch's: ``result()`` is the members'
    results in order) or a ``GraphHandle`` (``result()`` is each step's result by name)."""

    @property
    def id(self) -> str: ...

    def result(self, timeout: float | None = None) -> Any: ...

    async def aresult(self, timeout: float | None = None) -> Any: ...


class TaskFailed(TickworkError):
    """Raised by ``result()`` for a run that failed for good (poisoned or aborted)."""

    def __init__(self, message_id: str, error_type: str, error: str) -> None:
        super().__init__(f"message {message_id} failed: {error_type}: {error}")
        self.message_id = message_id
        self.error_type = error_type
        self.error = error


class ResultTimeout(TickworkError, TimeoutError):
    """Raised by ``result(timeout=...)`` when the run has not finished in time."""


class RunStatus(StrEnum):
    """Where a message's run stands, as a caller sees it."""

    SCHEDULED = "scheduled"  # waiting for its due time
    READY = "ready"  # due, waiting for a worker
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # poisoned or aborted: it will not run again unless replayed
    UNKNOWN = "unknown"  # not stored and no record kept (no results kept, expired, cancelled)


class RunOutcome(BaseModel):
    """What a record and a ``TaskInfo`` share: the run's value or error, its progress."""

    model_config = ConfigDict(frozen=True)

    value: Any = None
    error_type: str | None = None
    error: str | None = None
    progress: float | None = None
    note: str | None = None
    attempt: int = 0


class TaskInfo(RunOutcome):
    """What ``TaskHandle.info()`` and ``App.result`` tell of one message's run."""

    id: str
    status: RunStatus
    updated_at: datetime | None = None


class IdHandle(str):
    """An id handed back to a caller (a ``str``: compare, print and store it as one) that
    reads through the app it came from (``TaskHandle``, ``BatchHandle``)."""

    def __reduce__(self) -> tuple[type[str], tuple[str]]:
        """Pickled (or copied) as the plain id: the app it reads through stays here."""
        return (str, (str(self),))

    @property
    def id(self) -> str:
        return str(self)


class TaskHandle(IdHandle):
    """The id of an enqueued message, and what its caller can ask of its run."""

    _app: ResultReader
    _task: str | None

    def __new__(cls, message_id: str, app: ResultReader, task: str | None = None) -> TaskHandle:
        handle = super().__new__(cls, message_id)
        handle._app = app
        handle._task = task
        return handle

    def info(self) -> TaskInfo:
        """The run's status, result or error, and progress, read now."""
        return self._app.result(str(self))

    def status(self) -> RunStatus:
        return self.info().status

    def cancel(self) -> bool:
        """Cancel the message if it has not run (True if it was stored)."""
        return self._app.cancel(id=str(self))

    def result(self, timeout: float | None = None) -> Any:
        """Wait for the run to finish and return what the task returned; ``TaskFailed``
        if it failed for good, ``ResultTimeout`` after ``timeout`` seconds (None: wait
        as long as it takes)."""
        self._check_kept()
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.005
        while True:
            if (done := self._finished(self.info())) is not None:
                return done[0]
            time.sleep(self._pause(pause, deadline, timeout))
            pause = min(pause * 2, 0.25)

    async def aresult(self, timeout: float | None = None) -> Any:
        """``result`` for code in an event loop: the reads run in a thread, the waits are
        ``asyncio.sleep``."""
        self._check_kept()
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.005
        while True:
            if (done := self._finished(await asyncio.to_thread(self.info))) is not None:
                return done[0]
            await asyncio.sleep(self._pause(pause, deadline, timeout))
            pause = min(pause * 2, 0.25)

    def watch(
        self, every: float = WATCH_EVERY_S, timeout: float | None = None
    ) -> Iterator[TaskInfo]:
        """Each change of the run as it happens (read every ``every`` seconds: its state,
        attempt, progress and note, its value or error): the state now, then each read
        that differs, ending with the run's end (succeeded, failed, or unknown: gone
        with no record kept); ``ResultTimeout`` after ``timeout`` seconds."""
        return changes(self.info, every, timeout, _ended, self._late(timeout))

    def awatch(
        self, every: float = WATCH_EVERY_S, timeout: float | None = None
    ) -> AsyncIterator[TaskInfo]:
        """``watch`` for code in an event loop (``async for info in handle.awatch()``)."""
        return achanges(self.info, every, timeout, _ended, self._late(timeout))

    def _late(self, timeout: float | None) -> Callable[[], Exception]:
        return lambda: ResultTimeout(f"message {self} has not finished within {timeout:g} s")

    def _pause(self, pause: float, deadline: float | None, timeout: float | None) -> float:
        """How long to wait before looking again; ``ResultTimeout`` once past the deadline."""
        if deadline is None:
            return pause
        left = deadline - time.monotonic()
        if left <= 0:
            raise ResultTimeout(f"message {self} has not finished within {timeout:g} s")
        return min(pause, left)

    def _check_kept(self) -> None:
        if self._task is not None and self._app.result_retention_ms(self._task) is None:
            raise TickworkError(
                f"task {self._task!r} does not keep its results: register it with "
                "@app.task(keep_result=True) (or set keep_results for the app)"
            )

    def _finished(self, info: TaskInfo) -> tuple[Any] | None:
        """``(value,)`` when the run succeeded; raises when it failed or cannot finish."""
        if info.status is RunStatus.SUCCEEDED:
            return (info.value,)
        if info.status is RunStatus.FAILED:
            raise TaskFailed(info.id, info.error_type or "Error", info.error or "")
        if info.status is RunStatus.UNKNOWN:
            raise TickworkError(
                f"message {self} is not stored and no result is kept for it (it was "
                "cancelled, its task keeps no results, or its result expired)"
            )
        return None


def _ended(info: TaskInfo) -> bool:
    return info.status in (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.UNKNOWN)


#: where a chain is while one of its steps is in one of these states
_AT_STEP = frozenset({RunStatus.SCHEDULED, RunStatus.READY, RunStatus.RUNNING, RunStatus.FAILED})


class ChainHandle(TaskHandle):
    """The handle of an enqueued chain (``chain(...).delay()``): its id is the first
    step's, as ``app.enqueue`` returns it; ``result()`` waits for the last step's value
    (its task must keep results) and raises ``TaskFailed`` for a step that failed."""

    _steps: int

    def __new__(cls, first_id: str, app: ResultReader, last_task: str, steps: int) -> ChainHandle:
        handle = str.__new__(cls, first_id)
        handle._app, handle._task, handle._steps = app, last_task, steps
        return handle

    def step(self, index: int) -> TaskHandle:
        """The handle of step ``index`` (0 is the first)."""
        return TaskHandle(occurrence_id(str(self), index), self._app)

    def info(self) -> TaskInfo:
        """The step the chain is at (waiting, running or failed), read now, earlier steps
        first (a step's ack writes the next one in the same atomic step, so a live chain
        is always seen at one of them; a step whose result is kept, which is written just
        before the ack, is running until its message is gone); the last step's once the
        others are done."""
        last = self._steps - 1
        for index in range(last):
            step = occurrence_id(str(self), index)
            info = self._app.result(step)
            if info.status in _AT_STEP:
                return info
            if info.status is RunStatus.SUCCEEDED and self._app.get(id=step) is not None:
                # its result is written before its ack, which writes the next step
                return info.model_copy(update={"status": RunStatus.RUNNING})
        return self._app.result(occurrence_id(str(self), last))

    def cancel(self) -> bool:
        """Cancel the step the chain is at, if it has not run (the steps after it never
        run)."""
        return self._app.cancel(id=self.info().id)

    def _finished(self, info: TaskInfo) -> tuple[Any] | None:
        if info.status is RunStatus.UNKNOWN:
            raise TickworkError(
                f"chain {self} stopped before its last step: a step failed for good (see "
                "`tickwork poison list`) or the chain was cancelled"
            )
        return super()._finished(info)
