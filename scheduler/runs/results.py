"""Results and progress of runs: what a task returned, or why it failed for good, and how
far a running one has come, kept in the backend by message id for a retention time.

A task keeps its results when it asks (``@app.task(keep_result=True)``, or a
``timedelta`` for its own retention) or when the app does (setting ``keep_results``);
the retention is the setting ``result_retention_s`` (one day) unless the task gives one.
The worker stores the record of a run that succeeded before it acks the message, and the
record of one that failed for good when it poisons it, so a record never says
"succeeded" for a run whose ack could still be lost: at worst a crash between the two runs
the message again, and the record is written again. ``progress(fraction, note)`` from
inside a running handler writes a "running" record.

``delay()`` and ``schedule()`` return a ``TaskHandle``: the message id (a ``str``, as
before) with ``status()``, ``info()``, ``result(timeout)``, ``aresult(timeout)`` and
``cancel()``; ``app.result(id)`` reads one record.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict
from pydantic import ValidationError as PydanticValidationError
from pydantic_core import to_json

from tickwork.scheduler.backends import Backend, State
from tickwork.scheduler.clock import to_datetime
from tickwork.scheduler.errors import TickworkError
from tickwork.scheduler.runs.context import RunInfo


class ResultReader(Protocol):
    """What a handle reads through (an ``App``)."""

    def result_retention_ms(self, task: str) -> int | None: ...

    def result(self, id: str) -> TaskInfo: ...

    def cancel(
        self, *, id: str | None = None, key: str | None = None, queue: str | None = None
    ) -> bool: ...


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


class ResultRecord(RunOutcome):
    """The record kept for a message id (compact JSON in the backend)."""

    status: Literal["running", "succeeded", "failed"]
    at_ms: int = 0

    @classmethod
    def decode(cls, body: bytes) -> ResultRecord:
        try:
            return cls.model_validate_json(body)
        except (PydanticValidationError, ValueError) as err:
            raise TickworkError(f"not a tickwork result record: {err}") from err


def succeeded_record(value_json: bytes, attempt: int, at_ms: int) -> bytes:
    """The record of a run that returned ``value_json`` (already encoded: the worker
    encodes it where the handler ran, the process pool included)."""
    head = b'{"status":"succeeded","attempt":%d,"at_ms":%d,"value":' % (attempt, at_ms)
    return head + value_json + b"}"


def failed_record(error_type: str, error: str, attempt: int, at_ms: int) -> bytes:
    record = ResultRecord(
        status="failed", error_type=error_type, error=error, attempt=attempt, at_ms=at_ms
    )
    return record.model_dump_json(exclude_defaults=True).encode()


def running_record(progress: float, note: str | None, attempt: int, at_ms: int) -> bytes:
    if not 0.0 <= progress <= 1.0:
        raise ValueError(f"progress must be a fraction from 0 to 1, not {progress!r}")
    record = ResultRecord(
        status="running", progress=progress, note=note, attempt=attempt, at_ms=at_ms
    )
    return record.model_dump_json(exclude_defaults=True).encode()


def encode_value(value: Any, max_bytes: int) -> bytes:
    """A return value as JSON; ``TypeError`` or ``ValueError`` when it cannot be kept."""
    try:
        encoded = to_json(value)
    except Exception as err:  # pydantic_core raises its own serialisation errors
        raise TypeError(
            f"the task's return value cannot be kept: it is not JSON-encodable ({err})"
        ) from err
    if len(encoded) > max_bytes:
        raise ValueError(
            f"the task's return value cannot be kept: {len(encoded)} bytes encoded, "
            f"over the {max_bytes}-byte limit (max_payload_bytes)"
        )
    return encoded


class TaskInfo(RunOutcome):
    """What ``TaskHandle.info()`` and ``App.result`` tell of one message's run."""

    id: str
    status: RunStatus
    updated_at: datetime | None = None


_STATUS_OF_STATE = {
    State.SCHEDULED: RunStatus.SCHEDULED,
    State.READY: RunStatus.READY,
    State.RUNNING: RunStatus.RUNNING,
}


def _record(backend: Backend, message_id: str) -> ResultRecord | None:
    body = backend.results.get([message_id]).get(message_id)
    return ResultRecord.decode(body) if body is not None else None


def read(backend: Backend, message_id: str) -> TaskInfo:
    """What is known of ``message_id``'s run: its final record if it finished and kept
    one, else where its stored message stands (with its progress, if it reported some)."""
    record = _record(backend, message_id)
    if record is None or record.status == "running":
        stored = backend.messages.get(message_id)
        if stored is not None:
            return _info(message_id, _STATUS_OF_STATE[stored.state], record)
        record = _record(backend, message_id)  # it may have finished between the reads
    if record is None or record.status == "running":
        return _info(message_id, RunStatus.UNKNOWN, record)
    status = RunStatus.SUCCEEDED if record.status == "succeeded" else RunStatus.FAILED
    return _info(message_id, status, record)


def _info(message_id: str, status: RunStatus, record: ResultRecord | None) -> TaskInfo:
    if record is None:
        return TaskInfo(id=message_id, status=status)
    shared = record.model_dump(include=set(RunOutcome.model_fields))
    updated_at = to_datetime(record.at_ms) if record.at_ms else None
    return TaskInfo(id=message_id, status=status, updated_at=updated_at, **shared)


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
            info = self.info()
            if (done := self._finished(info)) is not None:
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
            info = await asyncio.to_thread(self.info)
            if (done := self._finished(info)) is not None:
                return done[0]
            await asyncio.sleep(self._pause(pause, deadline, timeout))
            pause = min(pause * 2, 0.25)

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
            raise TaskFailed(str(self), info.error_type or "Error", info.error or "")
        if info.status is RunStatus.UNKNOWN:
            raise TickworkError(
                f"message {self} is not stored and no result is kept for it (it was "
                "cancelled, its task keeps no results, or its result expired)"
            )
        return None


class ProgressSink(Protocol):
    """Where progress is written (an ``App``)."""

    @property
    def backend(self) -> Backend: ...

    def result_retention_ms(self, task: str) -> int | None: ...


def report_progress(app: ProgressSink, info: RunInfo, fraction: float, note: str | None) -> None:
    """Write a "running" record with ``fraction`` and ``note`` for the run ``info``."""
    retention = app.result_retention_ms(info.task)
    if retention is None:
        raise TickworkError(
            f"task {info.task!r} keeps no results, and progress is kept with them: "
            "register it with @app.task(keep_result=True)"
        )
    record = running_record(fraction, note, info.attempt, int(time.time() * 1000))
    app.backend.results.put([(info.message_id, record, retention)])
