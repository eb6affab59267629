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

``app.result(id)`` reads one record (``read``); the ``TaskHandle`` that ``delay()`` and
``schedule()`` return reads through it (``scheduler.model.handles``).
"""

from __future__ import annotations

import time
from typing import Literal, Protocol

from pydantic import ValidationError as PydanticValidationError

from tickwork.scheduler.backends import Backend, State
from tickwork.scheduler.clock import to_datetime
from tickwork.scheduler.errors import TickworkError
from tickwork.scheduler.model.handles import RunOutcome, RunStatus, TaskInfo
from tickwork.scheduler.runs.context import RunInfo
from tickwork.scheduler.runs.encoding import encode_value as encode_value


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
