"""A Django ``TaskResult`` read back from tickwork: where the message stands (stored,
running, its result record, the poison store) and what each attempt left in its history.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from django.utils.module_loading import import_string

from tickwork.django.compat import (
    Task,
    TaskError,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
)
from tickwork.django.runner import RUNNERS
from tickwork.scheduler import App, Message
from tickwork.scheduler.model.handles import RunStatus
from tickwork.scheduler.schedules.ledger import HistoryEntry, RunOutcome

#: how an attempt that raised ended
_FAILED = (RunOutcome.RETRIED, RunOutcome.POISONED, RunOutcome.ABORTED)
#: the last line of a traceback: the exception's dotted class, then its message
_RAISED = re.compile(r"^([A-Za-z_][\w.]*)(?::|$)")


def read_result(app: App, alias: str, result_id: str) -> TaskResult[Any]:
    """The ``TaskResult`` of message ``result_id``; ``TaskResultDoesNotExist`` when it is
    not a Django task's or nothing is known of it any more."""
    info = app.result(result_id)
    if info.status in (RunStatus.SCHEDULED, RunStatus.READY, RunStatus.RUNNING):
        stored = app.get(id=result_id)
        if stored is not None:
            status = (
                TaskResultStatus.RUNNING
                if info.status is RunStatus.RUNNING
                else TaskResultStatus.READY
            )
            return _result(app, alias, result_id, stored.message, status)
        info = app.result(result_id)  # it finished between the two reads
    if info.status is RunStatus.SUCCEEDED and _is_call(info.value):
        kept: dict[str, Any] = info.value
        result = _from_call(app, alias, result_id, kept, TaskResultStatus.SUCCESSFUL)
        object.__setattr__(result, "_return_value", kept.get("value"))
        if result.finished_at is None and info.updated_at is not None:
            object.__setattr__(result, "finished_at", info.updated_at)
        return result
    if info.status is RunStatus.FAILED:
        poisoned = app.backend.poison.get(result_id)
        if poisoned is not None:
            message = Message.decode(poisoned.envelope.body)
            result = _result(app, alias, result_id, message, TaskResultStatus.FAILED)
            failed_at = datetime.fromtimestamp(poisoned.failed_at_ms / 1000, UTC)
            object.__setattr__(result, "finished_at", failed_at)
            last = TaskError(
                exception_class_path=_raised(poisoned.failure.traceback)
                or _dotted(poisoned.failure.error_type),
                traceback=poisoned.failure.traceback or poisoned.failure.message,
            )
            if result.errors:
                result.errors[-1] = last  # the history's first line: the whole traceback
            else:
                result.errors.append(last)
            return result
    raise TaskResultDoesNotExist(result_id)


def _is_call(value: Any) -> bool:
    """Whether ``value`` is what a runner keeps (not any task's value that looks alike)."""
    return (
        isinstance(value, dict)
        and value.get("runner") in RUNNERS
        and isinstance(value.get("task"), str)
    )


def _result(
    app: App, alias: str, result_id: str, message: Message, status: TaskResultStatus
) -> TaskResult[Any]:
    """From the stored (or poisoned) message: the call is its arguments."""
    if message.task not in RUNNERS or len(message.args) != 3:
        raise TaskResultDoesNotExist(result_id)
    path, args, kwargs = message.args
    call = {
        "task": path,
        "args": args,
        "kwargs": kwargs,
        "enqueued_ms": message.kwargs.get("enqueued_ms", 0),
        "queue": message.queue,
        "priority": message.priority,
    }
    return _from_call(app, alias, result_id, call, status)


def _from_call(
    app: App, alias: str, result_id: str, call: dict[str, Any], status: TaskResultStatus
) -> TaskResult[Any]:
    task = import_string(call["task"])
    if not isinstance(task, Task):
        raise TaskResultDoesNotExist(result_id)
    changes: dict[str, Any] = {}
    if "queue" in call:
        changes["queue_name"] = call["queue"]
    if call.get("priority"):
        changes["priority"] = call["priority"]
    if changes:
        task = task.using(**changes)
    attempts = sorted(
        app.run_history(result_id, queue=task.queue_name),
        key=lambda entry: entry.started_at or entry.scheduled_at,
    )
    started = [entry.started_at for entry in attempts if entry.started_at is not None]
    done = status in (TaskResultStatus.SUCCESSFUL, TaskResultStatus.FAILED)
    finished = attempts[-1].finished_at if attempts and done else None
    return TaskResult(
        task=task,
        id=result_id,
        status=status,
        enqueued_at=_at(call.get("enqueued_ms")),
        started_at=started[0] if started else _at(call.get("started_ms")),
        last_attempted_at=started[-1] if started else _at(call.get("started_ms")),
        finished_at=finished,
        args=call["args"],
        kwargs=call["kwargs"],
        backend=alias,
        errors=[_error(entry) for entry in attempts if entry.outcome in _FAILED],
        worker_ids=[entry.worker or "" for entry in attempts if entry.started_at is not None],
    )


def _error(entry: HistoryEntry) -> TaskError:
    """A failed attempt's error, from its history record (its error's first line)."""
    text = entry.error or entry.outcome.value
    return TaskError(exception_class_path=_raised(text) or "builtins.Exception", traceback=text)


def _raised(traceback: str) -> str | None:
    """The dotted class of the exception a traceback ends with (Python prints a class
    outside ``builtins`` with its module)."""
    lines = [line for line in traceback.strip().splitlines() if line.strip()]
    found = _RAISED.match(lines[-1]) if lines else None
    return None if found is None else _dotted(found.group(1))


def _dotted(name: str) -> str:
    return name if "." in name else f"builtins.{name}"


def _at(epoch_ms: Any) -> datetime | None:
    return datetime.fromtimestamp(epoch_ms / 1000, UTC) if epoch_ms else None
