"""The tickwork tasks that run Django's ``@task`` functions on a tickwork worker.

A Django task is enqueued as a message of ``django.tasks.run`` (or ``django.tasks.arun``
for an ``async def`` function, run on the worker's event loop) whose arguments are the
function's dotted path, its arguments and when it was enqueued. The runner imports the
``Task``, sends Django's ``task_started`` and ``task_finished`` signals around it and
returns what ``get_result`` needs once the message is gone: the value and the call.

Both keep their results and record every attempt (``history``), so ``get_result`` can
tell the status, the value, the errors and the workers of each attempt. Like Django's own
backends, a failed Django task is not retried: it fails for good (tickwork's poison
store keeps it, with its traceback, and ``tickwork poison replay`` runs it again).
"""

from __future__ import annotations

import os
import socket
from datetime import UTC, datetime
from typing import Any

from django.utils.module_loading import import_string

from tickwork.django.compat import (
    Task,
    TaskContext,
    TaskError,
    TaskResult,
    TaskResultStatus,
    get_exception_traceback,
    get_module_path,
    normalize_json,
    task_finished,
    task_started,
)
from tickwork.scheduler import App, UnknownTask
from tickwork.scheduler.runs.context import current_run

#: the tickwork task names of the runners (sync and ``async def`` functions)
RUN = "django.tasks.run"
ARUN = "django.tasks.arun"
RUNNERS = (RUN, ARUN)

#: who runs this attempt, as ``worker_ids`` lists it
WORKER_ID = f"{socket.gethostname()}:{os.getpid()}"


def register_runners(app: App) -> None:
    """Register both runners on ``app`` (once)."""
    if RUN in app.registry.tasks:
        return

    @app.task(name=RUN, keep_result=True, history=True)
    def run(path: str, args: list[Any], kwargs: dict[str, Any], enqueued_ms: int) -> Any:
        task = _task(path)
        result = _running(task, args, kwargs, enqueued_ms)
        try:
            if task.takes_context:
                value = task.call(TaskContext(task_result=result), *args, **kwargs)
            else:
                value = task.call(*args, **kwargs)
        except BaseException as err:
            _finished(result, err)
            raise
        return _succeeded(result, value)

    @app.task(name=ARUN, keep_result=True, history=True)
    async def arun(path: str, args: list[Any], kwargs: dict[str, Any], enqueued_ms: int) -> Any:
        task = _task(path)
        result = _running(task, args, kwargs, enqueued_ms)
        try:
            if task.takes_context:
                value = await task.acall(TaskContext(task_result=result), *args, **kwargs)
            else:
                value = await task.acall(*args, **kwargs)
        except BaseException as err:
            _finished(result, err)
            raise
        return _succeeded(result, value)


def _task(path: str) -> Task[Any, Any]:
    """The Django ``Task`` at ``path``; ``UnknownTask`` (poisoned at once) if none."""
    try:
        found = import_string(path)
    except ImportError as err:
        raise UnknownTask(f"no Django task at {path!r}: {err}") from err
    if not isinstance(found, Task):
        raise UnknownTask(f"{path!r} is not a Django task (decorate it with @task)")
    return found


def _running(
    task: Task[Any, Any], args: list[Any], kwargs: dict[str, Any], enqueued_ms: int
) -> TaskResult[Any]:
    """The ``TaskResult`` of this attempt as it starts (what ``TaskContext`` carries),
    after ``task_started`` is sent."""
    run = current_run()
    now = datetime.now(UTC)
    result: TaskResult[Any] = TaskResult(
        task=task,
        id=run.message_id,
        status=TaskResultStatus.RUNNING,
        enqueued_at=datetime.fromtimestamp(enqueued_ms / 1000, UTC),
        started_at=now,
        last_attempted_at=now,
        finished_at=None,
        args=args,
        kwargs=kwargs,
        backend=task.backend,
        errors=[],
        # one entry an attempt (``attempts`` counts them); earlier workers are not known
        # here: get_result reads each attempt's worker from the history
        worker_ids=[WORKER_ID] * max(1, run.attempt),
    )
    task_started.send(type(task.get_backend()), task_result=result)
    return result


def _finished(result: TaskResult[Any], error: BaseException | None) -> None:
    """Mark ``result`` finished (failed with ``error``, if given); send ``task_finished``."""
    object.__setattr__(result, "finished_at", datetime.now(UTC))
    if error is None:
        object.__setattr__(result, "status", TaskResultStatus.SUCCESSFUL)
    else:
        object.__setattr__(result, "status", TaskResultStatus.FAILED)
        result.errors.append(
            TaskError(
                exception_class_path=get_module_path(type(error)),
                traceback=get_exception_traceback(error),
            )
        )
    task_finished.send(type(result.task.get_backend()), task_result=result)


def _succeeded(result: TaskResult[Any], value: Any) -> dict[str, Any]:
    """What the run keeps: the value (as JSON, as Django keeps it) and the call."""
    normalized = normalize_json(value)
    object.__setattr__(result, "_return_value", normalized)
    _finished(result, None)
    return {
        "runner": RUN,  # what get_result checks before it reads the rest
        "value": normalized,
        "task": result.task.module_path,
        "args": result.args,
        "kwargs": result.kwargs,
        "queue": current_run().queue,
        "enqueued_ms": round(result.enqueued_at.timestamp() * 1000) if result.enqueued_at else 0,
        "started_ms": round(result.started_at.timestamp() * 1000) if result.started_at else 0,
    }
